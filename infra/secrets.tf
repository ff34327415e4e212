# Secret containers only. deploy.sh adds the values as versions (taken up front: a prompt, an
# environment variable or a file; TOKEN_KEYS generated), piped to gcloud on stdin, so no secret
# value is ever in a .tf file, a plan, the Terraform state, a command line or a log.
resource "google_secret_manager_secret" "secret" {
  for_each  = local.enabled_secrets
  secret_id = local.secret_ids[each.key]
  labels    = merge(local.labels, { setting = lower(local.secret_env[each.key]) })

  replication {
    user_managed {
      replicas {
        location = var.region
      }
    }
  }

  depends_on = [time_sleep.apis]
}

# Each function reads exactly the secrets its settings name (local.function_secrets).
resource "google_secret_manager_secret_iam_member" "function" {
  for_each  = local.secret_grants
  secret_id = google_secret_manager_secret.secret[each.value.secret].id
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.function[each.value.function].member
}
