# Migrations and database grants run inside Google Cloud, as Cloud Run jobs of the functions' own
# image, as the migrator identity: the Cloud SQL connector reaches the instance from Google's
# network, so nothing depends on the operator's egress (port 3307) or local credentials, and every
# table has the same owner over time. deploy.sh executes both jobs (`gcloud run jobs execute
# --wait`) after the image exists and before any new code deploys; each run is idempotent
# (migrations skip what is applied, grants converge).
locals {
  verifyctl = ["python3", "-m", "signup_verification.cli"]
  schema_jobs = {
    migrate = ["migrate"]
    grant = concat(
      ["grant"],
      [for key, spec in local.function_specs : "--${spec.db_role}=${google_sql_user.function[key].name}"],
      [for member, person in local.database_people : "--${person.role}=${google_sql_user.operator[member].name}"],
    )
  }
}

resource "google_cloud_run_v2_job" "schema" {
  for_each            = local.schema_jobs
  name                = "${var.name}-${each.key}"
  location            = var.region
  labels              = local.labels
  deletion_protection = false # holds no data: the next deploy recreates it

  template {
    task_count = 1
    template {
      service_account = google_service_account.migrator.email
      timeout         = "600s"
      # A connection refused while the migrator's new grants propagate is retried; both commands
      # are safe to repeat (one transaction under an advisory lock; idempotent grants).
      max_retries = 3

      # db_connectivity = "private_ip": the jobs reach the private IP the way the services do.
      dynamic "vpc_access" {
        for_each = local.vpc_egress
        content {
          egress = "PRIVATE_RANGES_ONLY"
          network_interfaces {
            network    = vpc_access.value.network
            subnetwork = vpc_access.value.subnetwork
          }
        }
      }

      containers {
        image = local.image
        # The buildpacks launcher sets up the image's Python and installed packages, then runs verifyctl.
        command = ["/cnb/lifecycle/launcher"]
        args    = concat(local.verifyctl, each.value)
        resources {
          limits = { cpu = "1", memory = "512Mi" }
        }
        env {
          name  = "ENVIRONMENT"
          value = "production"
        }
        env {
          name  = "INSTANCE_CONNECTION_NAME"
          value = local.instance_connection_name
        }
        env {
          name  = "DB_NAME"
          value = google_sql_database.main.name
        }
        env {
          name  = "DB_USER"
          value = google_sql_user.migrator.name
        }
        env {
          name  = "DEPLOYMENT"
          value = var.name
        }
        dynamic "env" {
          for_each = local.private_ip ? { DB_IP_TYPE = "private" } : {}
          content {
            name  = env.key
            value = env.value
          }
        }
      }
    }
  }

  depends_on = [time_sleep.iam_grants, google_sql_user.migrator]
}
