terraform {
  # 1.11: write-only arguments exist, so nothing here ever needs a secret in state.
  required_version = ">= 1.11"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.14, < 8.0"
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
