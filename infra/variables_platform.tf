# ---- Network: how the functions reach Cloud SQL (network.tf) ---------------------------------

variable "db_connectivity" {
  description = <<-EOT
    How the functions and jobs reach Cloud SQL. "public_ip" (default): the instance's public IP, which
    only the Cloud SQL connectors can use (no authorized networks, connector enforcement, client
    certificates). "private_ip": no public IP at all; the instance gets a private IP through private
    services access in a VPC Terraform creates, and every service and job reaches it with Direct VPC
    egress (network.tf). Organisations enforcing sql.restrictPublicIp need "private_ip": deploy.sh
    chooses it there when the var file does not set this (docs/deploy.md, "Private IP").
  EOT
  type        = string
  default     = "public_ip"
  validation {
    condition     = contains(["public_ip", "private_ip"], var.db_connectivity)
    error_message = "db_connectivity must be public_ip or private_ip."
  }
}

variable "private_network" {
  description = "With db_connectivity = \"private_ip\": the subnet the Cloud Run instances take their addresses from (Direct VPC egress: /26 or larger, ~2 addresses per instance) and the prefix length of the range reserved for Cloud SQL's private IP (private services access; /24 at the smallest, /20 leaves room for more instances)."
  type = object({
    run_subnet_cidr       = optional(string, "10.8.0.0/22")
    peering_prefix_length = optional(number, 20)
  })
  default = {}
  validation {
    condition     = can(cidrhost(var.private_network.run_subnet_cidr, 0)) && tonumber(split("/", var.private_network.run_subnet_cidr)[1]) <= 26
    error_message = "private_network.run_subnet_cidr must be an IPv4 CIDR range of /26 or larger."
  }
  validation {
    condition     = var.private_network.peering_prefix_length >= 8 && var.private_network.peering_prefix_length <= 24
    error_message = "private_network.peering_prefix_length must be between 8 and 24 (/24 is the smallest range Cloud SQL accepts)."
  }
}

# ---- Who is paged (alerts.tf, alerts_platform.tf) --------------------------------------------

variable "notification_email" {
  description = "Email address every alert pages (a Cloud Monitoring email notification channel Terraform creates): an on-call list, not a person's inbox. Required: an alert that reaches nobody is not an alert. notification_channels adds other channels (Slack, PagerDuty) beside it."
  type        = string
  validation {
    condition     = can(regex("^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$", var.notification_email))
    error_message = "notification_email must be an email address."
  }
}

# ---- Platform alerts (alerts_platform.tf) -----------------------------------------------------

variable "platform_alerts" {
  description = "Thresholds of the alerts on the platform itself (docs/runbook.md, \"Platform alerts\"): Cloud Run 429s and 5xx per 5 minutes per service, the p99 latency of the request-serving functions (ms, held 5 minutes), the share of max_instances that counts as saturation, Cloud SQL CPU and disk utilisation (0-1) and connections as a share of db_max_connections."
  type = object({
    http_429_per_5min   = optional(number, 20)
    http_5xx_per_5min   = optional(number, 5)
    latency_p99_ms      = optional(number, 3000)
    instance_saturation = optional(number, 0.8)
    sql_cpu             = optional(number, 0.8)
    sql_disk            = optional(number, 0.9)
    sql_connections     = optional(number, 0.9)
  })
  default = {}
  validation {
    condition = alltrue([
      var.platform_alerts.http_429_per_5min >= 0,
      var.platform_alerts.http_5xx_per_5min >= 0,
      var.platform_alerts.latency_p99_ms > 0,
      var.platform_alerts.instance_saturation > 0 && var.platform_alerts.instance_saturation <= 1,
      var.platform_alerts.sql_cpu > 0 && var.platform_alerts.sql_cpu <= 1,
      var.platform_alerts.sql_disk > 0 && var.platform_alerts.sql_disk <= 1,
      var.platform_alerts.sql_connections > 0 && var.platform_alerts.sql_connections <= 1,
    ])
    error_message = "platform_alerts: counts >= 0, latency_p99_ms > 0, and the shares (instance_saturation, sql_cpu, sql_disk, sql_connections) in (0, 1]."
  }
}
