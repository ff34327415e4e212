# Google's APIs accept a new IAM grant or log-based metric before every part of Google sees it.
# These waits run in deploy.sh's first phase, beside the ~10 minute Cloud SQL creation, so a
# first deploy pays nothing extra; later runs wait only when their inputs change. Two do not fit
# beside it: the API wait comes before everything, and the invokers' wait after the services.

# `services enable` returns when the API is on for Service Usage, but its first calls may still be
# refused for a minute or two ("... API has not been used in project ... or it is disabled. ...
# wait a few minutes"). Everything that calls an API this enables waits for this, not for
# google_project_service.api itself. An API added later (db_connectivity) waits again.
resource "time_sleep" "apis" {
  create_duration = "90s"
  triggers = {
    apis = join(",", sort([for api in google_project_service.api : api.service]))
  }
}

# The image build runs as the build account, the migration job as the migrator, and a new revision
# starts only if the function's own account can read its secrets: those grants must have
# propagated first, else the build cannot read the bundle or push the image, the job cannot
# connect, or the revision fails on a secret. Google's own example for a custom build account
# waits 60 s after granting.
resource "time_sleep" "iam_grants" {
  create_duration = "60s"
  # A grant added later (a new function, secret or role) waits again; an unchanged set does not.
  triggers = {
    build    = join(",", [google_project_iam_member.build_logs.id, google_storage_bucket_iam_member.build_reads_source.id, google_artifact_registry_repository_iam_member.build_push.id])
    database = join(",", keys(google_project_iam_member.database_client))
    secrets  = join(",", keys(google_secret_manager_secret_iam_member.function))
  }
}

# An alert policy on a log-based metric created moments ago fails with "Cannot find metric(s)
# that match type ... could take up to 10 minutes" (hashicorp/terraform-provider-google#11102).
resource "time_sleep" "metrics" {
  create_duration = "600s"
  triggers = {
    metrics = join(",", concat(
      [for m in google_logging_metric.signal : m.name],
      [for m in google_logging_metric.condition : m.name],
      [google_logging_metric.signal_records.name],
    ))
  }
}

# Cloud Scheduler ticks dispatch and reconcile from the moment its jobs exist, with the scheduler's
# token, which Cloud Run admits only once the invoker grants (invokers.tf) have propagated; the
# fan-out's tasks need theirs (fanout.tf) the same way. Without this wait the first minutes of
# ticks answer 403, and the absence page's window starts with a failure.
resource "time_sleep" "invokers" {
  create_duration = "60s"
  triggers = {
    scheduled = join(",", sort([for key, grant in google_cloud_run_v2_service_iam_member.invoker : grant.id if endswith(key, "/scheduler") || contains(["dispatch/fanout", "dispatch/nudge"], key)]))
    fanout = join(",", concat(
      [for grant in google_cloud_tasks_queue_iam_member.dispatch_enqueues : grant.id],
      [for grant in google_service_account_iam_member.dispatch_acts_as_fanout : grant.id],
      [for grant in google_cloud_tasks_queue_iam_member.create_enqueues : grant.id],
      [for grant in google_service_account_iam_member.create_acts_as_nudge : grant.id],
    ))
  }
}
