# Google's APIs accept a new IAM grant or log-based metric before every part of Google sees it.
# These waits run in deploy.sh's first phase, beside the ~10 minute Cloud SQL creation, so a
# first deploy pays nothing extra; later runs wait only when their inputs change.

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
