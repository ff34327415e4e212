# The deployment's size in one variable (var.tier): the database, every function's scaling, how
# dispatch is started, the fan-out, the SMS budget and how the pages are grouped. Each figure of the
# small and large tiers is derived in docs/capacity.md from measured figures (docs/benchmarks.md,
# "Requests per database connection and per vCPU") or a cited source; docs/deploy.md, "Tiers", says
# when to take which. Every preset can still be overridden: db_* variables, var.functions per
# function, dispatch_max_parallel, sms_max_per_hour.
#
#   small     a site with a few thousand signups a month, idling for a few dollars
#             (tools/plan_cost.py prices the plan): a shared-core zonal instance, no warm instance,
#             no invocation kept open; create nudges dispatch through a Cloud Tasks queue
#             (nudge.tf), the scheduler's tick is the backbone; the pages grouped in one digest page
#             and the absence page (alerts_digest.tf).
#   standard  the documented load, 100 verifications/s at peak: a 1-vCPU regional instance, dispatch
#             waiting for work all minute (outbox/idle.py) handed over between two scheduler jobs.
#   large     1,000 verifications/s (create -> deliver -> confirm, 20 % SMS): an 8-vCPU regional
#             instance, eight requests per instance on the request-serving functions.
locals {
  tiers = {
    small = {
      db = {
        tier              = "db-f1-micro" # shared core, 0.6 GB: Cloud SQL's smallest (no SLA)
        edition           = "ENTERPRISE"
        availability_type = "ZONAL"
        # db-f1-micro's own default is 25; the reserve: 3 superuser slots, Cloud SQL's agents, the
        # migration job, one operator session
        max_connections      = 25
        reserved_connections = 10
      }
      # per function, over function_defaults (locals.tf): a handful of instances each, none warm
      functions = {
        create   = { max_instances = 2 }
        confirm  = { max_instances = 2, min_instances = 0 }
        dispatch = { max_instances = 1 }
        status   = { max_instances = 1 }
        reports  = { max_instances = 2 }
      }
      dispatch_max_parallel = 0       # one invocation sends ~300 emails/s: more than the tier's traffic
      start                 = "nudge" # create nudges dispatch; no invocation kept open, one scheduler job
      # a safety ceiling against SMS pumping: 100 SMS an hour (US ~$1), paged at 80 % and when spent
      sms_max_per_hour     = 100
      voice_max_per_hour   = 10  # calls, when voice is on (channels.tf): a call costs several SMS
      sms_country_per_hour = 100 # the budget: a create past it is refused (429) rather than left waiting
      alerting             = "digest"
    }
    standard = {
      db = {
        tier                 = "db-custom-1-3840"
        edition              = "ENTERPRISE"
        availability_type    = "REGIONAL"
        max_connections      = 100
        reserved_connections = 15
      }
      functions             = {}
      dispatch_max_parallel = 4
      start                 = "idle_wait" # dispatch waits for work all minute, handed over between two jobs
      # the documented peak: 100 verifications/s, 20 % SMS = 72,000 SMS an hour, x 1.3 headroom
      sms_max_per_hour = 94000
      # calls, when voice is on (channels.tf): VOICE_MAX_PER_HOUR's default, well below the SMS budget
      voice_max_per_hour = 2000
      # 0: no per-country limit. At this volume an exact window would read up to that many rows per SMS
      # create, and a lower limit refuses the documented load (docs/capacity.md, "SMS budget and senders")
      sms_country_per_hour = 0
      alerting             = "per_page"
    }
    large = {
      db = {
        tier                 = "db-custom-8-30720" # 8 vCPU, 30 GB
        edition              = "ENTERPRISE"
        availability_type    = "REGIONAL"
        max_connections      = 400
        reserved_connections = 20
      }
      # docs/capacity.md, "The large tier": each service's CPU at the design load, at Cloud Run's 60 %
      # target, x2 for a burst; eight requests per instance (a connection per request thread)
      functions = {
        create   = { max_instances = 6, min_instances = 1, concurrency = 8 }
        confirm  = { max_instances = 5, min_instances = 1, concurrency = 8 }
        dispatch = { max_instances = 2 }
        status   = { max_instances = 2 }
        reports  = { max_instances = 4, concurrency = 8 }
      }
      dispatch_max_parallel = 12 # ~330 sends/s each: 1,000 messages/s and ~2,000 webhook events/s
      start                 = "idle_wait"
      sms_max_per_hour      = 940000 # 1,000/s, 20 % SMS = 720,000 an hour, x 1.3
      voice_max_per_hour    = 20000  # ten times the standard tier's, as its SMS budget
      sms_country_per_hour  = 0
      alerting              = "per_page"
    }
  }
  tier = local.tiers[var.tier]

  # The resolved settings: a variable that is set wins over the tier's preset.
  db = {
    tier                 = coalesce(var.db_tier, local.tier.db.tier)
    edition              = local.tier.db.edition
    availability_type    = coalesce(var.db_availability_type, local.tier.db.availability_type)
    max_connections      = coalesce(var.db_max_connections, local.tier.db.max_connections)
    reserved_connections = coalesce(var.db_reserved_connections, local.tier.db.reserved_connections)
  }
  dispatch_max_parallel = coalesce(var.dispatch_max_parallel, local.tier.dispatch_max_parallel)
  sms_max_per_hour      = coalesce(var.sms_max_per_hour, local.tier.sms_max_per_hour)
  nudge_on              = local.tier.start == "nudge"
  idle_wait             = local.tier.start == "idle_wait"
  digest_alerting       = local.tier.alerting == "digest"
}

variable "tier" {
  description = "The deployment's size (tiers.tf; docs/deploy.md, \"Tiers\"): \"small\" (a few thousand signups a month, idle for a few dollars: a shared-core zonal database, no warm instance, create nudges dispatch), \"standard\" (the documented load, 100 verifications/s at peak) or \"large\" (1,000 verifications/s). The db_*, functions, dispatch_max_parallel and sms_max_per_hour variables override its presets."
  type        = string
  default     = "standard"
  validation {
    condition     = contains(["small", "standard", "large"], var.tier)
    error_message = "tier must be small, standard or large."
  }
}

output "tier" {
  description = "The tier and what it resolved to (tools/plan_cost.py reads it)."
  value = {
    name                  = var.tier
    database              = local.db
    start                 = local.tier.start
    dispatch_max_parallel = local.dispatch_max_parallel
    sms_max_per_hour      = local.sms_max_per_hour
    voice_max_per_hour    = local.voice_max_per_hour
    alerting              = local.tier.alerting
  }
}
