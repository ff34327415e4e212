# Issue 12: the webhook channel's page. Same metric as the messages' oldest-ready alert (one series per
# channel), its own threshold and text: events waiting means the signup site's receiver is failing,
# not that people wait for a code. Only when webhooks are on.
resource "google_monitoring_alert_policy" "webhook_oldest_ready" {
  count                 = var.webhook_url != "" ? 1 : 0
  display_name          = "${var.name}: webhook event waiting > ${var.webhook_oldest_ready_threshold_seconds}s"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = var.notification_channels
  depends_on            = [time_sleep.metrics] # the metric must be visible first (waits.tf)

  conditions {
    display_name = "oldest eligible webhook event age"
    condition_threshold {
      filter          = "metric.type=\"${local.metric_type["oldest_ready_seconds"]}\" AND ${local.run_filter} AND metric.label.channel = \"webhook\""
      comparison      = "COMPARISON_GT"
      threshold_value = var.webhook_oldest_ready_threshold_seconds
      duration        = "60s"
      aggregations {
        alignment_period     = "60s"
        per_series_aligner   = "ALIGN_PERCENTILE_99"
        cross_series_reducer = "REDUCE_MAX"
        group_by_fields      = ["metric.label.deployment"]
      }
      trigger {
        count = 1
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "Webhook events to the signup site (WEBHOOK_URL) are waiting longer than ${var.webhook_oldest_ready_threshold_seconds}s: the receiver is down, slow, refusing (401/403: WEBHOOK_SECRET mismatch) or rate limiting. Nothing is lost: events retry with backoff up to WEBHOOK_MAX_ATTEMPTS. Check `verifyctl status` (webhook row: attempts by outcome), `verifyctl inspect <id>` (webhook events), the dispatch logs (send_outcome, channel webhook). docs/runbook.md, \"Failing webhook receiver\"."
  }
}
