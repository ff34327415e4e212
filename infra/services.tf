# The six targets as Cloud Run services ("Cloud Run functions"): each runs the same image, built
# once per bundle from the functions-framework source by Google Cloud's buildpacks (image.tf), and
# serves the entry point its FUNCTION_TARGET names, as `functions-framework --target` does locally.
# Cloud Run services rather than google_cloudfunctions2_function: only a Cloud Run service can be
# public without an allUsers binding (invoker_iam_disabled; hashicorp/terraform-provider-google#23360),
# and one resource type for all six keeps one build, one image and one set of invoker rules.
locals {
  # Emails the in-app identity check accepts per target (auth.py, ALLOWED_INVOKERS); empty = any
  # identity IAM let through (the public targets; groups and domains cannot be matched by email).
  # dispatch: its scheduled path only; its fan-out path accepts the fan-out identity alone
  # (DISPATCH_FANOUT_SERVICE_ACCOUNT, fanout.tf) and its nudge path the nudge identity alone
  # (DISPATCH_NUDGE_SERVICE_ACCOUNT, nudge.tf), though IAM admits all of them to the service.
  operator_emails = [for m in var.operators : split(":", m)[1] if can(regex("^(user|serviceAccount):", m))]
  # Emails as Google assigns them (ID@PROJECT.iam.gserviceaccount.com), known at plan time, so
  # the settings below are too (service_accounts.tf creates these accounts).
  scheduler_email = "${var.name}-scheduler@${var.project_id}.iam.gserviceaccount.com"
  allowed_invokers = {
    create    = var.signup_site_service_account != "" ? var.signup_site_service_account : "${var.name}-signup-site@${var.project_id}.iam.gserviceaccount.com"
    confirm   = ""
    reports   = "" # public: the providers' signatures are its guard
    dispatch  = local.scheduler_email
    reconcile = local.scheduler_email
    status    = length(local.operator_emails) == length(var.operators) ? join(",", local.operator_emails) : ""
  }
  secret_version = { for s in local.enabled_secrets : s => lookup(var.secret_versions, s, "latest") }

  # Settings every function shares (README.md, "Configuration"), all known from the variables.
  # Secrets are not among them: the
  # platform injects each secret's value at instance start (the value_source env below), so the
  # code makes no Secret Manager call on a cold start. (sm:// references still work for any
  # setting, e.g. verifyctl's, shared/signup_verification/platform/secret_manager.py.)
  common_env = {
    ENVIRONMENT           = "production"
    DEPLOYMENT            = var.name
    GOOGLE_CLOUD_PROJECT  = var.project_id # log trace ids become projects/P/traces/T links
    VERIFY_LINK_BASE      = var.verify_link_base != "" ? var.verify_link_base : "${local.service_urls["confirm"]}/"
    EMAIL_TRANSPORT       = var.email_transport
    EMAIL_FROM            = var.email_from
    SMS_ALLOWED_COUNTRIES = join(",", var.sms_allowed_countries)
    SMS_MAX_PER_HOUR      = tostring(local.sms_max_per_hour)
    # the per-country create limit follows the tier (tiers.tf): 0 is none (docs/capacity.md)
    RATE_LIMIT_COUNTRY_PER_HOUR = tostring(local.tier.sms_country_per_hour)
    # the link TTL, and the oldest-ready threshold the status alerts use (the page's, alerts.tf)
    VERIFICATION_TTL_SECONDS = tostring(var.verification_ttl_seconds)
    READY_AGE_ALERT_SECONDS  = tostring(local.oldest_ready_threshold)
    SMTP_HOST                = var.smtp.host
    SMTP_PORT                = tostring(var.smtp.port)
    SMTP_USERNAME            = var.smtp.username
    SMTP_SECURITY            = var.smtp.security
    SMS_TRANSPORT            = var.sms_transport
    TWILIO_ACCOUNT_SID       = var.twilio_account_sid
    TWILIO_FROM              = var.twilio_from
    # Every function that changes a verification (confirm, reconcile, dispatch) writes its webhook
    # event; only dispatch sends them and reads WEBHOOK_SECRET.
    WEBHOOK_URL = var.webhook_url
    # dispatch sets Twilio's StatusCallback from it; delivery_reports verifies Twilio's signature over it.
    DELIVERY_REPORTS_URL        = local.reports_url
    SENDGRID_WEBHOOK_PUBLIC_KEY = var.sendgrid_webhook_public_key # public by design: verifies, cannot sign
    # db_connectivity = "private_ip": the connector dials the instance's private IP through the
    # service's Direct VPC egress (network.tf); empty (left out) means the default, its public IP.
    DB_IP_TYPE = local.private_ip ? "private" : ""
    # One gunicorn worker with as many threads as concurrent requests: Runtime.db opens one
    # connection per thread, so connections per instance = concurrency (the budget's assumption).
    WORKERS = "1"
  }

  # An empty setting is the same as an unset one to the code (config/reader.py), and Cloud Run
  # returns an empty value as absent, so empty settings are left out rather than diffed forever.
  # (Only settings known at plan time are filtered, so the set of names is known at plan time.)
  function_env = { for key, spec in local.function_specs : key => merge(
    { for name, value in merge(local.common_env, key == "dispatch" ? local.dispatch_env : {}, key == "create" ? local.create_env : {}, lookup(local.channel_env, key, {}), local.functions[key].env, {
      FUNCTION_TARGET          = spec.entry_point # what functions-framework serves from the shared image
      THREADS                  = tostring(local.functions[key].concurrency)
      FUNCTION_TIMEOUT_SECONDS = tostring(local.functions[key].timeout_seconds)
      # Where the tier keeps dispatch waiting (tiers.tf), the worker waits for new work until 2 s
      # before its timeout and hands the waiting over to the next tick's invocation (outbox/idle.py):
      # with a 75 s timeout and a once-a-minute schedule a waiter is always there, so a fresh
      # verification waits well under a second, not up to a minute (docs/benchmarks.md, create ->
      # accepted latency). The small tier keeps none waiting: create nudges dispatch instead (nudge.tf).
      DISPATCH_SAFETY_MARGIN_SECONDS = "2"
      # Defence in depth behind the IAM invoker bindings (auth.py): the identities each target accepts.
      ALLOWED_INVOKERS = local.allowed_invokers[key]
    }) : name => value if value != "" },
    {
      INSTANCE_CONNECTION_NAME = local.instance_connection_name
      DB_NAME                  = google_sql_database.main.name
      DB_USER                  = google_sql_user.function[key].name # its IAM database user
    },
  ) }
}

resource "google_cloud_run_v2_service" "function" {
  #checkov:skip=CKV_GCP_124:Ingress is chosen per function in locals.tf: confirm and reports are public by design; create (signup site, maybe outside this VPC) and status (operators) allow all networks but IAM admits only their invokers (invokers.tf); dispatch and reconcile are internal only.
  for_each            = local.function_specs
  name                = local.function_names[each.key]
  location            = var.region
  description         = each.value.description
  labels              = local.labels
  ingress             = each.value.ingress
  deletion_protection = false # stateless: rebuilt from the bundle; the database is the protected part
  # The public targets answer callers without a Google identity: no allUsers binding (refused under
  # Domain Restricted Sharing), the invoker check is off instead. Private targets keep it on.
  invoker_iam_disabled = each.value.public && var.public_access == "invoker_iam_disabled"

  template {
    service_account                  = google_service_account.function[each.key].email
    timeout                          = "${local.functions[each.key].timeout_seconds}s"
    max_instance_request_concurrency = local.functions[each.key].concurrency
    labels                           = local.labels

    scaling {
      min_instance_count = local.functions[each.key].min_instances
      max_instance_count = local.instance_limits[each.key] # dispatch: its scheduled ones + the fan-out's
    }

    # db_connectivity = "private_ip": private ranges (Cloud SQL's private IP) through the VPC,
    # everything else (Google APIs, the providers) on Cloud Run's own egress (network.tf).
    dynamic "vpc_access" {
      for_each = local.vpc_egress
      content {
        egress = "PRIVATE_RANGES_ONLY"
        network_interfaces {
          network    = vpc_access.value.network
          subnetwork = vpc_access.value.subnetwork
        }
      }
    }

    containers {
      image = local.image
      resources {
        limits   = { cpu = "1", memory = var.memory }
        cpu_idle = true # billed per request, as a function is
      }

      dynamic "env" {
        for_each = local.function_env[each.key]
        content {
          name  = env.key
          value = env.value
        }
      }

      # Exactly the secrets this function's settings name (local.function_secrets), each at the
      # version var.secret_versions pins ("latest": resolved when an instance starts).
      dynamic "env" {
        for_each = toset(local.function_secrets[each.key])
        content {
          name = local.secret_env[env.value]
          value_source {
            secret_key_ref {
              secret  = google_secret_manager_secret.secret[env.value].secret_id
              version = local.secret_version[env.value]
            }
          }
        }
      }
    }
  }

  # How the image was made, recorded on the service as Cloud Run functions record it: the source
  # bundle, the entry point, the image and the build account (the build itself is image.tf's).
  build_config {
    source_location = "gs://${google_storage_bucket.source.name}/${google_storage_bucket_object.source.name}"
    function_target = each.value.entry_point
    image_uri       = local.image
    service_account = google_service_account.build.id
  }

  traffic {
    type    = "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST"
    percent = 100
  }

  lifecycle {
    precondition {
      condition     = local.functions[each.key].min_instances <= local.functions[each.key].max_instances
      error_message = "functions.${each.key}: min_instances must not exceed max_instances."
    }
  }

  # The grants a new revision needs (secrets, image pull), after they have propagated (waits.tf).
  depends_on = [time_sleep.iam_grants]
}
