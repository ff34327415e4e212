# Operators' database access: who may run verifyctl against the instance, through the Cloud SQL
# connector with their own Google identity (docs/runbook.md, "verifyctl against the deployment").
# Each principal gets an IAM database user (database.tf), Cloud SQL's client and IAM login roles on
# this instance only (service_accounts.tf), and a database role from the grant job (migrations.tf).

variable "database_readers" {
  description = "Principals who may read the database with verifyctl (status, inspect, suppression list, migrate --list): \"user:EMAIL\", \"group:EMAIL\" (its members log in with their own email: Cloud SQL IAM group authentication) or \"serviceAccount:EMAIL\". Read only: role verification_reader."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for m in var.database_readers : can(regex("^(user|group|serviceAccount):[^@:\\s]+@[^@:\\s]+$", m))])
    error_message = "database_readers must be user:EMAIL, group:EMAIL or serviceAccount:EMAIL."
  }
}

variable "database_operators" {
  description = "Principals who may also act with verifyctl (channel resume, sms resume, suppression clear, webhooks replay, dispatch, reconcile): the functions' read-write privileges, role verification_operator. Same forms as database_readers; a principal in both is an operator."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for m in var.database_operators : can(regex("^(user|group|serviceAccount):[^@:\\s]+@[^@:\\s]+$", m))])
    error_message = "database_operators must be user:EMAIL, group:EMAIL or serviceAccount:EMAIL."
  }
}

locals {
  # IAM member -> its database user: the name Cloud SQL gives it (a service account's email without
  # ".gserviceaccount.com", a person's or a group's email), the user type, and its grant role.
  database_people = {
    for member in distinct(concat(var.database_readers, var.database_operators)) : member => {
      user = trimsuffix(split(":", member)[1], ".gserviceaccount.com")
      type = { user = "CLOUD_IAM_USER", group = "CLOUD_IAM_GROUP", serviceAccount = "CLOUD_IAM_SERVICE_ACCOUNT" }[split(":", member)[0]]
      role = contains(var.database_operators, member) ? "operator" : "reader"
    }
  }
}
