# The bundle from tools/build_bundle.py, stored under its content hash: a new bundle is a new
# object (and a new build); the same bundle is the same object (and no change at all).
resource "google_storage_bucket" "source" {
  #checkov:skip=CKV_GCP_62:Access logs of a bucket that only Cloud Build reads add nothing: Cloud Audit Logs already record who changed an object.
  name                        = "${var.project_id}-${var.name}-function-source"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = false

  versioning {
    enabled = true
  }

  # Old bundles are only needed for a rollback in the days after a deploy.
  lifecycle_rule {
    condition {
      age                = 90
      num_newer_versions = 10
      with_state         = "ANY"
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_project_service.api]
}

resource "google_storage_bucket_object" "source" {
  name   = "function-source-${filesha256(var.source_archive)}.zip"
  bucket = google_storage_bucket.source.name
  source = var.source_archive
}

resource "google_storage_bucket_iam_member" "build_reads_source" {
  bucket = google_storage_bucket.source.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.build.member
}
