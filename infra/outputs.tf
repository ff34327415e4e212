output "function_urls" {
  description = "HTTPS endpoint of each function (the Cloud Run service's URL)."
  value       = { for key, s in google_cloud_run_v2_service.function : key => s.uri }
}

output "create_url" {
  description = "What the signup site POSTs to (with an identity token of the signup site's service account, this URL as audience)."
  value       = google_cloud_run_v2_service.function["create"].uri
}

output "signup_site_service_account" {
  description = "The only identity that may call create_verification (var.signup_site_service_account, or the one Terraform created)."
  value       = local.signup_site_email
}

output "verify_link_base" {
  description = "Base URL of the links in verification emails."
  value       = local.common_env.VERIFY_LINK_BASE
}

output "required_secrets" {
  description = "Setting -> Secret Manager secret ID, for the chosen transports: what deploy.sh fills (known at plan time)."
  value       = { for s in local.enabled_secrets : local.secret_env[s] => local.secret_ids[s] }
}

output "function_secrets" {
  description = "Function -> the settings it reads from Secret Manager (docs/deploy.md's table is checked against it)."
  value       = { for key, secrets in local.function_secrets : key => [for s in secrets : local.secret_env[s]] }
}

output "image" {
  description = "The functions' image: deploy.sh builds it when it does not exist yet (image.tf)."
  value       = local.image
}

output "build" {
  description = "What deploy.sh's image build needs: the build account, the bundle's bucket and object, the builder, an entry point."
  value = {
    service_account = google_service_account.build.id
    bucket          = google_storage_bucket.source.name
    object          = google_storage_bucket_object.source.name
    builder         = var.builder
    function_target = local.function_specs["status"].entry_point
  }
}

output "schema_jobs" {
  description = "Cloud Run jobs deploy.sh executes, in this order, before new code deploys: migrations, then database grants."
  value       = [google_cloud_run_v2_job.schema["migrate"].name, google_cloud_run_v2_job.schema["grant"].name]
}

output "instance_connection_name" {
  description = "INSTANCE_CONNECTION_NAME of the Cloud SQL instance (verifyctl from an operator's machine)."
  value       = google_sql_database_instance.main.connection_name
}

output "database_name" {
  description = "The service's database."
  value       = google_sql_database.main.name
}

output "peak_database_connections" {
  description = "sum(max_instances x concurrency): the connections the functions can hold at once."
  value       = local.peak_connections
}

output "connection_budget" {
  description = "Connections per source (max_instances x concurrency), the reserve and max_connections: docs/deploy.md's budget is checked against it."
  value = {
    sources         = local.connection_budget
    peak            = local.peak_connections
    reserved        = local.db.reserved_connections
    max_connections = local.db.max_connections
    tier            = local.db.tier
  }
}

output "scheduler_jobs" {
  description = "Cloud Scheduler job -> the function it invokes every minute."
  value       = { for key, job in local.ticks : "${var.name}-${replace(key, "_", "-")}" => job.function }
}

output "public_functions" {
  description = "Functions reachable without a Google identity, and how (var.public_access)."
  value       = { for key in local.public_functions : key => var.public_access }
}

output "project_id" {
  description = "The project (deploy.sh passes it to gcloud, whose own default project may differ)."
  value       = var.project_id
}

output "region" {
  description = "Region of the functions, the jobs and the database."
  value       = var.region
}

output "run_capacity" {
  description = "What the services can use at their max_instances (one vCPU each, var.memory each): deploy.sh compares it with the project's Cloud Run quota."
  value = {
    instances = sum(values(local.instance_limits))
    cpu       = 1
    memory    = var.memory
  }
}
