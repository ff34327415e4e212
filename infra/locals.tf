# The five targets in functions/main.py, what each reads, and who may call it.
# tests/system/test_infra.py checks this table against functions/main.py and the rest of infra/.
locals {
  function_specs = {
    create = {
      entry_point = "create_verification"
      description = "POST a verification (signup site only)"
      ingress     = var.create_ingress
      # TOKEN_KEYS: the targets that derive or check tokens (runtime.TOKEN_TARGETS) load it at start.
      secrets = ["token_keys"]
      db_role = "writer"
    }
    confirm = {
      entry_point = "confirm_verification"
      description = "The link in the email and the SMS code form (public)"
      ingress     = "ALLOW_ALL"
      secrets     = ["token_keys"]
      db_role     = "writer"
    }
    dispatch = {
      entry_point = "dispatch"
      description = "Claims ready delivery intents and sends them (Cloud Scheduler, every minute)"
      # Cloud Scheduler in the same project counts as internal traffic.
      ingress = "ALLOW_INTERNAL_ONLY"
      secrets = ["token_keys", "sendgrid_api_key", "smtp_password", "twilio_auth_token", "webhook_secret"]
      db_role = "writer"
    }
    reconcile = {
      entry_point = "reconcile"
      description = "Expires, recovers stale leases, settles ambiguous attempts (Cloud Scheduler, every minute)"
      ingress     = "ALLOW_INTERNAL_ONLY"
      secrets     = ["twilio_auth_token"] # never sends, never checks a token; asks Twilio about ambiguous SMS (issue 13)
      db_role     = "writer"
    }
    status = {
      entry_point = "status"
      description = "Operators' JSON signals (read only)"
      ingress     = "ALLOW_ALL"
      secrets     = [] # reads counts and ages only
      db_role     = "reader"
    }
    reports = {
      entry_point = "delivery_reports"
      description = "SendGrid Event Webhook and Twilio status callbacks (public; provider signatures checked, issue 13)"
      ingress     = "ALLOW_ALL"           # the providers call from the internet
      secrets     = ["twilio_auth_token"] # verifies X-Twilio-Signature; SendGrid's key is public (an env var)
      db_role     = "writer"
    }
  }

  scheduled = toset(["dispatch", "reconcile"])

  # Secret Manager secret per sensitive setting: the environment variable it feeds.
  secret_env = {
    token_keys        = "TOKEN_KEYS"
    sendgrid_api_key  = "SENDGRID_API_KEY"
    smtp_password     = "SMTP_PASSWORD"
    twilio_auth_token = "TWILIO_AUTH_TOKEN"
    webhook_secret    = "WEBHOOK_SECRET" # issue 12: signs the events (whsec_..., comma-separated while rotating)
  }
  # Only the secrets the chosen transports use exist: a reference to a secret with no version
  # would stop the function at start.
  enabled_secrets = toset(concat(
    ["token_keys"],
    var.email_transport == "sendgrid" ? ["sendgrid_api_key"] : [],
    var.email_transport == "smtp" && var.smtp.username != "" ? ["smtp_password"] : [],
    var.sms_transport == "twilio" ? ["twilio_auth_token"] : [],
    var.webhook_url != "" ? ["webhook_secret"] : [],
  ))
  function_secrets = {
    for key, spec in local.function_specs : key => [for s in spec.secrets : s if contains(local.enabled_secrets, s)]
  }
  secret_grants = merge([
    for key, secrets in local.function_secrets : { for s in secrets : "${key}/${s}" => { function = key, secret = s } }
  ]...)

  function_names = { for key in keys(local.function_specs) : key => "${var.name}-${key}" }
  confirm_url    = "https://${var.region}-${var.project_id}.cloudfunctions.net/${local.function_names["confirm"]}"
  # issue 13: what Twilio's StatusCallback and SendGrid's Event Webhook URL point at (docs/deploy.md)
  reports_url = "https://${var.region}-${var.project_id}.cloudfunctions.net/${local.function_names["reports"]}"

  # Connection budget (see var.db_max_connections): one connection per request thread.
  peak_connections = sum([for key, f in var.functions : f.max_instances * f.concurrency])
}
