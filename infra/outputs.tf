output "instance_connection_name" {
  description = "INSTANCE_CONNECTION_NAME of the Cloud SQL instance (deploy.sh migrates through it)."
  value       = google_sql_database_instance.main.connection_name
}

output "database_name" {
  description = "The service's database."
  value       = google_sql_database.main.name
}

output "function_urls" {
  description = "HTTPS endpoint of each function."
  value       = { for key, f in google_cloudfunctions2_function.function : key => f.service_config[0].uri }
}

output "create_url" {
  description = "What the signup site POSTs to (with an identity token of signup_site_service_account)."
  value       = google_cloudfunctions2_function.function["create"].service_config[0].uri
}

output "verify_link_base" {
  description = "Base URL of the links in verification emails."
  value       = local.common_env.VERIFY_LINK_BASE
}

output "database_writers" {
  description = "IAM database users that read and write (deploy.sh: verifyctl grant --writer)."
  value       = [for key, spec in local.function_specs : google_sql_user.function[key].name if spec.db_role == "writer"]
}

output "database_readers" {
  description = "IAM database users that only read (deploy.sh: verifyctl grant --reader)."
  value       = [for key, spec in local.function_specs : google_sql_user.function[key].name if spec.db_role == "reader"]
}

output "secrets" {
  description = "Secret Manager secrets to fill out of band (docs/deploy.md, step 5): setting -> secret ID."
  value       = { for key, s in google_secret_manager_secret.secret : local.secret_env[key] => s.secret_id }
}

output "peak_database_connections" {
  description = "sum(max_instances x concurrency): the connections the functions can hold at once."
  value       = local.peak_connections
}

output "services_without_invoker_iam_check" {
  description = "Cloud Run services (of the public functions) whose invoker IAM check deploy.sh turns off: the confirm and delivery_reports functions' when confirm_public_access = \"invoker_iam_check_disabled\", else none."
  # issue 13: delivery_reports is public like confirm
  value = var.confirm_public_access == "invoker_iam_check_disabled" ? [google_cloudfunctions2_function.function["confirm"].name, google_cloudfunctions2_function.function["reports"].name] : []
}

output "project_id" {
  description = "The project (deploy.sh passes it to gcloud, whose own default project may differ)."
  value       = var.project_id
}

output "region" {
  description = "Region of the functions and the database."
  value       = var.region
}
