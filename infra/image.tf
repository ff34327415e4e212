# The functions' image: the bundle (source.tf) built by Cloud Build, as the build account, with
# Google Cloud's buildpacks (var.builder), the same way Cloud Run functions builds a source deploy.
# deploy.sh runs that build (infra/deploy/cloudbuild.yaml) once per bundle, before any service or
# job uses the image; Terraform only names it. The tag is the bundle's SHA-256, so an unchanged
# bundle is the same image (and no new revision), and a new one is a new tag.
locals {
  bundle_sha = filesha256(var.source_archive)
  image      = "${var.region}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.functions.repository_id}/functions:${local.bundle_sha}"
}

resource "google_artifact_registry_repository" "functions" {
  #checkov:skip=CKV_GCP_84:The images hold the open-source bundle and public dependencies, no data and no secret (those are in Secret Manager and Cloud SQL): a customer-managed key would add a KMS key, its rotation and its IAM for nothing to protect.
  repository_id = "${var.name}-functions"
  location      = var.region
  format        = "DOCKER"
  description   = "Images of the signup verification functions, tagged by bundle SHA-256"
  labels        = local.labels

  # A tag names one bundle for good: nothing can push another image under it.
  docker_config {
    immutable_tags = true
  }

  # The live image is always among the newest: keep five, delete older ones after 30 days.
  cleanup_policy_dry_run = false
  cleanup_policies {
    id     = "keep-recent"
    action = "KEEP"
    most_recent_versions {
      keep_count = 5
    }
  }
  cleanup_policies {
    id     = "delete-old"
    action = "DELETE"
    condition {
      older_than = "2592000s"
    }
  }

  depends_on = [time_sleep.apis]
}

# The build account reads the bundle from its bucket only (source.tf) and pushes to this
# repository only: no project-wide storage or registry role, so it cannot reach Terraform state.
resource "google_artifact_registry_repository_iam_member" "build_push" {
  location   = google_artifact_registry_repository.functions.location
  repository = google_artifact_registry_repository.functions.name
  role       = "roles/artifactregistry.writer"
  member     = google_service_account.build.member
}
