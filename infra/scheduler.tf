# dispatch and reconcile, every minute, called with an OIDC token of the scheduler's identity
# (local.ticks: local.scheduler_jobs, the relay only where the tier keeps dispatch waiting). No pile-up: reconcile ends within the one-minute period, dispatch within
# two (variables.tf validation), attempt_deadline covers the whole invocation (so a slow run is not
# retried while still running), and a failed tick is not retried: the next tick is the retry.
#
# Where dispatch waits for work (the standard and large tiers) it has a second every-minute job, the
# relay (the small tier nudges it from create instead, nudge.tf). Cloud Scheduler does not start a job's next
# execution while the previous one runs, and dispatch runs past the tick on purpose (timeout 75 s):
# it waits for work until the next invocation waits, then hands over (outbox/idle.py). With two
# jobs one is always free at each tick, so a waiter is always there; the older invocation returns
# within one poll of the newer one starting to wait (max_instances = 2 bounds the overlap).
resource "google_cloud_scheduler_job" "tick" {
  for_each         = local.ticks
  name             = "${var.name}-${replace(each.key, "_", "-")}"
  description      = "Invoke ${local.function_specs[each.value.function].entry_point} every minute${each.value.note}"
  region           = var.region
  schedule         = "* * * * *"
  time_zone        = "Etc/UTC"
  attempt_deadline = "${local.functions[each.value.function].timeout_seconds + 10}s"

  retry_config {
    retry_count = 0
  }

  http_target {
    http_method = "POST"
    uri         = google_cloud_run_v2_service.function[each.value.function].uri
    body        = base64encode("{}")
    headers     = { "Content-Type" = "application/json" }

    oidc_token {
      service_account_email = google_service_account.scheduler.email
      audience              = google_cloud_run_v2_service.function[each.value.function].uri
    }
  }

  # The invoker grants must have propagated before the first tick (waits.tf).
  depends_on = [time_sleep.invokers]
}

moved {
  from = google_cloud_scheduler_job.dispatch_relay
  to   = google_cloud_scheduler_job.tick["dispatch_relay"]
}
