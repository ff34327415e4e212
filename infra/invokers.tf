# Who may call which function: a gen2 function is a Cloud Run service, so invocation is
# roles/run.invoker on that service.
locals {
  private_invokers = merge(
    { "create/signup-site" = { function = "create", member = "serviceAccount:${var.signup_site_service_account}" } },
    { for key in local.scheduled : "${key}/scheduler" => { function = key, member = google_service_account.scheduler.member } },
    { for m in var.operators : "status/${m}" => { function = "status", member = m } },
  )
}

resource "google_cloud_run_v2_service_iam_member" "invoker" {
  for_each = local.private_invokers
  location = var.region
  name     = google_cloudfunctions2_function.function[each.value.function].name
  role     = "roles/run.invoker"
  member   = each.value.member
}

# Under Domain Restricted Sharing this binding is refused: var.confirm_public_access selects the
# invoker-check-off alternative, which deploy.sh applies to the services listed in the output
# services_without_invoker_iam_check.
resource "google_cloud_run_v2_service_iam_member" "confirm_public" {
  count = var.confirm_public_access == "allUsers" ? 1 : 0
  #checkov:skip=CKV_GCP_102:confirm_verification is the page the emailed link opens: any browser must reach it without a Google identity. The token in the link is the credential (single use, 10 min, HMAC-checked); GET only renders a form, POST consumes.
  location = var.region
  name     = google_cloudfunctions2_function.function["confirm"].name
  role     = "roles/run.invoker"
  member   = "allUsers"
}

# The binding was a single resource before confirm_public_access: keep it, do not recreate it.
moved {
  from = google_cloud_run_v2_service_iam_member.confirm_public
  to   = google_cloud_run_v2_service_iam_member.confirm_public[0]
}
