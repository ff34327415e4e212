# The bundle from tools/build_bundle.py, stored under its content hash: a new bundle is a new
# object (and a new image); the same bundle is the same object (and no change at all).
resource "google_storage_bucket" "source" {
  #checkov:skip=CKV_GCP_62:Access logs of a bucket that only Cloud Build reads add nothing: Cloud Audit Logs already record who changed an object.
  name                        = "${var.project_id}-${var.name}-function-source"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = false
  labels                      = local.labels

  versioning {
    enabled = true
  }

  # A new bundle is a new object name, so terraform deletes the previous object, which the
  # versioning keeps as a noncurrent version: roll back by restoring it. Noncurrent bundles go
  # 30 days after they were replaced; the live bundle (what the image was built from) never expires.
  # (A rule's conditions are ANDed: age + num_newer_versions never matched a hash-named object,
  # which never gets a newer version.)
  lifecycle_rule {
    condition {
      days_since_noncurrent_time = 30
      with_state                 = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [time_sleep.apis]
}

resource "google_storage_bucket_object" "source" {
  name   = "function-source-${local.bundle_sha}.zip"
  bucket = google_storage_bucket.source.name
  source = var.source_archive
}

# The build reads the bundle, and nothing else in Cloud Storage.
resource "google_storage_bucket_iam_member" "build_reads_source" {
  bucket = google_storage_bucket.source.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.build.member
}
