# The pages. Each says what it means and what to look at first (the runbook is docs/deploy.md).
# With the tier's alerting "per_page" (standard, large) each is a policy of its own; with "digest"
# (small) they are grouped in one digest page (alerts_digest.tf), and only the absence page is here.
# Each waits for the log-based metrics it watches to be visible to Cloud Monitoring (waits.tf).
# Every threshold page has the same shape, so they are one map (local.threshold_alerts, with
# entries from reports.tf and webhooks.tf); the absence page is the one of another shape.
locals {
  # The metrics' types by name (metrics.tf), whether or not the tier creates them (alerts_digest.tf).
  metric_type      = { for k, _ in local.signal_metrics : k => "logging.googleapis.com/user/${var.name}/${k}" }
  condition_metric = { for k, _ in local.condition_records : k => "logging.googleapis.com/user/${var.name}/${k}_records" }
  run_filter       = "resource.type=\"cloud_run_revision\""
  # A page that fires on any record counting a condition in the last 5 minutes.
  any_record = { threshold = 0, duration = "0s", period = "300s", aligner = "ALIGN_SUM", reducer = "REDUCE_SUM" }
  # A page on the p99 of an age over one minute, held for a minute.
  age_over = { duration = "60s", period = "60s", aligner = "ALIGN_PERCENTILE_99", reducer = "REDUCE_MAX" }
  # Age thresholds are bucket bounds of the age metric (metrics.tf), so each percentile is exact there.
  age_thresholds = [30, 60, 90, 120, 180, 300, 600]
  # The oldest-ready page: as set, else a fifth of the link TTL (time to act before links expire unsent).
  oldest_ready_threshold = coalesce(var.oldest_ready_threshold_seconds, max(concat([30], [for b in local.age_thresholds : b if b <= 0.2 * var.verification_ttl_seconds])...))
  # The backlog page: the ready backlog would take longer than a link lives to drain at the measured rate.
  drain_threshold = max(concat([30], [for b in local.age_bounds : b if b <= var.verification_ttl_seconds])...)

  threshold_alerts = merge(
    {
      oldest_ready = merge(local.age_over, {
        display_name = "${var.name}: verification waiting > ${local.oldest_ready_threshold}s"
        severity     = "CRITICAL"
        condition    = "oldest eligible intent age by channel"
        # webhook events page on their own threshold and text (webhooks.tf): a receiver outage is not people waiting
        filter    = "metric.type=\"${local.metric_type["oldest_ready_seconds"]}\" AND ${local.run_filter} AND metric.label.channel != \"webhook\""
        threshold = local.oldest_ready_threshold
        group_by  = ["metric.label.channel", "metric.label.deployment"]
        text      = "Eligible verification messages of one channel are waiting longer than ${local.oldest_ready_threshold}s: people are not getting their link or code. Check, in order: the dispatch function's logs and errors, the ready count (growing = arrivals outpace sends), delivery attempts by outcome (provider rejecting?), the reconciler watermark. docs/runbook.md, \"Verifications are waiting\"."
      })
      watermark_stale = merge(local.age_over, {
        display_name = "${var.name}: reconciler watermark older than ${var.watermark_stale_threshold_seconds}s"
        severity     = "ERROR"
        condition    = "reconciler watermark age"
        filter       = "metric.type=\"${local.metric_type["reconciler_watermark_age_seconds"]}\" AND ${local.run_filter}"
        threshold    = var.watermark_stale_threshold_seconds
        group_by     = ["metric.label.deployment"]
        text         = "The reconciler has not completed a sweep for ${var.watermark_stale_threshold_seconds}s: expired leases are not recovered and ambiguous attempts are not settled. Check the reconcile function's logs (timeouts, statement timeouts, lock waits). docs/runbook.md, \"The watermark is stale\"."
      })
      oscillation = merge(local.any_record, {
        display_name = "${var.name}: deliveries oscillating between ambiguous and retry"
        severity     = "WARNING"
        condition    = "records reporting oscillating intents"
        filter       = "metric.type=\"${local.condition_metric["oscillating"]}\" AND ${local.run_filter}"
        group_by     = ["metric.label.channel", "metric.label.deployment"]
        text         = "Some deliveries keep ending with an unknown outcome and being retried: the provider is timing out after (perhaps) accepting, so people may receive duplicates. Check the provider's status page and delivery attempts by outcome; consider switching the channel's ambiguity policy to hold. docs/runbook.md, \"Deliveries oscillate\"."
      })
      sms_budget = merge(local.any_record, {
        display_name = "${var.name}: SMS budget spent, SMS sends paused"
        severity     = "CRITICAL"
        condition    = "records reporting the SMS budget spent"
        filter       = "metric.type=\"${local.condition_metric["sms_budget_paused"]}\" AND ${local.run_filter}"
        group_by     = ["metric.label.deployment"]
        text         = "More SMS were sent this hour than SMS_MAX_PER_HOUR allows, so SMS sends are paused (intents wait, none fails; email is unaffected). Likely SMS pumping: check create's 429s and the destination countries and prefixes of recent SMS verifications (docs/deploy.md, SMS pumping). If the traffic is genuine, `verifyctl sms resume` grants another hour's budget; otherwise sending resumes by itself at the next hour. docs/runbook.md, \"The SMS budget is spent\"."
      })
      sms_budget_warning = merge(local.any_record, {
        display_name = "${var.name}: SMS budget 80 % used this hour"
        severity     = "WARNING"
        condition    = "records reporting 80 % of the SMS budget used"
        filter       = "metric.type=\"${local.condition_metric["sms_budget_warning"]}\" AND ${local.run_filter}"
        group_by     = ["metric.label.deployment"]
        text         = "80 % of this hour's SMS budget (SMS_MAX_PER_HOUR = ${local.sms_max_per_hour}) is spent: SMS sends pause when the rest is. Genuine traffic (a launch, a campaign)? Raise sms_max_per_hour (docs/deploy.md, Sizing) or grant the hour more with `verifyctl sms resume` when it trips. Unexpected? Check for SMS pumping first: create's 429s, the destination countries and prefixes of recent SMS verifications (docs/deploy.md, SMS pumping). docs/runbook.md, \"The SMS budget is 80 % used\"."
      })
      voice_budget = merge(local.any_record, {
        display_name = "${var.name}: call budget spent, calls paused"
        severity     = "CRITICAL"
        condition    = "records reporting the call budget spent"
        filter       = "metric.type=\"${local.condition_metric["voice_budget_paused"]}\" AND ${local.run_filter}"
        group_by     = ["metric.label.deployment"]
        text         = "More calls were placed this hour than VOICE_MAX_PER_HOUR (${local.voice_max_per_hour}) allows, so calls are paused (voice intents wait, none fails; email, SMS and WhatsApp are unaffected). A call costs several SMS: likely toll fraud (calls pumped to premium ranges). Check create's 429s and the destinations of recent voice verifications. If the traffic is genuine, `verifyctl voice resume` grants another hour's budget; otherwise calls resume by themselves at the next hour. docs/runbook.md, \"The call budget is spent\"."
      })
      channel_held = merge(local.any_record, {
        display_name = "${var.name}: a channel is held (our account is refused)"
        severity     = "CRITICAL"
        condition    = "records reporting a held channel"
        filter       = "metric.type=\"${local.condition_metric["channel_held"]}\" AND ${local.run_filter}"
        group_by     = ["metric.label.channel", "metric.label.deployment"]
        text         = "A provider refused several sends for a fault of our account, not the recipients' (credentials, a suspended account, a From number that is not ours or not SMS-capable, an exhausted quota or daily limit), so the whole channel is held (scope account): its deliveries wait, none fails, no destination is suppressed. `verifyctl status` names the provider's code and since when. Fix the cause, then `verifyctl channel resume <email|sms>`; otherwise the hold lapses by itself after CHANNEL_HOLD_SECONDS. docs/runbook.md, \"A channel or a route is held\"."
      })
      route_held = merge(local.any_record, {
        display_name = "${var.name}: a route of a channel is held (one country or receiving domain)"
        severity     = "WARNING"
        condition    = "records reporting a held route"
        filter       = "metric.type=\"${local.condition_metric["route_held"]}\" AND ${local.run_filter}"
        group_by     = ["metric.label.channel", "metric.label.deployment"]
        text         = "Sends towards one route (an SMS destination country, an email receiving domain) failed for a fault of our sender there (not registered or not allowed for that country, carrier filtering, a domain refusing our reputation), from several destinations and most of that route's sends, so that route alone is held (scope route): its deliveries wait, everything else sends. `verifyctl status` names the route, the code and since when. A country you serve: fix the registration or content, then `verifyctl channel resume sms:<COUNTRY>` (or `email:<domain>`); a domain nobody else uses: let it lapse after CHANNEL_HOLD_SECONDS. docs/runbook.md, \"A channel or a route is held\"."
      })
      sender_faults = merge(local.any_record, {
        display_name = "${var.name}: a provider refused our account"
        severity     = "WARNING"
        condition    = "records reporting failures of our sender or account"
        filter       = "metric.type=\"${local.condition_metric["sender_faults"]}\" AND ${local.run_filter}"
        group_by     = ["metric.label.channel", "metric.label.deployment"]
        text         = "A provider refused a send for a fault of our account (scope account: docs/channels.md lists the codes). The recipient was not suppressed; a few more within CHANNEL_HOLD_WINDOW_SECONDS hold the channel. `verifyctl status` names the code. docs/runbook.md, \"A channel or a route is held\"."
      })
      backlog_drain = merge(local.age_over, {
        display_name = "${var.name}: backlog drains slower than links live (> ${local.drain_threshold}s)"
        severity     = "CRITICAL"
        condition    = "time to drain the ready backlog at the measured send rate, by channel"
        filter       = "metric.type=\"${local.metric_type["drain_seconds"]}\" AND ${local.run_filter} AND metric.label.channel != \"webhook\""
        threshold    = local.drain_threshold
        group_by     = ["metric.label.channel", "metric.label.deployment"]
        text         = "At the rate sends began over the last 5 minutes, the ready backlog of one channel takes longer to drain than a link lives (${var.verification_ttl_seconds}s): links will expire unsent. Check `verifyctl status` (drains in, the fan-out line, a provider's slow-down), the dispatch logs (dispatch_fanout records: is the fan-out at dispatch_max_parallel?), the provider pacing (EMAIL_MAX_PER_SECOND, TWILIO_SENDER_MPS, WHATSAPP_MAX_PER_SECOND, VOICE_CALLS_PER_SECOND). docs/runbook.md, \"Backlog against the TTL\"."
      })
    },
    local.report_alerts,
    local.webhook_alerts,
    local.platform_alerts,
  )
}

resource "google_monitoring_alert_policy" "threshold" {
  for_each              = local.digest_alerting ? {} : local.threshold_alerts
  display_name          = each.value.display_name
  combiner              = "OR"
  severity              = each.value.severity
  notification_channels = local.notification_channels
  depends_on            = [time_sleep.metrics] # the metric must be visible first (waits.tf)

  conditions {
    display_name = each.value.condition
    condition_threshold {
      filter          = each.value.filter
      comparison      = "COMPARISON_GT"
      threshold_value = each.value.threshold
      duration        = each.value.duration
      aggregations {
        alignment_period     = each.value.period
        per_series_aligner   = each.value.aligner
        cross_series_reducer = each.value.reducer
        group_by_fields      = each.value.group_by
      }
      trigger {
        count = 1
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = each.value.text
  }
}

resource "google_monitoring_alert_policy" "signals_absent" {
  display_name          = "${var.name}: no signal records for 10 minutes"
  combiner              = "OR"
  severity              = "CRITICAL"
  notification_channels = local.notification_channels
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
    content   = "dispatch or reconcile has logged no signal record for 10 minutes: nobody is watching the queue, so the age alert cannot fire either. Check the Cloud Scheduler job (paused? failing with 401/403/429?), then the function's logs (crashing at start: a secret or the database?). docs/runbook.md, \"No signal records\"."
  }
}

# The pages were one resource each before the map: keep them, do not recreate them.
moved {
  from = google_monitoring_alert_policy.oldest_ready
  to   = google_monitoring_alert_policy.threshold["oldest_ready"]
}
moved {
  from = google_monitoring_alert_policy.watermark_stale
  to   = google_monitoring_alert_policy.threshold["watermark_stale"]
}
moved {
  from = google_monitoring_alert_policy.oscillation
  to   = google_monitoring_alert_policy.threshold["oscillation"]
}
moved {
  from = google_monitoring_alert_policy.sms_budget
  to   = google_monitoring_alert_policy.threshold["sms_budget"]
}
