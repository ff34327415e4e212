# Fan-out: when one dispatch invocation cannot drain the backlog soon enough, the one the scheduler
# started starts more (shared/signup_verification/delivery/fanout.py) as Cloud Tasks HTTP tasks to
# the dispatch service itself, each with an OIDC token of the fan-out identity.
# rate_limits.max_concurrent_dispatches is the bound: at most dispatch_max_parallel run at once,
# each on its own instance with one database connection (locals.tf counts them in the budget).
locals {
  fanout_on    = local.dispatch_max_parallel > 0
  fanout_email = "${var.name}-fanout@${var.project_id}.iam.gserviceaccount.com"
  fanout_queue = "projects/${var.project_id}/locations/${var.region}/queues/${var.name}-dispatch-fanout"
  # The dispatch service's settings for it (services.tf merges them into dispatch's only), with the
  # provider limits the dispatcher paces its sends to (docs/capacity.md cites each default).
  dispatch_env = {
    DISPATCH_MAX_PARALLEL           = tostring(local.dispatch_max_parallel)
    DISPATCH_FANOUT_QUEUE           = local.fanout_on ? local.fanout_queue : ""
    DISPATCH_FANOUT_URL             = local.fanout_on ? local.service_urls["dispatch"] : ""
    DISPATCH_FANOUT_SERVICE_ACCOUNT = local.fanout_on ? local.fanout_email : ""
    EMAIL_MAX_PER_SECOND            = tostring(var.email_max_per_second)
    SMS_MAX_PER_SECOND              = tostring(var.sms_max_per_second)
    TWILIO_SENDER_MPS               = var.twilio_sender_mps == null ? "" : tostring(var.twilio_sender_mps)
    # the tier's way of starting dispatch (tiers.tf): waiting for work all minute, or nudged by create
    DISPATCH_IDLE_WAIT             = local.idle_wait ? "true" : "false"
    DISPATCH_NUDGE_SERVICE_ACCOUNT = local.nudge_on ? local.nudge_email : ""
  }
}

resource "google_cloud_tasks_queue" "dispatch_fanout" {
  count    = local.fanout_on ? 1 : 0
  name     = "${var.name}-dispatch-fanout"
  location = var.region

  rate_limits {
    max_concurrent_dispatches = local.dispatch_max_parallel
    max_dispatches_per_second = local.dispatch_max_parallel
  }

  # A task whose invocation could not start (the service at its instance limit) is tried again
  # briefly; after that its slot simply expires and the next decision starts another if needed.
  retry_config {
    max_attempts       = 3
    min_backoff        = "1s"
    max_backoff        = "10s"
    max_retry_duration = "60s"
  }

  stackdriver_logging_config {
    sampling_ratio = 1.0
  }

  depends_on = [time_sleep.apis]
}

# The identity the tasks' OIDC tokens carry: it may invoke the dispatch service (invokers.tf) and
# nothing else.
resource "google_service_account" "fanout" {
  count        = local.fanout_on ? 1 : 0
  account_id   = "${var.name}-fanout"
  display_name = "signup verification: dispatch fan-out tasks (OIDC identity)"
  depends_on   = [time_sleep.apis]
}

# dispatch (its own account) may enqueue into this queue only, and mint tokens as the fan-out
# identity only (Cloud Tasks checks iam.serviceAccounts.actAs on the task's OIDC account).
resource "google_cloud_tasks_queue_iam_member" "dispatch_enqueues" {
  count    = local.fanout_on ? 1 : 0
  name     = google_cloud_tasks_queue.dispatch_fanout[0].name
  location = var.region
  role     = "roles/cloudtasks.enqueuer"
  member   = google_service_account.function["dispatch"].member
}

resource "google_service_account_iam_member" "dispatch_acts_as_fanout" {
  count              = local.fanout_on ? 1 : 0
  service_account_id = google_service_account.fanout[0].name
  role               = "roles/iam.serviceAccountUser"
  member             = google_service_account.function["dispatch"].member
}

output "dispatch_fanout" {
  description = "The fan-out queue, its bound (max_concurrent_dispatches) and the tasks' OIDC identity; null with dispatch_max_parallel = 0."
  value = local.fanout_on ? {
    queue            = local.fanout_queue
    max_parallel     = local.dispatch_max_parallel
    service_account  = local.fanout_email
    dispatch_service = local.service_urls["dispatch"]
  } : null
}
