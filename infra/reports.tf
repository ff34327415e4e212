# Issue 13: the public delivery_reports function. Like confirm it must be reachable without a Google
# identity (SendGrid and Twilio cannot present one); the providers' signatures are checked in the
# function (api/report_signatures.py). Under Domain Restricted Sharing the allUsers binding is
# refused: var.confirm_public_access = "invoker_iam_check_disabled" applies to this service too
# (output services_without_invoker_iam_check, deploy.sh). No secret travels in its URLs (signatures
# are headers), so its request log needs no exclusion.
resource "google_cloud_run_v2_service_iam_member" "reports_public" {
  count = var.confirm_public_access == "allUsers" ? 1 : 0
  #checkov:skip=CKV_GCP_102:delivery_reports receives SendGrid's and Twilio's webhooks, which carry no Google identity; each request is verified by the provider's signature (ECDSA / HMAC-SHA1) before anything is stored.
  location = var.region
  name     = google_cloudfunctions2_function.function["reports"].name
  role     = "roles/run.invoker"
  member   = "allUsers"
}

resource "google_monitoring_alert_policy" "awaiting_report" {
  display_name          = "${var.name}: accepted deliveries without a delivered report > ${var.awaiting_report_threshold_seconds}s"
  combiner              = "OR"
  severity              = "WARNING"
  notification_channels = var.notification_channels
  depends_on            = [time_sleep.metrics] # the metric must be visible first (waits.tf)

  conditions {
    display_name = "oldest accepted-but-not-delivered age by channel"
    condition_threshold {
      filter          = "metric.type=\"${local.metric_type["oldest_awaiting_report_seconds"]}\" AND ${local.run_filter}"
      comparison      = "COMPARISON_GT"
      threshold_value = var.awaiting_report_threshold_seconds
      duration        = "300s"
      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_PERCENTILE_99"
        cross_series_reducer = "REDUCE_MAX"
        group_by_fields      = ["metric.label.channel", "metric.label.deployment"]
      }
      trigger {
        count = 1
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "Deliveries were accepted by the provider but no delivered report arrived for ${var.awaiting_report_threshold_seconds}s: either mail/SMS is stuck at the provider, or its reports no longer reach the delivery_reports function (webhook disabled, signature key rotated, URL changed). docs/runbook.md, \"Delivery reports and the suppression list\"."
  }
}

output "delivery_reports_url" {
  description = "Issue 13: SendGrid's Event Webhook HTTP POST URL is this + /sendgrid (docs/deploy.md); Twilio's StatusCallback (set by dispatch) is this + /twilio."
  value       = local.reports_url
}
