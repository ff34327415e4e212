# dispatch and reconcile, every minute, called with an OIDC token of the scheduler's identity.
# No pile-up: reconcile ends within the one-minute period, dispatch within two (variables.tf validation),
# attempt_deadline covers the whole invocation (so a slow run is not retried while still running),
# and a failed tick is not retried: the next tick, a minute later, is the retry.
resource "google_cloud_scheduler_job" "tick" {
  for_each         = local.scheduled
  name             = "${var.name}-${each.key}"
  description      = "Invoke ${local.function_specs[each.key].entry_point} every minute"
  region           = var.region
  schedule         = "* * * * *"
  time_zone        = "Etc/UTC"
  attempt_deadline = "${var.functions[each.key].timeout_seconds + 10}s"

  retry_config {
    retry_count = 0
  }

  http_target {
    http_method = "POST"
    uri         = google_cloudfunctions2_function.function[each.key].service_config[0].uri
    body        = base64encode("{}")
    headers     = { "Content-Type" = "application/json" }

    oidc_token {
      service_account_email = google_service_account.scheduler.email
      audience              = "${google_cloudfunctions2_function.function[each.key].service_config[0].uri}/"
    }
  }

  depends_on = [google_cloud_run_v2_service_iam_member.invoker]
}

# A second every-minute job for dispatch (issue 18, time to provider). Cloud Scheduler does not start
# a job's next execution while the previous one runs, and dispatch runs past the tick on purpose
# (timeout 75 s): it waits for work until the next invocation waits, then hands over (outbox/idle.py).
# With two jobs one is always free at each tick, so a waiter is always there; the older invocation
# returns within one poll of the newer one starting to wait (max_instances = 2 bounds the overlap).
resource "google_cloud_scheduler_job" "dispatch_relay" {
  name             = "${var.name}-dispatch-relay"
  description      = "Invoke ${local.function_specs["dispatch"].entry_point} every minute (the relay: hands the idle wait over)"
  region           = var.region
  schedule         = "* * * * *"
  time_zone        = "Etc/UTC"
  attempt_deadline = "${var.functions["dispatch"].timeout_seconds + 10}s"

  retry_config {
    retry_count = 0
  }

  http_target {
    http_method = "POST"
    uri         = google_cloudfunctions2_function.function["dispatch"].service_config[0].uri
    body        = base64encode("{}")
    headers     = { "Content-Type" = "application/json" }

    oidc_token {
      service_account_email = google_service_account.scheduler.email
      audience              = "${google_cloudfunctions2_function.function["dispatch"].service_config[0].uri}/"
    }
  }

  depends_on = [google_cloud_run_v2_service_iam_member.invoker]
}
