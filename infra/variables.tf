variable "project_id" {
  description = "Google Cloud project that hosts the service."
  type        = string
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a project ID (6-30 lowercase letters, digits, hyphens), not a name or number."
  }
}

variable "region" {
  description = "Region for Cloud SQL, the functions, the scheduler jobs and the source bucket."
  type        = string
  default     = "europe-west1"
  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]$", var.region))
    error_message = "region must look like europe-west1."
  }
}

variable "name" {
  description = "Prefix of every resource name; also the DEPLOYMENT label on every signal and log record. Short, because service account IDs and IAM database user names have length limits."
  type        = string
  default     = "verify"
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,10}$", var.name))
    error_message = "name must be 2-11 lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "source_archive" {
  description = "Path of the zip built by tools/build_bundle.py (deploy.sh passes it). Its SHA-256 names the bucket object, so an unchanged bundle deploys nothing."
  type        = string
  default     = "../build/function-source.zip"
}

# ---- Cloud SQL ------------------------------------------------------------------------------

variable "db_tier" {
  description = "Cloud SQL machine tier. db-custom-1-3840 = 1 vCPU, 3.75 GB."
  type        = string
  default     = "db-custom-1-3840"
}

variable "db_availability_type" {
  description = "REGIONAL (a standby in a second zone, ~2x the price) or ZONAL."
  type        = string
  default     = "REGIONAL"
  validation {
    condition     = contains(["REGIONAL", "ZONAL"], var.db_availability_type)
    error_message = "db_availability_type must be REGIONAL or ZONAL."
  }
}

variable "db_max_connections" {
  description = <<-EOT
    PostgreSQL max_connections, set explicitly so the connection budget does not depend on the tier.
    Budget (checked by a precondition in database.tf): every function holds at most
    max_instances x concurrency connections (one per request thread: THREADS = concurrency, one
    worker), so sum(max_instances x concurrency) + db_reserved_connections <= db_max_connections.
    Defaults: create 40x1 + confirm 30x1 + dispatch 2x1 + reconcile 1x1 + status 2x1 = 75;
    75 + 15 reserved = 90 <= 100.
  EOT
  type        = number
  default     = 100
  validation {
    condition     = var.db_max_connections >= 25 && var.db_max_connections <= 4000
    error_message = "db_max_connections must be between 25 and 4000."
  }
}

variable "db_reserved_connections" {
  description = "Connections kept free for PostgreSQL superuser slots (3), Cloud SQL's own agents (~3), migrations and an operator's psql session."
  type        = number
  default     = 15
}

variable "migrators" {
  description = "IAM principals that run migrations (deploy.sh, as the deployer's identity): \"user:alice@example.com\" or \"serviceAccount:ci@PROJECT.iam.gserviceaccount.com\". They get a Cloud SQL IAM user with cloudsqlsuperuser. Use one identity: tables are owned by whoever created them."
  type        = list(string)
  validation {
    condition     = length(var.migrators) > 0 && alltrue([for m in var.migrators : can(regex("^(user|serviceAccount):[^@\\s]+@[^@\\s]+$", m))])
    error_message = "migrators must be a non-empty list of user:EMAIL or serviceAccount:EMAIL."
  }
}

# ---- Functions ------------------------------------------------------------------------------

variable "functions" {
  description = <<-EOT
    Per-function scaling. concurrency is requests per instance (and so database connections per
    instance); timeout_seconds also becomes FUNCTION_TIMEOUT_SECONDS so the code returns before the
    platform cuts it off. min_instances (default 0) keeps warm instances: confirm keeps one, so the
    page a person opens from the email does not wait for a cold start (~3 s); it costs the idle
    price of one instance (docs/deploy.md, costs). dispatch's 75 s: it waits for new work past the
    next one-minute tick, until the next invocation waits and it hands over (docs/deploy.md, "Timeouts").
  EOT
  type = map(object({
    max_instances   = number
    concurrency     = number
    timeout_seconds = number
    min_instances   = optional(number, 0)
  }))
  default = {
    create    = { max_instances = 40, concurrency = 1, timeout_seconds = 30 }
    confirm   = { max_instances = 30, concurrency = 1, timeout_seconds = 30, min_instances = 1 }
    dispatch  = { max_instances = 2, concurrency = 1, timeout_seconds = 75 }
    reconcile = { max_instances = 1, concurrency = 1, timeout_seconds = 50 }
    status    = { max_instances = 2, concurrency = 1, timeout_seconds = 30 }
    reports   = { max_instances = 5, concurrency = 1, timeout_seconds = 30 }
  }
  validation {
    condition     = alltrue([for k in ["create", "confirm", "dispatch", "reconcile", "status"] : contains(keys(var.functions), k)])
    error_message = "functions must configure create, confirm, dispatch, reconcile and status."
  }
  validation {
    condition     = alltrue([for f in values(var.functions) : f.max_instances >= 1 && f.concurrency >= 1 && f.concurrency <= 80 && f.timeout_seconds >= 5 && f.timeout_seconds <= 3600 && f.min_instances >= 0 && f.min_instances <= f.max_instances])
    error_message = "max_instances >= 1, 0 <= min_instances <= max_instances, 1 <= concurrency <= 80, 5 <= timeout_seconds <= 3600."
  }
  validation {
    # Scheduled every minute. reconcile must end before the next tick. dispatch may outlive it (an
    # idle invocation hands over to the next one, outbox/idle.py) but not two ticks (max_instances 2).
    condition     = var.functions["dispatch"].timeout_seconds <= 110 && var.functions["reconcile"].timeout_seconds < 60
    error_message = "dispatch's timeout_seconds must be at most 110 (it may overlap one tick), reconcile's under 60."
  }
}

variable "memory" {
  description = "Memory per function instance (one vCPU is attached so a cold start stays short)."
  type        = string
  default     = "512Mi"
}

variable "signup_site_service_account" {
  description = "Email of the service account the signup site calls create_verification with (an OIDC identity token). Only it may invoke create."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9-]+@[a-z0-9.-]+\\.iam\\.gserviceaccount\\.com$", var.signup_site_service_account))
    error_message = "signup_site_service_account must be a service account email."
  }
}

variable "operators" {
  description = "Principals allowed to call the status function, e.g. [\"group:oncall@example.com\"]."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for m in var.operators : can(regex("^(user|group|serviceAccount|domain):", m))])
    error_message = "operators must be IAM members: user:, group:, serviceAccount: or domain:."
  }
}

variable "create_ingress" {
  description = "Ingress of create_verification. ALLOW_ALL (IAM still admits only the signup site) when the site runs outside this project's VPC; ALLOW_INTERNAL_ONLY when it calls from inside."
  type        = string
  default     = "ALLOW_ALL"
  validation {
    condition     = contains(["ALLOW_ALL", "ALLOW_INTERNAL_ONLY", "ALLOW_INTERNAL_AND_GCLB"], var.create_ingress)
    error_message = "create_ingress must be ALLOW_ALL, ALLOW_INTERNAL_ONLY or ALLOW_INTERNAL_AND_GCLB."
  }
}

variable "confirm_public_access" {
  description = <<-EOT
    How the public confirm page admits browsers without a Google identity. "allUsers": an IAM
    binding of roles/run.invoker to allUsers, which organisations enforcing Domain Restricted
    Sharing (iam.allowedPolicyMemberDomains; the default for newer organisations) refuse.
    "invoker_iam_check_disabled": no binding; deploy.sh turns off the Cloud Run invoker IAM check on
    the confirm service instead (Google's recommended way under that constraint; the Cloud
    Functions API and provider 7.x have no field for it). docs/deploy.md, "Public confirm page".
  EOT
  type        = string
  default     = "allUsers"
  validation {
    condition     = contains(["allUsers", "invoker_iam_check_disabled"], var.confirm_public_access)
    error_message = "confirm_public_access must be allUsers or invoker_iam_check_disabled."
  }
}

variable "verify_link_base" {
  description = "Base URL of the confirmation link in emails. Empty = the confirm function's own URL (https://REGION-PROJECT.cloudfunctions.net/NAME-confirm); set it when a custom domain fronts confirm."
  type        = string
  default     = ""
  validation {
    condition     = var.verify_link_base == "" || can(regex("^https://", var.verify_link_base))
    error_message = "verify_link_base must be empty or an https:// URL."
  }
}

# ---- Delivery providers (values that are not secret; secrets are in Secret Manager) ----------

variable "email_transport" {
  description = "sendgrid, smtp, or console (logs only: staging)."
  type        = string
  default     = "sendgrid"
  validation {
    condition     = contains(["sendgrid", "smtp", "console"], var.email_transport)
    error_message = "email_transport must be sendgrid, smtp or console."
  }
}

variable "sms_transport" {
  description = "twilio or console (logs only: staging)."
  type        = string
  default     = "twilio"
  validation {
    condition     = contains(["twilio", "console"], var.sms_transport)
    error_message = "sms_transport must be twilio or console."
  }
}

variable "sms_allowed_countries" {
  description = "ISO 3166 alpha-2 countries create may send SMS to (SMS_ALLOWED_COUNTRIES, docs/security.md): no default, the create function refuses to start without it."
  type        = list(string)
  validation {
    condition     = length(var.sms_allowed_countries) > 0 && alltrue([for c in var.sms_allowed_countries : can(regex("^[A-Z]{2}$", c))])
    error_message = "sms_allowed_countries must be a non-empty list of ISO 3166 alpha-2 codes such as \"US\"."
  }
}

variable "sms_max_per_hour" {
  description = "Global SMS budget per hour (SMS_MAX_PER_HOUR): past it SMS sends pause and an alert fires."
  type        = number
  default     = 500
}

variable "email_from" {
  description = "From header of verification emails."
  type        = string
  default     = "Signup <no-reply@example.com>"
}

variable "smtp" {
  description = "SMTP relay when email_transport = smtp (the password is the smtp_password secret)."
  type = object({
    host     = string
    port     = number
    username = string
    security = string
  })
  default = { host = "smtp.example.com", port = 587, username = "", security = "starttls" }
}

variable "twilio_account_sid" {
  description = "Twilio Account SID (an identifier, not a secret; the auth token is the twilio_auth_token secret)."
  type        = string
  default     = ""
}

variable "twilio_from" {
  description = "Twilio sender: an E.164 number or a Messaging Service SID."
  type        = string
  default     = ""
}

variable "secret_versions" {
  description = "Secret version each function reads, per secret (\"latest\" or a number). Pin a number to roll keys deliberately: changing it rolls every instance (see docs/deploy.md, rotation)."
  type        = map(string)
  default     = {}
  validation {
    condition     = alltrue([for v in values(var.secret_versions) : can(regex("^(latest|[1-9][0-9]*)$", v))])
    error_message = "secret_versions values must be \"latest\" or a version number."
  }
}

# ---- Monitoring ----------------------------------------------------------------------------

variable "notification_channels" {
  description = "Cloud Monitoring notification channel IDs (projects/P/notificationChannels/N) that alerts page."
  type        = list(string)
  default     = []
}

variable "oldest_ready_threshold_seconds" {
  description = "Page when the oldest eligible intent of a channel is older than this. Must be a bucket bound of the age metric (so the percentile is exact at the threshold): 30, 60, 90, 120, 180, 300, 600."
  type        = number
  default     = 120
  validation {
    condition     = contains([30, 60, 90, 120, 180, 300, 600], var.oldest_ready_threshold_seconds)
    error_message = "oldest_ready_threshold_seconds must be one of 30, 60, 90, 120, 180, 300, 600."
  }
}

variable "watermark_stale_threshold_seconds" {
  description = "Page when the reconciler watermark is older than this (the reconciler runs every minute). Must be a bucket bound: 120, 180, 300, 600, 900."
  type        = number
  default     = 300
  validation {
    condition     = contains([120, 180, 300, 600, 900], var.watermark_stale_threshold_seconds)
    error_message = "watermark_stale_threshold_seconds must be one of 120, 180, 300, 600, 900."
  }
}

variable "exclude_confirm_request_logs" {
  description = "Drop Cloud Run's request log for the confirm function, whose URLs carry one-time tokens (logging.tf)."
  type        = bool
  default     = true
}

# ---- Webhooks (issue 12) ----------------------------------------------------------------------

variable "webhook_url" {
  description = "The signup site's endpoint for signed verification events (https). Empty: no events are written. Its secret (WEBHOOK_SECRET, whsec_...) is filled out of band like the others."
  type        = string
  default     = ""
  validation {
    condition     = var.webhook_url == "" || can(regex("^https://[^/@]+(/.*)?$", var.webhook_url))
    error_message = "webhook_url must be empty or an https URL without credentials."
  }
}

variable "webhook_oldest_ready_threshold_seconds" {
  description = "Page when the oldest eligible webhook event is older than this (the receiver is failing or slow). A bucket bound of the age metric: 30, 60, 90, 120, 180, 300, 600."
  type        = number
  default     = 600
  validation {
    condition     = contains([30, 60, 90, 120, 180, 300, 600], var.webhook_oldest_ready_threshold_seconds)
    error_message = "webhook_oldest_ready_threshold_seconds must be one of 30, 60, 90, 120, 180, 300, 600."
  }
}

variable "sendgrid_webhook_public_key" {
  description = "Issue 13: the verification key SendGrid shows for the Signed Event Webhook (base64, Mail Settings > Event Webhook; docs/deploy.md). Empty = SendGrid reports are refused (403)."
  type        = string
  default     = ""
}

variable "awaiting_report_threshold_seconds" {
  description = "Issue 13: alert when an accepted delivery has had no delivered report for this long (ACCEPTED_UNDELIVERED_AGE_ALERT_SECONDS)."
  type        = number
  default     = 900
}
