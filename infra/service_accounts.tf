# One identity per function, each with only what it needs; plus the scheduler's, the builder's,
# the migrator's and (unless var.signup_site_service_account names one) the signup site's.

resource "google_service_account" "function" {
  for_each     = local.function_specs
  account_id   = "${var.name}-${each.key}"
  display_name = "signup verification: ${each.value.entry_point}"
  depends_on   = [time_sleep.apis]
}

resource "google_service_account" "scheduler" {
  account_id   = "${var.name}-scheduler"
  display_name = "signup verification: Cloud Scheduler caller of dispatch and reconcile"
  depends_on   = [time_sleep.apis]
}

resource "google_service_account" "build" {
  account_id   = "${var.name}-build"
  display_name = "signup verification: Cloud Build of the functions' image"
  depends_on   = [time_sleep.apis]
}

# Runs the migrations and the database grants (migrations.tf): the owner of every table, always
# the same identity, so a later migration can alter what an earlier one created.
resource "google_service_account" "migrator" {
  account_id   = "${var.name}-migrator"
  display_name = "signup verification: database migrations and grants (Cloud Run job)"
  depends_on   = [time_sleep.apis]
}

resource "google_service_account" "signup_site" {
  count        = var.signup_site_service_account == "" ? 1 : 0
  account_id   = "${var.name}-signup-site"
  display_name = "signup verification: the signup site, sole caller of create_verification"
  depends_on   = [time_sleep.apis]
}

locals {
  signup_site_email = var.signup_site_service_account != "" ? var.signup_site_service_account : google_service_account.signup_site[0].email

  # Who connects to the database: each function, the migrator and the operators, with Cloud SQL's
  # client and IAM login roles bound to this instance only (an IAM condition), so no identity here
  # can reach another instance in the project. Logs need no role: Cloud Run collects stdout itself.
  database_clients = merge(
    { for key in keys(local.function_specs) : key => google_service_account.function[key].member },
    { migrator = google_service_account.migrator.member },
    { for member in keys(local.database_people) : member => member }, # operators' verifyctl (variables_access.tf)
  )
  database_client_grants = merge([
    for who, member in local.database_clients : {
      for role in ["roles/cloudsql.client", "roles/cloudsql.instanceUser"] : "${who}/${role}" => { member = member, role = role }
    }
  ]...)
}

resource "google_project_iam_member" "database_client" {
  for_each = local.database_client_grants
  project  = var.project_id
  role     = each.value.role
  member   = each.value.member
  condition {
    title       = "only ${local.instance_name}"
    description = "The service's own Cloud SQL instance"
    expression  = "resource.name == 'projects/${var.project_id}/instances/${local.instance_name}' && resource.type == 'sqladmin.googleapis.com/Instance'"
  }
}

# Cloud Build writes the build's log to Cloud Logging as the build account (the build config's
# CLOUD_LOGGING_ONLY). Its storage and registry rights are per resource: source.tf and image.tf.
resource "google_project_iam_member" "build_logs" {
  project = var.project_id
  role    = "roles/logging.logWriter"
  member  = google_service_account.build.member
}
