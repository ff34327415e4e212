# The pages. Each says what it means and what to look at first (the runbook is docs/deploy.md).
# Each waits for the log-based metrics it watches to be visible to Cloud Monitoring (waits.tf).
locals {
  metric_type = { for k, m in google_logging_metric.signal : k => "logging.googleapis.com/user/${m.name}" }
  run_filter  = "resource.type=\"cloud_run_revision\""
}

resource "google_monitoring_alert_policy" "oldest_ready" {
  display_name          = "${var.name}: verification waiting > ${var.oldest_ready_threshold_seconds}s"
  combiner              = "OR"
  severity              = "CRITICAL"
  notification_channels = var.notification_channels
  depends_on            = [time_sleep.metrics] # the metric must be visible first (waits.tf)

  conditions {
    display_name = "oldest eligible intent age by channel"
    condition_threshold {
      # webhook events page on their own threshold and text (webhooks.tf): a receiver outage is not people waiting
      filter          = "metric.type=\"${local.metric_type["oldest_ready_seconds"]}\" AND ${local.run_filter} AND metric.label.channel != \"webhook\""
      comparison      = "COMPARISON_GT"
      threshold_value = var.oldest_ready_threshold_seconds
      duration        = "60s"
      aggregations {
        alignment_period     = "60s"
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
    content   = "Eligible verification messages of one channel are waiting longer than ${var.oldest_ready_threshold_seconds}s: people are not getting their link or code. Check, in order: the dispatch function's logs and errors, the ready count (growing = arrivals outpace sends), delivery attempts by outcome (provider rejecting?), the reconciler watermark. docs/deploy.md, Runbook."
  }
}

resource "google_monitoring_alert_policy" "signals_absent" {
  display_name          = "${var.name}: no signal records for 10 minutes"
  combiner              = "OR"
  severity              = "CRITICAL"
  notification_channels = var.notification_channels
  depends_on            = [time_sleep.metrics] # the metric must be visible first (waits.tf)

  conditions {
    display_name = "signal records absent per function"
    condition_absent {
      filter   = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.signal_records.name}\" AND ${local.run_filter}"
      duration = "600s"
      aggregations {
        alignment_period     = "60s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.service_name"]
      }
      trigger {
        count = 1
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "dispatch or reconcile has logged no signal record for 10 minutes: nobody is watching the queue, so the age alert cannot fire either. Check the Cloud Scheduler job (paused? failing with 401/403/429?), then the function's logs (crashing at start: a secret or the database?)."
  }
}

resource "google_monitoring_alert_policy" "watermark_stale" {
  display_name          = "${var.name}: reconciler watermark older than ${var.watermark_stale_threshold_seconds}s"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = var.notification_channels
  depends_on            = [time_sleep.metrics] # the metric must be visible first (waits.tf)

  conditions {
    display_name = "reconciler watermark age"
    condition_threshold {
      filter          = "metric.type=\"${local.metric_type["reconciler_watermark_age_seconds"]}\" AND ${local.run_filter}"
      comparison      = "COMPARISON_GT"
      threshold_value = var.watermark_stale_threshold_seconds
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
    content   = "The reconciler has not completed a sweep for ${var.watermark_stale_threshold_seconds}s: expired leases are not recovered and ambiguous attempts are not settled. Check the reconcile function's logs (timeouts, statement timeouts, lock waits)."
  }
}

resource "google_monitoring_alert_policy" "oscillation" {
  display_name          = "${var.name}: deliveries oscillating between ambiguous and retry"
  combiner              = "OR"
  severity              = "WARNING"
  notification_channels = var.notification_channels
  depends_on            = [time_sleep.metrics] # the metric must be visible first (waits.tf)

  conditions {
    display_name = "records reporting oscillating intents"
    condition_threshold {
      filter          = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.oscillating_records.name}\" AND ${local.run_filter}"
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"
      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.channel", "metric.label.deployment"]
      }
      trigger {
        count = 1
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "Some deliveries keep ending with an unknown outcome and being retried: the provider is timing out after (perhaps) accepting, so people may receive duplicates. Check the provider's status page and delivery attempts by outcome; consider switching the channel's ambiguity policy to hold."
  }
}

resource "google_monitoring_alert_policy" "sms_budget" {
  display_name          = "${var.name}: SMS budget spent, SMS sends paused"
  combiner              = "OR"
  severity              = "CRITICAL"
  notification_channels = var.notification_channels
  depends_on            = [time_sleep.metrics] # the metric must be visible first (waits.tf)

  conditions {
    display_name = "records reporting the SMS budget spent"
    condition_threshold {
      filter          = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.sms_budget_paused_records.name}\" AND ${local.run_filter}"
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"
      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.deployment"]
      }
      trigger {
        count = 1
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "More SMS were sent this hour than SMS_MAX_PER_HOUR allows, so SMS sends are paused (intents wait, none fails; email is unaffected). Likely SMS pumping: check create's 429s and the destination countries and prefixes of recent SMS verifications (docs/deploy.md, SMS pumping). If the traffic is genuine, `verifyctl sms resume` grants another hour's budget; otherwise sending resumes by itself at the next hour."
  }
}
