# Cloud SQL for PostgreSQL 16. Reached only through the Cloud SQL connectors (mTLS with ephemeral
# certificates) with IAM database authentication: no password exists for any application user.
locals {
  instance_name = "${var.name}-pg" # named before it exists: the IAM conditions (service_accounts.tf) name it
  # Known before anything exists (a postcondition below holds the instance to it), so the plan shows
  # the exact settings of every job and service: tools/rehearse_deploy.py runs them as planned.
  instance_connection_name = "${var.project_id}:${var.region}:${local.instance_name}"
}

resource "google_sql_database_instance" "main" {
  #checkov:skip=CKV_GCP_79:PostgreSQL 16 is the version the service is built and tested against (the embedded test server is 16); a major upgrade is a deliberate, tested change.
  #checkov:skip=CKV_GCP_60:With the default db_connectivity = "public_ip" the public IP has no authorized networks and connector_enforcement=REQUIRED: only the Cloud SQL connectors (mTLS + IAM) can reach it. db_connectivity = "private_ip" turns it off (network.tf); checkov reads the default.
  #checkov:skip=CKV2_GCP_13:log_duration is off on purpose: one log line per statement at our query rate costs more than it tells; Query Insights records latency instead.
  name                = local.instance_name
  database_version    = "POSTGRES_16"
  region              = var.region
  deletion_protection = true

  settings {
    tier                        = local.db.tier
    edition                     = local.db.edition
    availability_type           = local.db.availability_type
    disk_type                   = "PD_SSD"
    disk_autoresize             = true
    deletion_protection_enabled = true
    connector_enforcement       = "REQUIRED"
    user_labels                 = { service = "signup-verification", deployment = var.name }

    ip_configuration {
      # public_ip: an address only the connectors can use; private_ip: an address in this
      # deployment's VPC only, through private services access (network.tf).
      ipv4_enabled    = !local.private_ip
      private_network = local.private_ip ? google_compute_network.private[0].id : null
      # Connectors present a client certificate; nothing else is accepted, and never in clear.
      ssl_mode = "TRUSTED_CLIENT_CERTIFICATE_REQUIRED"
    }

    backup_configuration {
      enabled                        = true
      point_in_time_recovery_enabled = true
      start_time                     = "02:00"
      transaction_log_retention_days = 7
      backup_retention_settings {
        retained_backups = 14
      }
    }

    maintenance_window {
      day          = 7
      hour         = 3
      update_track = "stable"
    }

    insights_config {
      query_insights_enabled  = true
      record_application_tags = true
      record_client_address   = false
    }

    database_flags {
      name  = "cloudsql.iam_authentication"
      value = "on"
    }
    database_flags {
      name  = "max_connections"
      value = tostring(local.db.max_connections)
    }
    # Audit-friendly logging (CIS 6.2.x); statements themselves are not logged: they carry no
    # secrets, but destinations are personal data.
    database_flags {
      name  = "log_checkpoints"
      value = "on"
    }
    database_flags {
      name  = "log_connections"
      value = "on"
    }
    database_flags {
      name  = "log_disconnections"
      value = "on"
    }
    database_flags {
      name  = "log_lock_waits"
      value = "on"
    }
    database_flags {
      name  = "log_min_messages"
      value = "error"
    }
    database_flags {
      name  = "log_min_error_statement"
      value = "error"
    }
    database_flags {
      name  = "log_temp_files"
      value = "0"
    }
    database_flags {
      name  = "log_min_duration_statement"
      value = "-1"
    }
    database_flags {
      name  = "log_statement"
      value = "ddl"
    }
    database_flags {
      name  = "log_hostname"
      value = "on"
    }
    # pgAudit (a migration creates the extension where the library is loaded): one AUDIT record per schema change
    # (ddl) and per role or privilege change (role: GRANT, REVOKE, CREATE/ALTER ROLE), the two
    # classes an auditor asks about. Not read or write: those would log every statement, and the
    # statements name destinations (personal data). pgaudit.log_parameter stays off (its default).
    database_flags {
      name  = "cloudsql.enable_pgaudit"
      value = "on"
    }
    database_flags {
      name  = "pgaudit.log"
      value = "ddl,role"
    }
  }

  lifecycle {
    postcondition {
      condition     = self.connection_name == local.instance_connection_name
      error_message = "The instance's connection name is not PROJECT:REGION:INSTANCE, which the jobs' and services' INSTANCE_CONNECTION_NAME assume."
    }
    precondition {
      condition     = local.peak_connections + local.db.reserved_connections <= local.db.max_connections
      error_message = "Connection budget exceeded: sum(max_instances x concurrency) + db_reserved_connections > db_max_connections. Lower max_instances or raise db_max_connections (and the tier)."
    }
  }

  # private_ip: the peering must exist before the instance can take an address in it.
  depends_on = [time_sleep.apis, google_service_networking_connection.sql]
}

resource "google_sql_database" "main" {
  name     = "verification"
  instance = google_sql_database_instance.main.name
}

# IAM database users. A service account's user name is its email without ".gserviceaccount.com",
# written out from its account_id so that it is known at plan time (and the plan shows DB_USER).
resource "google_sql_user" "function" {
  for_each = local.function_specs
  name     = "${google_service_account.function[each.key].account_id}@${var.project_id}.iam"
  instance = google_sql_database_instance.main.name
  type     = "CLOUD_IAM_SERVICE_ACCOUNT"
  # Table privileges come from the grant job (migrations.tf) once the migrations created the tables.
}

# The migration job's identity (migrations.tf): a member of cloudsqlsuperuser, which owns the
# database and its public schema. Migrations create the tables as this user (their owner, always
# the same one); the grant job takes cloudsqlsuperuser's role attributes with SET ROLE, since
# PostgreSQL never passes CREATEROLE through membership (platform/grants.py).
resource "google_sql_user" "migrator" {
  name           = "${google_service_account.migrator.account_id}@${var.project_id}.iam"
  instance       = google_sql_database_instance.main.name
  type           = "CLOUD_IAM_SERVICE_ACCOUNT"
  database_roles = ["cloudsqlsuperuser"]
}

# People (and other principals) who run verifyctl against the instance (variables_access.tf): one
# IAM database user each, privileges from the grant job. A group's members log in as themselves
# (Cloud SQL IAM group authentication) and hold what the group's role holds.
resource "google_sql_user" "operator" {
  for_each = local.database_people
  name     = each.value.user
  instance = google_sql_database_instance.main.name
  type     = each.value.type
}
