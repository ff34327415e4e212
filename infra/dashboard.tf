# The four signals an on-call needs first: is ready work aging, is it growing, where do attempts
# end, is the reconciler moving. Plus ambiguous intents beside the attempts.
locals {
  dashboard_charts = [
    { title = "Oldest eligible intent age (s), by channel", metrics = [local.metric_type["oldest_ready_seconds"]], aligner = "ALIGN_PERCENTILE_99", reducer = "REDUCE_MAX", by = ["metric.label.channel"], threshold = local.oldest_ready_threshold },
    { title = "Ready intents, by channel", metrics = [local.metric_type["ready_count"]], aligner = "ALIGN_PERCENTILE_99", reducer = "REDUCE_MAX", by = ["metric.label.channel"], threshold = null },
    { title = "Attempts in the last 5 minutes, by outcome and channel", metrics = [for o in local.attempt_outcomes : local.metric_type["attempts_${o}"]], aligner = "ALIGN_PERCENTILE_99", reducer = "REDUCE_MAX", by = ["metric.label.channel"], threshold = null },
    { title = "Reconciler watermark age (s)", metrics = [local.metric_type["reconciler_watermark_age_seconds"]], aligner = "ALIGN_PERCENTILE_99", reducer = "REDUCE_MAX", by = ["metric.label.deployment"], threshold = var.watermark_stale_threshold_seconds },
    { title = "Ambiguous intents, by channel", metrics = [local.metric_type["ambiguous_count"]], aligner = "ALIGN_PERCENTILE_99", reducer = "REDUCE_MAX", by = ["metric.label.channel"], threshold = null },
  ]
}

# Fields the Monitoring API drops when they hold their default (an empty legend, no thresholds, a
# zero position) are left out, else every plan shows the dashboard changing
# (hashicorp/terraform-provider-google#16173). The `for ... if` filters below drop them.
resource "google_monitoring_dashboard" "signals" {
  count = local.metrics_made ? 1 : 0 # its charts read the distributions (metrics.tf)
  dashboard_json = jsonencode({
    displayName = "Signup verification delivery (${var.name})"
    mosaicLayout = {
      columns = 48
      tiles = [for i, chart in local.dashboard_charts : merge(
        { for k, v in { xPos = (i % 2) * 24, yPos = floor(i / 2) * 16 } : k => v if v != 0 },
        {
          width  = 24
          height = 16
          widget = {
            title = chart.title
            xyChart = merge(
              {
                dataSets = [for metric in chart.metrics : merge(
                  {
                    plotType = "LINE"
                    timeSeriesQuery = {
                      timeSeriesFilter = {
                        filter = "metric.type=\"${metric}\" AND resource.type=\"cloud_run_revision\""
                        aggregation = {
                          alignmentPeriod    = "60s"
                          perSeriesAligner   = chart.aligner
                          crossSeriesReducer = chart.reducer
                          groupByFields      = chart.by
                        }
                      }
                    }
                  },
                  # attempts_<outcome> metrics: the legend names the outcome.
                  { for k, v in { legendTemplate = "${element(split("/", metric), length(split("/", metric)) - 1)} $${metric.labels.channel}" } : k => v if length(chart.metrics) > 1 },
                )]
              },
              { for k, v in { thresholds = [for t in [chart.threshold] : { value = t, color = "RED", direction = "ABOVE" } if t != null] } : k => v if length(v) > 0 },
            )
          }
        },
      )]
    }
  })
}
