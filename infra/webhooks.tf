# The webhook channel's page. Same metric as the messages' oldest-ready page (one series per
# channel), its own threshold and text: events waiting means the signup site's receiver is failing,
# not that people wait for a code. Only when webhooks are on.
locals {
  webhook_alerts = { for key, alert in {
    webhook_oldest_ready = merge(local.age_over, {
      display_name = "${var.name}: webhook event waiting > ${var.webhook_oldest_ready_threshold_seconds}s"
      severity     = "ERROR"
      condition    = "oldest eligible webhook event age"
      filter       = "metric.type=\"${local.metric_type["oldest_ready_seconds"]}\" AND ${local.run_filter} AND metric.label.channel = \"webhook\""
      threshold    = var.webhook_oldest_ready_threshold_seconds
      group_by     = ["metric.label.deployment"]
      text         = "Webhook events to the signup site (WEBHOOK_URL) are waiting longer than ${var.webhook_oldest_ready_threshold_seconds}s: the receiver is down, slow, refusing (401/403: WEBHOOK_SECRET mismatch) or rate limiting. Nothing is lost: events retry with backoff up to WEBHOOK_MAX_ATTEMPTS. Check `verifyctl status` (webhook row: attempts by outcome), `verifyctl inspect <id>` (webhook events), the dispatch logs (send_outcome, channel webhook). docs/runbook.md, \"Failing webhook receiver\"."
    })
  } : key => alert if var.webhook_url != "" }
}

moved {
  from = google_monitoring_alert_policy.webhook_oldest_ready[0]
  to   = google_monitoring_alert_policy.threshold["webhook_oldest_ready"]
}
