# The digest page (the tier's alerting "digest": the small tier, tiers.tf). Cloud Monitoring bills
# every alerting condition by the month (tools/plan_cost.py's price table), and the one-policy-per-
# page set (alerts.tf, alerts_platform.tf: 23 or more) costs more a month than a small tier's whole
# database. So here two conditions carry every page:
#   - the digest: a log match on the records that mean someone must act, each naming its page:
#       the reconciler's `event="page"` record, written every minute while any signal page's
#       condition holds (oldest ready, backlog against the TTL, SMS budget at 80 % or spent, a held
#       channel or route, a refused account, oscillating or unreported deliveries, a stale
#       watermark: operations/signals.py computes them with the same thresholds), and
#       Cloud Run's own refusals and failures on any service: a request aborted for want of an
#       instance (a service at its cap: Cloud Run answers 429, the 10x case) or answered 5xx;
#   - the absence page (alerts.tf, signals_absent), which a log match cannot express.
# A log match pages on each matching entry, so notifications are rate limited; the incident names
# the page (its labels) and the runbook's digest section says where to go from each.
locals {
  digest_filter = join(" OR ", [
    "(resource.type=\"cloud_run_revision\" AND jsonPayload.event=\"page\" AND jsonPayload.deployment=\"${var.name}\")",
    "(resource.type=\"cloud_run_revision\" AND resource.labels.service_name=(${join(" OR ", [for key, name in local.function_names : "\"${name}\""])}) AND (textPayload:\"no available instance\" OR (log_id(\"run.googleapis.com/requests\") AND httpRequest.status>=500)))",
  ])
}

resource "google_monitoring_alert_policy" "digest" {
  count                 = local.digest_alerting ? 1 : 0
  display_name          = "${var.name}: a page (signals, or Cloud Run refusing or failing requests)"
  combiner              = "OR"
  severity              = "CRITICAL"
  notification_channels = local.notification_channels

  conditions {
    display_name = "a page record, or a request refused at the instance cap or answered 5xx"
    condition_matched_log {
      filter = local.digest_filter
      label_extractors = {
        page    = "EXTRACT(jsonPayload.summary)"
        service = "EXTRACT(resource.labels.service_name)"
        status  = "EXTRACT(httpRequest.status)"
      }
    }
  }

  alert_strategy {
    notification_rate_limit {
      period = "1800s" # while a condition holds the reconciler repeats its record every minute
    }
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "Someone must act. The incident's labels say which: `page` lists the signal pages that hold (the reconciler's record, every minute while they do: people waiting, the SMS budget, a held channel, a stale watermark...); `service` and `status` name a service that Cloud Run refused requests for at its instance cap (429) or that answered 5xx. `verifyctl status` shows the same alerts. docs/runbook.md, \"The digest page\"."
  }
}
