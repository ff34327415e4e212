locals {
  # Emails the in-app identity check accepts per target (auth.py, ALLOWED_INVOKERS); empty = any
  # identity IAM let through (confirm is public; groups and domains cannot be matched by email).
  operator_emails = [for m in var.operators : split(":", m)[1] if can(regex("^(user|serviceAccount):", m))]
  allowed_invokers = {
    create    = var.signup_site_service_account
    confirm   = ""
    reports   = "" # public: the providers' signatures are its guard
    dispatch  = google_service_account.scheduler.email
    reconcile = google_service_account.scheduler.email
    status    = length(local.operator_emails) == length(var.operators) ? join(",", local.operator_emails) : ""
  }
  secret_version = { for s in local.enabled_secrets : s => lookup(var.secret_versions, s, "latest") }

  # Settings every function shares (README.md, "Configuration"). Secrets are not among them: the
  # platform injects each secret's value at instance start (secret_environment_variables below),
  # so the code makes no Secret Manager call on a cold start. (sm:// references still work for
  # any setting, e.g. verifyctl's, shared/signup_verification/platform/secret_manager.py.)
  common_env = {
    ENVIRONMENT              = "production"
    DEPLOYMENT               = var.name
    GOOGLE_CLOUD_PROJECT     = var.project_id # log trace ids become projects/P/traces/T links
    INSTANCE_CONNECTION_NAME = google_sql_database_instance.main.connection_name
    DB_NAME                  = google_sql_database.main.name
    VERIFY_LINK_BASE         = var.verify_link_base != "" ? var.verify_link_base : "${local.confirm_url}/"
    EMAIL_TRANSPORT          = var.email_transport
    EMAIL_FROM               = var.email_from
    SMS_ALLOWED_COUNTRIES    = join(",", var.sms_allowed_countries)
    SMS_MAX_PER_HOUR         = tostring(var.sms_max_per_hour)
    SMTP_HOST                = var.smtp.host
    SMTP_PORT                = tostring(var.smtp.port)
    SMTP_USERNAME            = var.smtp.username
    SMTP_SECURITY            = var.smtp.security
    SMS_TRANSPORT            = var.sms_transport
    TWILIO_ACCOUNT_SID       = var.twilio_account_sid
    TWILIO_FROM              = var.twilio_from
    # Issue 12: set on every function, since each one that changes a verification (confirm, reconcile,
    # dispatch) writes its webhook event; only dispatch sends them and reads WEBHOOK_SECRET.
    WEBHOOK_URL = var.webhook_url
    # Issue 13: dispatch sets StatusCallback from it, delivery_reports verifies Twilio's signature over it.
    DELIVERY_REPORTS_URL        = local.reports_url
    SENDGRID_WEBHOOK_PUBLIC_KEY = var.sendgrid_webhook_public_key # public by design: verifies, cannot sign
    # One gunicorn worker with as many threads as concurrent requests: Runtime.db opens one
    # connection per thread, so connections per instance = concurrency (the budget's assumption).
    WORKERS = "1"
  }
}

resource "google_cloudfunctions2_function" "function" {
  #checkov:skip=CKV_GCP_124:Ingress is chosen per function in locals.tf: confirm is the public email link; create (signup site, maybe outside this VPC) and status (operators) allow all networks but IAM admits only their invokers (invokers.tf); dispatch and reconcile are internal only.
  for_each    = local.function_specs
  name        = local.function_names[each.key]
  location    = var.region
  description = each.value.description
  labels      = { service = "signup-verification", deployment = var.name }

  build_config {
    # python311: the version the bundle's requirements were resolved and tested with.
    runtime         = "python311"
    entry_point     = each.value.entry_point
    service_account = google_service_account.build.id
    source {
      storage_source {
        bucket = google_storage_bucket.source.name
        object = google_storage_bucket_object.source.name
      }
    }
  }

  service_config {
    min_instance_count               = var.functions[each.key].min_instances
    max_instance_count               = var.functions[each.key].max_instances
    max_instance_request_concurrency = var.functions[each.key].concurrency
    available_memory                 = var.memory
    available_cpu                    = "1"
    timeout_seconds                  = var.functions[each.key].timeout_seconds
    ingress_settings                 = each.value.ingress
    all_traffic_on_latest_revision   = true
    service_account_email            = google_service_account.function[each.key].email

    environment_variables = merge(local.common_env, {
      DB_USER                  = google_service_account.function[each.key].email
      THREADS                  = tostring(var.functions[each.key].concurrency)
      FUNCTION_TIMEOUT_SECONDS = tostring(var.functions[each.key].timeout_seconds)
      # The worker waits for new work until 2 s before its timeout (DISPATCH_IDLE_WAIT is on in
      # production), and hands the waiting over to the next tick's invocation (outbox/idle.py): with a
      # 75 s timeout and a once-a-minute schedule a waiter is always there, so a fresh verification
      # waits well under a second, not up to a minute (docs/benchmarks.md, create -> accepted latency).
      DISPATCH_SAFETY_MARGIN_SECONDS = "2"
      # Defence in depth behind the IAM invoker bindings (auth.py): the identities each target accepts.
      ALLOWED_INVOKERS = local.allowed_invokers[each.key]
    })

    # Exactly the secrets this function's settings name (local.function_secrets), each at the
    # version var.secret_versions pins ("latest": resolved when an instance starts).
    dynamic "secret_environment_variables" {
      for_each = local.function_secrets[each.key]
      content {
        key        = local.secret_env[secret_environment_variables.value]
        project_id = var.project_id
        secret     = google_secret_manager_secret.secret[secret_environment_variables.value].secret_id
        version    = local.secret_version[secret_environment_variables.value]
      }
    }
  }

  # The grants the build and the new revision need, after they have propagated (waits.tf).
  depends_on = [time_sleep.iam_grants]
}
