# Who the pages reach, and the pages on the platform itself. The signal pages (alerts.tf) say that
# people wait; these say why the platform might be the cause: Cloud Run refusing, failing, slow or
# at its instance cap, Cloud SQL near its CPU, connection or disk limit, the fan-out queue not
# draining, the image build failing. Each text names its runbook section (docs/runbook.md); a test
# checks that the section exists for every page of the plan.
locals {
  # Every page goes to the required email channel, and to any channel var.notification_channels adds.
  notification_channels = concat([google_monitoring_notification_channel.email.name], var.notification_channels)

  # The services that answer requests: the latency page. dispatch and reconcile are left out: their
  # invocations run for most of their timeout by design (outbox/idle.py).
  serving = ["create", "confirm", "status", "reports"]
  # The instance-cap pages: every service whose cap can be reached, dispatch included (at its cap the
  # scheduled, fan-out and nudged invocations share its instances; a tick or task then finds none and
  # Cloud Run answers it 429). reconcile runs one instance by design: a tick that finds it busy is
  # answered 429, which the 429 page covers for every service.
  capped       = ["create", "confirm", "dispatch", "status", "reports"]
  run_services = "resource.type=\"cloud_run_revision\" AND resource.label.service_name=one_of(${join(", ", [for key, name in local.function_names : "\"${name}\""])})"
  serving_only = "resource.type=\"cloud_run_revision\" AND resource.label.service_name=one_of(${join(", ", [for key in local.serving : "\"${local.function_names[key]}\""])})"
  sql_instance = "resource.type=\"cloudsql_database\" AND resource.label.database_id=\"${var.project_id}:${local.instance_name}\""
  # A count over five minutes per service, or a gauge held for a while.
  per_5min = { duration = "0s", period = "300s", aligner = "ALIGN_DELTA", reducer = "REDUCE_SUM" }
  held     = { period = "60s", aligner = "ALIGN_MEAN", reducer = "REDUCE_SUM" }
  runbook  = "docs/runbook.md"
  # The fan-out queue (fanout.tf), when there is one.
  fanout_queues = local.fanout_on ? ["${var.name}-dispatch-fanout"] : []

  platform_alerts = merge(
    {
      run_429 = merge(local.per_5min, {
        display_name = "${var.name}: Cloud Run answers 429 (> ${var.platform_alerts.http_429_per_5min} in 5 min)"
        severity     = "WARNING"
        condition    = "429 responses per service"
        filter       = "metric.type=\"run.googleapis.com/request_count\" AND ${local.run_services} AND metric.label.response_code=\"429\""
        threshold    = var.platform_alerts.http_429_per_5min
        group_by     = ["resource.label.service_name"]
        text         = "A function answered more than ${var.platform_alerts.http_429_per_5min} requests with 429 in 5 minutes. Either Cloud Run had no instance to give (the service is at max_instances: the instance-cap alert fires with it) or create refused callers over their limits (SMS pumping, a looping client). ${local.runbook}, \"Cloud Run answers 429\"."
      })
      run_5xx = merge(local.per_5min, {
        display_name = "${var.name}: Cloud Run answers 5xx (> ${var.platform_alerts.http_5xx_per_5min} in 5 min)"
        severity     = "ERROR"
        condition    = "5xx responses per service"
        filter       = "metric.type=\"run.googleapis.com/request_count\" AND ${local.run_services} AND metric.label.response_code_class=\"5xx\""
        threshold    = var.platform_alerts.http_5xx_per_5min
        group_by     = ["resource.label.service_name"]
        text         = "A function answered more than ${var.platform_alerts.http_5xx_per_5min} requests with 5xx in 5 minutes. The functions answer bad input with 4xx, so a 5xx is the database unavailable (503), an instance that cannot start (a secret, the image, the database), a timeout (504) or a crash. ${local.runbook}, \"Cloud Run answers 5xx\"."
      })
      run_latency = {
        display_name = "${var.name}: p99 latency > ${var.platform_alerts.latency_p99_ms} ms for 5 min"
        severity     = "WARNING"
        condition    = "p99 request latency per request-serving service"
        filter       = "metric.type=\"run.googleapis.com/request_latencies\" AND ${local.serving_only}"
        threshold    = var.platform_alerts.latency_p99_ms
        duration     = "300s"
        period       = "60s"
        aligner      = "ALIGN_PERCENTILE_99"
        reducer      = "REDUCE_MAX"
        group_by     = ["resource.label.service_name"]
        text         = "The 99th percentile of create, confirm, status or reports stayed above ${var.platform_alerts.latency_p99_ms} ms for 5 minutes (a cold start is one minute, not five). Usually the database: lock waits, CPU, connections. ${local.runbook}, \"Slow requests\"."
      }
      sql_cpu = merge(local.held, {
        display_name = "${var.name}: Cloud SQL CPU > ${var.platform_alerts.sql_cpu * 100} % for 10 min"
        severity     = "WARNING"
        condition    = "Cloud SQL CPU utilisation"
        filter       = "metric.type=\"cloudsql.googleapis.com/database/cpu/utilization\" AND ${local.sql_instance}"
        threshold    = var.platform_alerts.sql_cpu
        duration     = "600s"
        reducer      = "REDUCE_MAX"
        group_by     = ["resource.label.database_id"]
        text         = "The primary's CPU stayed above ${var.platform_alerts.sql_cpu * 100} % for 10 minutes: commit latency climbs from here, and create, confirm and the claims slow down. ${local.runbook}, \"Cloud SQL is near a limit\"."
      })
      sql_connections = merge(local.held, {
        display_name = "${var.name}: Cloud SQL connections > ${var.platform_alerts.sql_connections * 100} % of max_connections"
        severity     = "ERROR"
        condition    = "PostgreSQL backends, all databases"
        filter       = "metric.type=\"cloudsql.googleapis.com/database/postgresql/num_backends\" AND ${local.sql_instance}"
        threshold    = floor(var.platform_alerts.sql_connections * local.db.max_connections)
        duration     = "300s"
        group_by     = ["resource.label.database_id"]
        text         = "More than ${floor(var.platform_alerts.sql_connections * local.db.max_connections)} of max_connections (${local.db.max_connections}) are in use for 5 minutes, while the functions can hold at most ${local.peak_connections}: something else holds connections (operator sessions, a stuck job), or the budget changed outside Terraform. Past max_connections new instances cannot connect. ${local.runbook}, \"Cloud SQL is near a limit\"."
      })
      sql_disk = merge(local.held, {
        display_name = "${var.name}: Cloud SQL disk > ${var.platform_alerts.sql_disk * 100} % full"
        severity     = "ERROR"
        condition    = "Cloud SQL disk utilisation"
        filter       = "metric.type=\"cloudsql.googleapis.com/database/disk/utilization\" AND ${local.sql_instance}"
        threshold    = var.platform_alerts.sql_disk
        duration     = "900s"
        reducer      = "REDUCE_MAX"
        group_by     = ["resource.label.database_id"]
        text         = "The instance's disk stayed above ${var.platform_alerts.sql_disk * 100} % for 15 minutes although storage grows by itself (disk_autoresize): it is growing faster than autoresize adds, or autoresize is capped. A full disk stops every write. ${local.runbook}, \"Cloud SQL is near a limit\"."
      })
    },
    # One page per capped service: its own instance limit is the threshold.
    { for key in local.capped : "instance_cap_${key}" => merge(local.held, {
      display_name = "${var.name}: ${key} near its instance cap (${local.instance_limits[key]})"
      severity     = "WARNING"
      condition    = "instances of ${local.function_names[key]}"
      filter       = "metric.type=\"run.googleapis.com/container/instance_count\" AND resource.type=\"cloud_run_revision\" AND resource.label.service_name=\"${local.function_names[key]}\""
      threshold    = var.platform_alerts.instance_saturation * local.instance_limits[key] - 0.5
      duration     = "300s"
      aligner      = "ALIGN_MAX"
      group_by     = ["resource.label.service_name"]
      text         = "${local.function_names[key]} has run at least ${ceil(var.platform_alerts.instance_saturation * local.instance_limits[key] - 0.5)} of its ${local.instance_limits[key]} instances (max_instances) for 5 minutes: at the cap Cloud Run answers 429. Raising max_instances raises the connection budget with it. ${local.runbook}, \"A function is near its instance cap\"."
    }) },
    # Tasks that cannot start wait in the fan-out queue.
    { for queue in local.fanout_queues : "fanout_queue" => merge(local.held, {
      display_name = "${var.name}: fan-out tasks waiting (queue depth > ${local.dispatch_max_parallel} for 5 min)"
      severity     = "WARNING"
      condition    = "tasks in the dispatch fan-out queue"
      filter       = "metric.type=\"cloudtasks.googleapis.com/queue/depth\" AND resource.type=\"cloud_tasks_queue\" AND resource.label.queue_id=\"${queue}\""
      threshold    = local.dispatch_max_parallel
      duration     = "300s"
      aligner      = "ALIGN_MAX"
      reducer      = "REDUCE_MAX"
      group_by     = ["resource.label.queue_id"]
      text         = "More fan-out tasks wait in ${queue} than may run at once (${local.dispatch_max_parallel}) for 5 minutes: Cloud Tasks cannot start them (the dispatch service refuses the fan-out's token, or is at its instance cap) and they are retried until they expire. ${local.runbook}, \"Fan-out tasks are waiting\"."
    }) },
  )
}

resource "google_monitoring_notification_channel" "email" {
  display_name = "${var.name}: signup verification on-call"
  type         = "email"
  labels       = { email_address = var.notification_email }
  user_labels  = local.labels
  depends_on   = [time_sleep.apis]
}

# A failed image build: deploy.sh stops on it too, but a build run outside it (a retry from the
# console, a later automation) fails silently otherwise. Cloud Build logs a last line "ERROR" for a
# build that failed (and "DONE" for one that succeeded) in the builds' Cloud Logging log (the build
# config's CLOUD_LOGGING_ONLY); a log-match page fires on it directly, with no metric to wait for.
resource "google_monitoring_alert_policy" "build_failed" {
  count                 = local.digest_alerting ? 0 : 1 # the digest tier: deploy.sh stops on a failed build
  display_name          = "${var.name}: an image build failed"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = local.notification_channels

  conditions {
    display_name = "a Cloud Build build ended in ERROR"
    condition_matched_log {
      filter = "resource.type=\"build\" AND logName=\"projects/${var.project_id}/logs/cloudbuild\" AND textPayload=\"ERROR\""
    }
  }

  alert_strategy {
    notification_rate_limit {
      period = "3600s"
    }
    auto_close = "86400s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "A Cloud Build build in this project failed: the functions' image is not there, so no new revision or job can start from this bundle (the running ones are unaffected). ${local.runbook}, \"An image build failed\"."
  }

  depends_on = [time_sleep.apis]
}
