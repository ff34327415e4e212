# Who may call which function: invocation is roles/run.invoker on the function's Cloud Run
# service. The private targets keep Cloud Run's invoker check, so a request without a token of one
# of these identities never reaches the code.
locals {
  private_invokers = merge(
    { "create/signup-site" = { function = "create", member = "serviceAccount:${local.signup_site_email}" } },
    { for key in local.scheduled : "${key}/scheduler" => { function = key, member = google_service_account.scheduler.member } },
    { for m in var.operators : "status/${m}" => { function = "status", member = m } },
    # the fan-out's tasks (fanout.tf) start more dispatch invocations with this identity's token
    { for a in google_service_account.fanout : "dispatch/fanout" => { function = "dispatch", member = a.member } },
    # the nudge's tasks (nudge.tf) start nudged dispatch invocations with this one's
    { for a in google_service_account.nudge : "dispatch/nudge" => { function = "dispatch", member = a.member } },
  )
  public_functions = [for key, spec in local.function_specs : key if spec.public]
}

resource "google_cloud_run_v2_service_iam_member" "invoker" {
  for_each = local.private_invokers
  location = var.region
  name     = google_cloud_run_v2_service.function[each.value.function].name
  role     = "roles/run.invoker"
  member   = each.value.member
}

# Only with public_access = "allUsers" (organisations without Domain Restricted Sharing that
# enforce run.managed.requireInvokerIam): the default turns the public services' invoker check
# off instead (services.tf) and binds nothing here.
resource "google_cloud_run_v2_service_iam_member" "public" {
  for_each = toset(var.public_access == "allUsers" ? local.public_functions : [])
  #checkov:skip=CKV_GCP_102:confirm is the page the emailed link opens and reports receives SendGrid's and Twilio's webhooks: their callers have no Google identity. The link's token (single use, 10 min, HMAC-checked) and the providers' signatures are their guards.
  location = var.region
  name     = google_cloud_run_v2_service.function[each.value].name
  role     = "roles/run.invoker"
  member   = "allUsers"
}
