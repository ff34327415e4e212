# One identity per function, each with only what it needs; plus the scheduler's and the builder's.

resource "google_service_account" "function" {
  for_each     = local.function_specs
  account_id   = "${var.name}-${each.key}"
  display_name = "signup verification: ${each.value.entry_point}"
  depends_on   = [google_project_service.api]
}

resource "google_service_account" "scheduler" {
  account_id   = "${var.name}-scheduler"
  display_name = "signup verification: Cloud Scheduler caller of dispatch and reconcile"
  depends_on   = [google_project_service.api]
}

resource "google_service_account" "build" {
  account_id   = "${var.name}-build"
  display_name = "signup verification: Cloud Build for the functions"
  depends_on   = [google_project_service.api]
}

locals {
  # Project-level roles of every function: connect to Cloud SQL, log in as an IAM database user,
  # write logs. Secret access is granted per secret (secrets.tf), invocation per function (invokers.tf).
  function_project_roles = ["roles/cloudsql.client", "roles/cloudsql.instanceUser", "roles/logging.logWriter"]
  function_role_pairs = merge([
    for key in keys(local.function_specs) : { for role in local.function_project_roles : "${key}/${role}" => { function = key, role = role } }
  ]...)
}

resource "google_project_iam_member" "function" {
  for_each = local.function_role_pairs
  project  = var.project_id
  role     = each.value.role
  member   = google_service_account.function[each.value.function].member
}

# What Google documents for a custom build account of a function deployed from a bucket
# (Cloud Run, "build service account"): logging.logWriter for build logs, artifactregistry.writer
# for the image, storage.objectAdmin (project-wide) for the source, which the build reads from our
# bucket or from the copy Cloud Functions keeps in its own gcf-v2-sources bucket in this project.
# The provider's cloudfunctions2 basic builder example grants the same. Functions wait (waits.tf).
resource "google_project_iam_member" "build" {
  for_each = toset(["roles/logging.logWriter", "roles/artifactregistry.writer", "roles/storage.objectAdmin"])
  project  = var.project_id
  role     = each.value
  member   = google_service_account.build.member
}

resource "google_project_iam_member" "migrator" {
  for_each = { for pair in setproduct(var.migrators, ["roles/cloudsql.client", "roles/cloudsql.instanceUser"]) : "${pair[0]}/${pair[1]}" => { member = pair[0], role = pair[1] } }
  project  = var.project_id
  role     = each.value.role
  member   = each.value.member
}
