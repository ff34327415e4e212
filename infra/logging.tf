# The confirm link carries its one-time token in the query string (VERIFY_LINK_BASE?token=...).
# Our own logs never record query strings, but Cloud Run's request log records the full URL of
# every request. Excluding the confirm service's request log keeps tokens out of Cloud Logging;
# the function's own structured records (status, latency, outcome, masked) remain.
resource "google_logging_project_exclusion" "confirm_request_urls" {
  count       = var.exclude_confirm_request_logs ? 1 : 0
  name        = "${var.name}-confirm-request-urls"
  description = "Cloud Run request logs of the confirm function would store one-time tokens from the link's URL."
  filter      = "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=\"${local.function_names["confirm"]}\" AND log_id(\"run.googleapis.com/requests\")"
}
