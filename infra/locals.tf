# The six targets in functions/main.py, what each reads, who may reach it, and how each scales.
# tests/system/test_infra.py checks this table against functions/main.py and the rest of infra/,
# and tests/system/test_deploy_docs.py checks docs/deploy.md against it.
locals {
  function_specs = {
    create = {
      entry_point = "create_verification"
      description = "POST a verification (signup site only)"
      ingress     = var.create_ingress
      public      = false
      # TOKEN_KEYS: the targets that derive or check tokens (runtime.TOKEN_TARGETS) load it at start.
      secrets = ["token_keys"]
      db_role = "writer"
    }
    confirm = {
      entry_point = "confirm_verification"
      description = "The link in the email and the SMS code form (public)"
      ingress     = "INGRESS_TRAFFIC_ALL"
      public      = true
      secrets     = ["token_keys"]
      db_role     = "writer"
    }
    dispatch = {
      entry_point = "dispatch"
      description = "Claims ready delivery intents and sends them (Cloud Scheduler, every minute)"
      # Cloud Scheduler in the same project counts as internal traffic for Cloud Run.
      ingress = "INGRESS_TRAFFIC_INTERNAL_ONLY"
      public  = false
      secrets = ["token_keys", "sendgrid_api_key", "smtp_password", "twilio_auth_token", "webhook_secret"]
      db_role = "writer"
    }
    reconcile = {
      entry_point = "reconcile"
      description = "Expires, recovers stale leases, settles ambiguous attempts (Cloud Scheduler, every minute)"
      ingress     = "INGRESS_TRAFFIC_INTERNAL_ONLY"
      public      = false
      secrets     = ["twilio_auth_token"] # never sends, never checks a token; asks Twilio about ambiguous SMS
      db_role     = "writer"
    }
    status = {
      entry_point = "status"
      description = "Operators' JSON signals (read only)"
      ingress     = "INGRESS_TRAFFIC_ALL"
      public      = false
      secrets     = [] # reads counts and ages only
      db_role     = "reader"
    }
    reports = {
      entry_point = "delivery_reports"
      description = "SendGrid Event Webhook and Twilio status callbacks (public; provider signatures checked)"
      ingress     = "INGRESS_TRAFFIC_ALL" # the providers call from the internet
      public      = true
      secrets     = ["twilio_auth_token"] # verifies X-Twilio-Signature; SendGrid's key is public (an env var)
      db_role     = "writer"
    }
  }

  # Scaling per target (the standard tier's): the tier's presets (tiers.tf) change some fields, and
  # var.functions overrides any field of any target. reconcile ends within its one-minute tick;
  # dispatch outlives one tick on purpose where it waits for work (outbox/idle.py), never two.
  function_defaults = {
    create    = { max_instances = 40, min_instances = 0, concurrency = 1, timeout_seconds = 30, env = {} }
    confirm   = { max_instances = 30, min_instances = 1, concurrency = 1, timeout_seconds = 30, env = {} }
    dispatch  = { max_instances = 2, min_instances = 0, concurrency = 1, timeout_seconds = 75, env = {} }
    reconcile = { max_instances = 1, min_instances = 0, concurrency = 1, timeout_seconds = 50, env = {} }
    status    = { max_instances = 2, min_instances = 0, concurrency = 1, timeout_seconds = 30, env = {} }
    reports   = { max_instances = 5, min_instances = 0, concurrency = 1, timeout_seconds = 30, env = {} }
  }
  functions = {
    for key, defaults in local.function_defaults : key => merge(
      defaults,
      try(local.tier.functions[key], {}),
      { for field, value in try(var.functions[key], {}) : field => value if value != null },
    )
  }

  # Who calls dispatch and reconcile: Cloud Scheduler, one job per entry (scheduler.tf). The relay
  # exists only where the tier keeps dispatch waiting for work (tiers.tf): it hands the waiting over.
  scheduler_jobs = {
    dispatch       = { function = "dispatch", note = "", relay = false }
    dispatch_relay = { function = "dispatch", note = " (the relay: hands the idle wait over)", relay = true }
    reconcile      = { function = "reconcile", note = "", relay = false }
  }
  ticks     = { for key, job in local.scheduler_jobs : key => job if local.idle_wait || !job.relay }
  scheduled = toset([for job in values(local.ticks) : job.function])

  # Secret Manager secret per sensitive setting: the environment variable it feeds.
  secret_env = {
    token_keys        = "TOKEN_KEYS"
    sendgrid_api_key  = "SENDGRID_API_KEY"
    smtp_password     = "SMTP_PASSWORD"
    twilio_auth_token = "TWILIO_AUTH_TOKEN"
    webhook_secret    = "WEBHOOK_SECRET" # signs the events (whsec_..., comma-separated while rotating)
  }
  # Only the secrets the chosen transports use exist: a reference to a secret with no version
  # would stop the function at start.
  enabled_secrets = toset(concat(
    ["token_keys"],
    var.email_transport == "sendgrid" ? ["sendgrid_api_key"] : [],
    var.email_transport == "smtp" && var.smtp.username != "" ? ["smtp_password"] : [],
    local.twilio_on ? ["twilio_auth_token"] : [], # SMS, WhatsApp or voice (channels.tf)
    var.webhook_url != "" ? ["webhook_secret"] : [],
  ))
  secret_ids = { for s in local.enabled_secrets : s => "${var.name}-${replace(s, "_", "-")}" }
  function_secrets = {
    for key, spec in local.function_specs : key => [for s in spec.secrets : s if contains(local.enabled_secrets, s)]
  }
  secret_grants = merge([
    for key, secrets in local.function_secrets : { for s in secrets : "${key}/${s}" => { function = key, secret = s } }
  ]...)

  # Cloud Run's deterministic URL of each service, known before the service exists: a function's
  # settings can name its own URL (VERIFY_LINK_BASE) and the others' (DELIVERY_REPORTS_URL).
  function_names = { for key in keys(local.function_specs) : key => "${var.name}-${key}" }
  service_urls   = { for key, name in local.function_names : key => "https://${name}-${data.google_project.this.number}.${var.region}.run.app" }
  # What Twilio's StatusCallback and SendGrid's Event Webhook URL point at (docs/deploy.md).
  reports_url = local.service_urls["reports"]

  # Connection budget (local.db.max_connections): one connection per request thread, per source.
  # The fan-out's invocations and the nudged ones run on the dispatch service beyond its scheduled
  # ones (fanout.tf, nudge.tf): their own entries, and their own instances on top of dispatch's
  # max_instances.
  connection_budget = merge(
    { for key, f in local.functions : key => f.max_instances * f.concurrency },
    { dispatch_fanout = local.dispatch_max_parallel * local.functions["dispatch"].concurrency },
    local.nudge_on ? { dispatch_nudge = local.nudge_parallel * local.functions["dispatch"].concurrency } : {},
  )
  peak_connections = sum(values(local.connection_budget))
  dispatch_extra   = local.dispatch_max_parallel + (local.nudge_on ? local.nudge_parallel : 0)
  instance_limits  = { for key, f in local.functions : key => f.max_instances + (key == "dispatch" ? local.dispatch_extra : 0) }

  labels = { service = "signup-verification", deployment = var.name }
}

data "google_project" "this" {
  project_id = var.project_id
}
