# Log-based metrics from the structured signal records the dispatch and reconcile functions log
# (contract: docs/deploy.md, "Signal records"; emitted by signal_records.emit). One record per channel per
# invocation: jsonPayload.event = "signals", .deployment, .channel, .oldest_ready_verification_seconds,
# .ready_count, .reconciler_watermark_age_seconds, .ambiguous_count, .oscillating_count, .attempts_<outcome>
locals {
  signals_filter = join(" AND ", [
    "resource.type=\"cloud_run_revision\"",
    "jsonPayload.event=\"signals\"",
    "jsonPayload.deployment=\"${var.name}\"",
  ])
  # Bucket bounds of the age metrics. The alert thresholds are bounds, so a percentile computed
  # from buckets is exact at the threshold: every sample below it lies in a bucket that ends there.
  age_bounds   = [1, 5, 10, 15, 30, 60, 90, 120, 180, 300, 600, 900, 1800, 3600, 7200]
  count_bounds = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 50000, 100000]

  channel_labels = {
    channel    = "EXTRACT(jsonPayload.channel)"
    deployment = "EXTRACT(jsonPayload.deployment)"
  }
  distributions = {
    oldest_ready_seconds = {
      field       = "oldest_ready_verification_seconds"
      unit        = "s"
      bounds      = local.age_bounds
      description = "Age of the oldest delivery intent eligible to send now (same predicate as the worker's claim), per channel."
    }
    ready_count = {
      field       = "ready_count"
      unit        = "1"
      bounds      = local.count_bounds
      description = "Delivery intents eligible to send now, per channel."
    }
    reconciler_watermark_age_seconds = {
      field       = "reconciler_watermark_age_seconds"
      unit        = "s"
      bounds      = local.age_bounds
      description = "Time since the reconciler last completed a sweep."
    }
    oldest_awaiting_report_seconds = {
      field       = "oldest_awaiting_report_seconds"
      unit        = "s"
      bounds      = local.age_bounds
      description = "Age of the oldest delivery accepted in the last day without a delivered report from the provider, per channel."
    }
    drain_seconds = {
      field       = "drain_seconds"
      unit        = "s"
      bounds      = local.age_bounds
      description = "Time the ready backlog takes to drain at the rate sends began over the signals window, per channel (alert: longer than the link TTL)."
    }
    ambiguous_count = {
      field       = "ambiguous_count"
      unit        = "1"
      bounds      = local.count_bounds
      description = "Delivery intents whose last attempt had an unknown outcome, per channel."
    }
  }
  # Attempts by outcome: each record counts the attempts that ended in the last
  # attempts_window_seconds (300 s), per channel, as attempts_<outcome>.
  attempt_outcomes = ["accepted", "retryable", "ambiguous", "failed"]
  attempt_distributions = { for outcome in local.attempt_outcomes : "attempts_${outcome}" => {
    field       = "attempts_${outcome}"
    unit        = "1"
    bounds      = local.count_bounds
    description = "Delivery attempts that ended ${outcome} in the last window (attempts_window_seconds), per channel."
  } }
}

locals {
  signal_metrics = merge(local.distributions, local.attempt_distributions)
  # With the digest alerting (tiers.tf) no page reads the distributions or the condition counts, and
  # their points (one per series and minute, from every signal record, idle or not) are chargeable
  # Monitoring ingestion: only the absence page's counter is made (tools/plan_cost.py prices them).
  metrics_made = !local.digest_alerting
}

resource "google_logging_metric" "signal" {
  for_each    = local.metrics_made ? local.signal_metrics : {}
  name        = "${var.name}/${each.key}"
  description = each.value.description
  filter      = "${local.signals_filter} AND jsonPayload.${each.value.field}>=0"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "DISTRIBUTION"
    unit         = each.value.unit
    display_name = "${var.name} ${replace(each.key, "_", " ")}"
    labels {
      key         = "channel"
      value_type  = "STRING"
      description = "email or sms"
    }
    labels {
      key         = "deployment"
      value_type  = "STRING"
      description = "DEPLOYMENT setting of the function that logged the record"
    }
  }
  value_extractor  = "EXTRACT(jsonPayload.${each.value.field})"
  label_extractors = local.channel_labels

  bucket_options {
    explicit_buckets {
      bounds = each.value.bounds
    }
  }

  depends_on = [time_sleep.apis]
}

# Counts every signal record, per function: its absence means dispatch or reconcile stopped.
resource "google_logging_metric" "signal_records" {
  name        = "${var.name}/signal_records"
  description = "Signal records logged, per function (Cloud Run service). Zero for 10 minutes = the function is not running."
  filter      = local.signals_filter

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "${var.name} signal records"
    labels {
      key        = "service_name"
      value_type = "STRING"
    }
  }
  label_extractors = { service_name = "EXTRACT(resource.labels.service_name)" }
  depends_on       = [time_sleep.apis]
}

# Records that report a condition, counted: each metric is one page's input (alerts.tf). The
# labels are the record fields the page groups by.
locals {
  condition_records = {
    oscillating = {
      condition   = "jsonPayload.oscillating_count>0"
      labels      = ["channel", "deployment"]
      description = "Signal records with oscillating_count > 0: deliveries stuck flipping between ambiguous outcomes and retries."
    }
    sms_budget_warning = {
      condition   = "jsonPayload.sms_budget_used_percent>=80"
      labels      = ["deployment"]
      description = "Signal records with sms_budget_used_percent >= 80: most of this hour's SMS budget is spent (SMS_MAX_PER_HOUR)."
    }
    sms_budget_paused = {
      condition   = "jsonPayload.sms_budget_paused=true"
      labels      = ["deployment"]
      description = "Signal records with sms_budget_paused = true: the hourly SMS budget is spent and SMS sends are paused (SMS pumping?)."
    }
    voice_budget_paused = {
      condition   = "jsonPayload.voice_budget_paused=true"
      labels      = ["deployment"]
      description = "Signal records with voice_budget_paused = true: the hourly call budget is spent and calls are paused (toll fraud?)."
    }
    channel_held = {
      condition   = "jsonPayload.channel_held=true"
      labels      = ["channel", "deployment"]
      description = "Signal records with channel_held = true: faults of our account (scope account) hold the whole channel; its deliveries wait."
    }
    sender_faults = {
      condition   = "jsonPayload.sender_faults>0"
      labels      = ["channel", "deployment"]
      description = "Signal records with sender_faults > 0: a provider refused a send for a fault of our account."
    }
    route_held = {
      condition   = "jsonPayload.routes_held>0"
      labels      = ["channel", "deployment"]
      description = "Signal records with routes_held > 0: route faults (one SMS destination country, one email receiving domain) hold that route; only its deliveries wait."
    }
  }
}

resource "google_logging_metric" "condition" {
  for_each    = local.metrics_made ? local.condition_records : {}
  name        = "${var.name}/${each.key}_records"
  description = each.value.description
  filter      = "${local.signals_filter} AND ${each.value.condition}"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "${var.name} ${replace(each.key, "_", " ")} records"
    dynamic "labels" {
      for_each = each.value.labels
      content {
        key        = labels.value
        value_type = "STRING"
      }
    }
  }
  label_extractors = { for label in each.value.labels : label => "EXTRACT(jsonPayload.${label})" }
  depends_on       = [time_sleep.apis]
}

# The counted conditions were one resource each before the map: keep them, do not recreate them.
moved {
  from = google_logging_metric.oscillating_records
  to   = google_logging_metric.condition["oscillating"]
}
moved {
  from = google_logging_metric.sms_budget_warning_records
  to   = google_logging_metric.condition["sms_budget_warning"]
}
moved {
  from = google_logging_metric.sms_budget_paused_records
  to   = google_logging_metric.condition["sms_budget_paused"]
}
