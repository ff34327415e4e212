terraform {
  # 1.11: write-only arguments exist, so nothing here ever needs a secret in state.
  required_version = ">= 1.11"

  required_providers {
    # 7.18: google_sql_user.database_roles (database.tf); google_cloud_run_v2_service has
    # invoker_iam_disabled and build_config from earlier 6.x releases. Planned with 7.45.0.
    google = {
      source  = "hashicorp/google"
      version = ">= 7.18, < 8.0"
    }
    # time_sleep: waits for IAM grants and new log-based metrics to settle (waits.tf).
    time = {
      source  = "hashicorp/time"
      version = ">= 0.9, < 1.0"
    }
  }

  # State lives in a bucket that deploy.sh creates if it is missing (TF_STATE_BUCKET, docs/deploy.md):
  # terraform init -backend-config="bucket=PROJECT-tfstate" -backend-config="prefix=signup-verification"
  backend "gcs" {}
}

provider "google" {
  project = var.project_id
  region  = var.region
}
