# deploy.sh enables serviceusage and cloudresourcemanager itself, before Terraform needs them.
locals {
  apis = toset(concat(
    [
      "artifactregistry.googleapis.com",
      "cloudbuild.googleapis.com",
      "cloudscheduler.googleapis.com",
      "cloudtasks.googleapis.com",
      "iam.googleapis.com",
      "logging.googleapis.com",
      "monitoring.googleapis.com",
      "run.googleapis.com",
      "secretmanager.googleapis.com",
      "sqladmin.googleapis.com",
      "storage.googleapis.com",
    ],
    # db_connectivity = "private_ip": the VPC, its subnet and the peering with Cloud SQL (network.tf).
    local.private_ip ? ["compute.googleapis.com", "servicenetworking.googleapis.com"] : [],
  ))

  # The Google-managed service agents this deployment relies on, which deploy.sh creates explicitly
  # (`gcloud beta services identity create`) once their APIs are on and before anything uses them:
  # Cloud Run's pulls the image, Cloud Build's runs the build, Cloud Scheduler's and Cloud Tasks'
  # mint the OIDC tokens of the ticks and the fan-out, Service Networking's makes the peering.
  # (google_project_service_identity, the resource for this, is in the google-beta provider only.)
  service_agents = concat(
    ["run.googleapis.com", "cloudbuild.googleapis.com", "cloudscheduler.googleapis.com", "cloudtasks.googleapis.com"],
    local.private_ip ? ["servicenetworking.googleapis.com"] : [],
  )
}

resource "google_project_service" "api" {
  for_each = local.apis
  service  = each.value
  # Other workloads in the project may use these APIs too.
  disable_on_destroy = false
}

output "service_agents" {
  description = "APIs whose service agents deploy.sh creates explicitly (gcloud beta services identity create) after the APIs are on and before phase 1."
  value       = local.service_agents
}
