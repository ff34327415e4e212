# The public delivery_reports function. Like confirm it must be reachable without a Google identity
# (SendGrid and Twilio cannot present one), so it is public the same way (var.public_access,
# services.tf); the providers' signatures are checked in the function (api/report_signatures.py).
# No secret travels in its URLs (signatures are headers), so its request log needs no exclusion.
locals {
  report_alerts = {
    awaiting_report = {
      display_name = "${var.name}: accepted deliveries without a delivered report > ${var.awaiting_report_threshold_seconds}s"
      severity     = "WARNING"
      condition    = "oldest accepted-but-not-delivered age by channel"
      filter       = "metric.type=\"${local.metric_type["oldest_awaiting_report_seconds"]}\" AND ${local.run_filter}"
      threshold    = var.awaiting_report_threshold_seconds
      duration     = "300s"
      period       = "300s"
      aligner      = "ALIGN_PERCENTILE_99"
      reducer      = "REDUCE_MAX"
      group_by     = ["metric.label.channel", "metric.label.deployment"]
      text         = "Deliveries were accepted by the provider but no delivered report arrived for ${var.awaiting_report_threshold_seconds}s: either mail/SMS is stuck at the provider, or its reports no longer reach the delivery_reports function (webhook disabled, signature key rotated, URL changed). docs/runbook.md, \"Delivery reports and the suppression list\"."
    }
  }
}

moved {
  from = google_monitoring_alert_policy.awaiting_report
  to   = google_monitoring_alert_policy.threshold["awaiting_report"]
}

output "delivery_reports_url" {
  description = "SendGrid's Event Webhook HTTP POST URL is this + /sendgrid (docs/deploy.md); Twilio's StatusCallback (set by dispatch) is this + /twilio."
  value       = local.reports_url
}
