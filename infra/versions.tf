terraform {
  # 1.11: write-only arguments exist, so nothing here ever needs a secret in state.
  required_version = ">= 1.11"

  required_providers {
    # 7.18: google_sql_user.database_roles (database.tf). Planned with 7.45.0 (docs/deploy.md).
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

  # Keep state in a bucket, not on a laptop (created once by hand, see docs/deploy.md):
  # terraform init -backend-config="bucket=PROJECT-tfstate" -backend-config="prefix=signup-verification"
  backend "gcs" {}
}

provider "google" {
  project = var.project_id
  region  = var.region
}
