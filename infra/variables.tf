variable "project_id" {
  description = "Google Cloud project that hosts the service."
  type        = string
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a project ID (6-30 lowercase letters, digits, hyphens), not a name or number."
  }
}

variable "region" {
  description = "Region for Cloud SQL, the functions, the image, the scheduler jobs and the source bucket."
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
  description = "Path of the zip built by tools/build_bundle.py (deploy.sh passes it). Its SHA-256 names the bucket object and tags the image, so an unchanged bundle deploys nothing."
  type        = string
  default     = "../build/function-source.zip"
}

# ---- Cloud SQL ------------------------------------------------------------------------------

variable "db_tier" {
  description = "Cloud SQL machine tier. null: the tier's (var.tier: small db-f1-micro, shared core and 0.6 GB; standard db-custom-1-3840 = 1 vCPU, 3.75 GB; large db-custom-8-30720 = 8 vCPU, 30 GB; docs/capacity.md sizes them)."
  type        = string
  default     = null
}

variable "db_availability_type" {
  description = "REGIONAL (a standby in a second zone, ~2x the price) or ZONAL. null: the tier's (small ZONAL, standard and large REGIONAL)."
  type        = string
  default     = null
  validation {
    condition     = var.db_availability_type == null ? true : contains(["REGIONAL", "ZONAL"], var.db_availability_type)
    error_message = "db_availability_type must be REGIONAL or ZONAL."
  }
}

variable "db_max_connections" {
  description = <<-EOT
    PostgreSQL max_connections, set explicitly so the connection budget does not depend on the tier.
    A precondition in database.tf checks sum(max_instances x concurrency) + db_reserved_connections
    <= db_max_connections: one connection per request thread (THREADS = concurrency, one worker).
    The output peak_database_connections is that sum (docs/deploy.md, "Connection budget").
    null: the tier's (small 25, standard 100, large 400).
  EOT
  type        = number
  default     = null
  validation {
    condition     = var.db_max_connections == null ? true : var.db_max_connections >= 25 && var.db_max_connections <= 4000
    error_message = "db_max_connections must be between 25 and 4000."
  }
}

variable "db_reserved_connections" {
  description = "Connections kept free for PostgreSQL superuser slots (3), Cloud SQL's own agents (~3), the migration job and an operator's psql session. null: the tier's (small 10, standard 15, large 20)."
  type        = number
  default     = null
}

# ---- Functions ------------------------------------------------------------------------------

variable "functions" {
  description = <<-EOT
    Per-function overrides of the scaling in locals.tf (function_defaults, then the tier's presets in
    tiers.tf): any of max_instances, min_instances, concurrency, timeout_seconds, and env (extra
    settings for that function only).
    Unset fields keep their defaults, so `{ create = { max_instances = 20 } }` changes one number.
    concurrency is requests per instance (and so database connections per instance);
    timeout_seconds also becomes FUNCTION_TIMEOUT_SECONDS so the code returns before the platform
    cuts it off. confirm keeps one warm instance (min_instances = 1) so the page a person opens from
    the email does not wait for a cold start. dispatch's 75 s: it waits for new work past the next
    one-minute tick, until the next invocation waits and it hands over (docs/deploy.md, "Timeouts").
  EOT
  type = map(object({
    max_instances   = optional(number)
    min_instances   = optional(number)
    concurrency     = optional(number)
    timeout_seconds = optional(number)
    env             = optional(map(string))
  }))
  default = {}
  validation {
    condition     = alltrue([for k in keys(var.functions) : contains(["create", "confirm", "dispatch", "reconcile", "status", "reports"], k)])
    error_message = "functions keys must be among create, confirm, dispatch, reconcile, status and reports."
  }
  validation {
    # A field left unset is null, and null compares as an error: try() counts it as valid.
    condition = alltrue([for f in values(var.functions) : alltrue([
      try(f.max_instances >= 1, true),
      try(f.min_instances >= 0, true),
      try(f.concurrency >= 1 && f.concurrency <= 80, true),
      try(f.timeout_seconds >= 5 && f.timeout_seconds <= 3600, true),
    ])])
    error_message = "max_instances >= 1, min_instances >= 0, 1 <= concurrency <= 80, 5 <= timeout_seconds <= 3600."
  }
  validation {
    # Scheduled every minute. reconcile must end before the next tick. dispatch may outlive it (an
    # idle invocation hands over to the next one, outbox/idle.py) but not two ticks (max_instances 2).
    condition = alltrue([
      try(var.functions["dispatch"].timeout_seconds <= 110, true),
      try(var.functions["reconcile"].timeout_seconds < 60, true),
    ])
    error_message = "dispatch's timeout_seconds must be at most 110 (it may overlap one tick), reconcile's under 60."
  }
  validation {
    # Settings the platform or this configuration owns cannot be overridden per function.
    condition     = alltrue([for f in values(var.functions) : length(setintersection(keys(coalesce(f.env, {})), ["FUNCTION_TARGET", "DB_USER", "THREADS", "ALLOWED_INVOKERS", "K_SERVICE", "PORT"])) == 0])
    error_message = "functions.*.env cannot set FUNCTION_TARGET, DB_USER, THREADS, ALLOWED_INVOKERS, K_SERVICE or PORT."
  }
}

variable "memory" {
  description = "Memory per function instance (one vCPU is attached so a cold start stays short)."
  type        = string
  default     = "512Mi"
}

variable "signup_site_service_account" {
  description = "Email of the service account the signup site calls create_verification with (an OIDC identity token); only it may invoke create. Empty: Terraform creates NAME-signup-site in this project (output signup_site_service_account)."
  type        = string
  default     = ""
  validation {
    condition     = var.signup_site_service_account == "" || can(regex("^[a-z0-9-]+@[a-z0-9.-]+\\.iam\\.gserviceaccount\\.com$", var.signup_site_service_account))
    error_message = "signup_site_service_account must be empty or a service account email."
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
  description = "Ingress of create_verification. INGRESS_TRAFFIC_ALL (IAM still admits only the signup site) when the site runs outside this project's VPC; INGRESS_TRAFFIC_INTERNAL_ONLY when it calls from inside."
  type        = string
  default     = "INGRESS_TRAFFIC_ALL"
  validation {
    condition     = contains(["INGRESS_TRAFFIC_ALL", "INGRESS_TRAFFIC_INTERNAL_ONLY", "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER"], var.create_ingress)
    error_message = "create_ingress must be INGRESS_TRAFFIC_ALL, INGRESS_TRAFFIC_INTERNAL_ONLY or INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER."
  }
}

variable "public_access" {
  description = <<-EOT
    How the public targets (confirm: people open the emailed link; reports: SendGrid and Twilio post
    to it) admit callers without a Google identity. "invoker_iam_disabled" (default): the Cloud Run
    services have the invoker IAM check turned off, with no IAM binding at all, so organisations
    enforcing Domain Restricted Sharing (iam.allowedPolicyMemberDomains, the default since
    2024-05-03) accept them. "allUsers": an IAM binding of roles/run.invoker to allUsers instead, for
    organisations that enforce run.managed.requireInvokerIam but not Domain Restricted Sharing.
    Either way the private targets keep the invoker check (invokers.tf).
  EOT
  type        = string
  default     = "invoker_iam_disabled"
  validation {
    condition     = contains(["invoker_iam_disabled", "allUsers"], var.public_access)
    error_message = "public_access must be invoker_iam_disabled or allUsers."
  }
}

variable "verify_link_base" {
  description = "Base URL of the confirmation link in emails. Empty = the confirm service's own URL (https://NAME-confirm-PROJECT_NUMBER.REGION.run.app/); set it when a custom domain fronts confirm."
  type        = string
  default     = ""
  validation {
    condition     = var.verify_link_base == "" || can(regex("^https://", var.verify_link_base))
    error_message = "verify_link_base must be empty or an https:// URL."
  }
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

variable "builder" {
  description = "The Google Cloud buildpacks builder that turns the bundle into the functions' image (the builder Cloud Run functions' own source deploys use), pinned by digest so that the same bundle always builds with the same toolchain: google-22 (Ubuntu 22.04), the newest that still ships Python 3.11. A new digest is a deliberate change (docs/deploy.md, \"The image\")."
  type        = string
  default     = "gcr.io/buildpacks/builder:google-22@sha256:8201b9de682ba74cd5552128b81940e233d3afaec27412d14dd8a8d2dc572368"
  validation {
    condition     = can(regex("@sha256:[0-9a-f]{64}$", var.builder))
    error_message = "builder must be pinned by digest (IMAGE[:TAG]@sha256:<64 hex digits>): a tag can move between two builds of the same bundle."
  }
}
