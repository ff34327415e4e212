# Secret containers only. Values are added out of band (docs/deploy.md, step 5):
#   verifyctl new-key | gcloud secrets versions add verify-token-keys --data-file=-
# so no secret value is ever in a .tf file, a plan or the Terraform state.
resource "google_secret_manager_secret" "secret" {
  for_each  = local.enabled_secrets
  secret_id = "${var.name}-${replace(each.key, "_", "-")}"
  labels    = { service = "signup-verification", setting = lower(local.secret_env[each.key]) }

  replication {
    user_managed {
      replicas {
        location = var.region
      }
    }
  }

  depends_on = [google_project_service.api]
}

# Each function reads exactly the secrets its settings name (local.function_secrets).
resource "google_secret_manager_secret_iam_member" "function" {
  for_each  = local.secret_grants
  secret_id = google_secret_manager_secret.secret[each.value.secret].id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.function[each.value.function].member
}
