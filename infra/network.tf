# db_connectivity = "private_ip": Cloud SQL without a public IP, for organisations that enforce
# sql.restrictPublicIp (one of Google's secure-by-default policies) or want no public address at
# all. The instance takes a private IP through private services access (a peering between this VPC
# and Google's service producer network); every service and both schema jobs reach it through
# Direct VPC egress into the subnet below, and the connector dials that private IP
# (DB_IP_TYPE=private). Only private ranges go through the VPC (PRIVATE_RANGES_ONLY): Google APIs
# (the connector's certificate, Secret Manager, Cloud Tasks) and the providers stay on Cloud Run's
# own internet egress, so no Cloud NAT is needed. The default, "public_ip", creates none of this.
locals {
  private_ip = var.db_connectivity == "private_ip"
  # What every service and job sets in its vpc_access block (services.tf, migrations.tf).
  vpc_egress = local.private_ip ? [{
    network    = google_compute_network.private[0].id
    subnetwork = google_compute_subnetwork.run[0].id
  }] : []
  # Direct VPC egress uses about two addresses per instance in steady state, more while a revision
  # replaces another, and reserves them 16 at a time; the subnet must be /26 or larger.
  run_subnet_addresses = pow(2, 32 - tonumber(split("/", var.private_network.run_subnet_cidr)[1]))
  run_subnet_needed    = 2 * (sum(values(local.instance_limits)) + length(local.schema_jobs)) + 16 * (length(local.function_specs) + length(local.schema_jobs))
}

resource "google_compute_network" "private" {
  count                   = local.private_ip ? 1 : 0
  name                    = "${var.name}-vpc"
  description             = "Signup verification: Direct VPC egress of the functions and jobs to Cloud SQL's private IP"
  auto_create_subnetworks = false
  routing_mode            = "REGIONAL"
  depends_on              = [time_sleep.apis]
}

# Nothing enters this VPC: Direct VPC egress only sends, and Cloud SQL's replies return on the
# connections it opened. Written out (the implied rule denies the same) so it holds whatever else
# is added to the network later, and with a log of what it refused.
resource "google_compute_firewall" "deny_ingress" {
  count       = local.private_ip ? 1 : 0
  name        = "${var.name}-deny-ingress"
  description = "Signup verification: no ingress into the functions' VPC"
  network     = google_compute_network.private[0].id
  direction   = "INGRESS"
  priority    = 65000
  deny {
    protocol = "all"
  }
  source_ranges = ["0.0.0.0/0"]
  log_config {
    metadata = "INCLUDE_ALL_METADATA"
  }
}

resource "google_compute_subnetwork" "run" {
  count         = local.private_ip ? 1 : 0
  name          = "${var.name}-run"
  description   = "Addresses of the Cloud Run instances (Direct VPC egress)"
  region        = var.region
  network       = google_compute_network.private[0].id
  ip_cidr_range = var.private_network.run_subnet_cidr
  # Google APIs stay reachable without an external address (the services' egress sends only
  # private ranges here, but a job or service configured for all traffic keeps working).
  private_ip_google_access = true

  log_config {
    aggregation_interval = "INTERVAL_5_MIN"
    flow_sampling        = 0.5
    metadata             = "INCLUDE_ALL_METADATA"
  }

  lifecycle {
    precondition {
      condition     = local.run_subnet_addresses >= max(64, local.run_subnet_needed)
      error_message = "private_network.run_subnet_cidr is too small for Direct VPC egress: it needs /26 or larger and about 2 addresses per instance (all functions' max instances and the jobs) plus 16 per service and job; widen it or lower max_instances."
    }
  }
}

# Private services access: a range of this VPC reserved for Google's service producers, and the
# peering that gives the Cloud SQL instance its private IP inside it.
resource "google_compute_global_address" "sql_peering" {
  count         = local.private_ip ? 1 : 0
  name          = "${var.name}-sql-peering"
  description   = "Private services access range: Cloud SQL's private IP"
  purpose       = "VPC_PEERING"
  address_type  = "INTERNAL"
  prefix_length = var.private_network.peering_prefix_length
  network       = google_compute_network.private[0].id
}

resource "google_service_networking_connection" "sql" {
  count                   = local.private_ip ? 1 : 0
  network                 = google_compute_network.private[0].id
  service                 = "servicenetworking.googleapis.com"
  reserved_peering_ranges = [google_compute_global_address.sql_peering[0].name]
  # Removing the peering while the instance still holds an address in it fails; the instance
  # (deletion protection) outlives any plan that would remove this, so it is left behind instead.
  deletion_policy = "ABANDON"
}

output "db_connectivity" {
  description = "How the functions reach Cloud SQL (var.db_connectivity): deploy.sh keeps a deployment's mode when the var file does not set it."
  value       = var.db_connectivity
}
