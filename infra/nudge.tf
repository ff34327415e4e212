# The nudge (the small tier, tiers.tf): no dispatch invocation is kept open, so that a fresh
# verification does not wait for the next scheduled tick, create nudges dispatch
# (shared/signup_verification/outbox/nudge.py). After its transaction committed, a create enqueues
# its time bucket's named task (one per DISPATCH_NUDGE_SECONDS: Cloud Tasks keeps one task per name,
# so concurrent creates on every instance make one), which POSTs to the dispatch service at the
# bucket's end with an OIDC token of the nudge identity. The dispatch target accepts that identity on
# its nudge path only, and a nudged invocation on an empty outbox probes once and writes nothing.
# rate_limits bound the nudged invocations at once (counted in the connection budget, locals.tf); the
# scheduler's every-minute tick stays the backbone: a lost nudge leaves its message to the next tick.
locals {
  nudge_parallel = 1 # nudged invocations at once: one drains what a second would find
  nudge_email    = "${var.name}-nudge@${var.project_id}.iam.gserviceaccount.com"
  nudge_queue    = "projects/${var.project_id}/locations/${var.region}/queues/${var.name}-dispatch-nudge"
  # create's settings (services.tf merges them into create's only): where and how to nudge
  create_env = local.nudge_on ? {
    DISPATCH_NUDGE_URL             = local.service_urls["dispatch"]
    DISPATCH_NUDGE_QUEUE           = local.nudge_queue
    DISPATCH_NUDGE_SERVICE_ACCOUNT = local.nudge_email
  } : {}
}

resource "google_cloud_tasks_queue" "dispatch_nudge" {
  count    = local.nudge_on ? 1 : 0
  name     = "${var.name}-dispatch-nudge"
  location = var.region

  rate_limits {
    max_concurrent_dispatches = local.nudge_parallel
    max_dispatches_per_second = 1 # at most one task per second-long bucket
  }

  # A task whose invocation could not start (the service at its instance cap) is tried again briefly;
  # after that the scheduler's next tick sends what it would have.
  retry_config {
    max_attempts       = 3
    min_backoff        = "1s"
    max_backoff        = "10s"
    max_retry_duration = "60s"
  }

  depends_on = [time_sleep.apis]
}

# The identity the nudge tasks' OIDC tokens carry: it may invoke the dispatch service (invokers.tf),
# where the code accepts it on the nudge path alone.
resource "google_service_account" "nudge" {
  count        = local.nudge_on ? 1 : 0
  account_id   = "${var.name}-nudge"
  display_name = "signup verification: dispatch nudge tasks (OIDC identity)"
  depends_on   = [time_sleep.apis]
}

# create (its own account) may enqueue into this queue only, and mint tokens as the nudge identity only.
resource "google_cloud_tasks_queue_iam_member" "create_enqueues" {
  count    = local.nudge_on ? 1 : 0
  name     = google_cloud_tasks_queue.dispatch_nudge[0].name
  location = var.region
  role     = "roles/cloudtasks.enqueuer"
  member   = google_service_account.function["create"].member
}

resource "google_service_account_iam_member" "create_acts_as_nudge" {
  count              = local.nudge_on ? 1 : 0
  service_account_id = google_service_account.nudge[0].name
  role               = "roles/iam.serviceAccountUser"
  member             = google_service_account.function["create"].member
}

output "dispatch_nudge" {
  description = "The nudge queue and the tasks' OIDC identity (the small tier); null where dispatch waits for work instead."
  value = local.nudge_on ? {
    queue            = local.nudge_queue
    service_account  = local.nudge_email
    dispatch_service = local.service_urls["dispatch"]
  } : null
}
