"""The list prices tools/plan_cost.py prices a Terraform plan with: one table, each price with its
source and the date it was read. USD, a tier-1 region (the Americas and europe-west1 price these
alike), on demand: no committed-use or volume discounts, taxes out. The free allotments are listed
apart: most are per billing account (shared with anything else on it), so the idle cost is given
without them and beside it what they would take off.

The figures were read from stored copies of the providers' pages (this machine reaches no live web):
where a copy was a third party's quotation of Google's Billing Catalog SKU, the SKU is named. Check
the live pages before budgeting; docs/deploy.md, "What a deployment costs", shows this table.

Standard library only: deploy.sh runs the tool with `python3 -I -S`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    key: str
    usd: float
    unit: str
    what: str
    source: str
    read: str  # when the copy was read or dated


CLOUD_SQL = "https://cloud.google.com/sql/pricing"
CLOUD_RUN = "https://cloud.google.com/run/pricing"
OBSERVABILITY = "https://cloud.google.com/stackdriver/pricing"
ALERTING = "https://cloud.google.com/monitoring/alerts/cost-control"

PRICES = (
    Price("sql_micro_hour", 0.0105, "hour", "Cloud SQL for PostgreSQL, zonal, db-f1-micro (shared core); regional x2",
          CLOUD_SQL, "2026-08-15 (SKU \"Zonal - Micro instance\", via a Billing Catalog listing)"),
    Price("sql_small_hour", 0.0350, "hour", "Cloud SQL for PostgreSQL, zonal, db-g1-small (shared core); regional x2",
          CLOUD_SQL, "2026-08-15 (SKU \"Zonal - Small instance\")"),
    Price("sql_vcpu_hour", 0.0413, "vCPU-hour", "Cloud SQL Enterprise, zonal vCPU (dedicated core); regional x2",
          CLOUD_SQL, "2026-05 (confirmed by two copies of the page)"),
    Price("sql_memory_hour", 0.0070, "GB-hour", "Cloud SQL Enterprise, zonal memory; regional x2",
          CLOUD_SQL, "2026-05"),
    Price("sql_ssd_month", 0.17, "GB-month", "Cloud SQL SSD storage, zonal; regional x2", CLOUD_SQL, "2026-08-15"),
    Price("sql_hdd_month", 0.09, "GB-month", "Cloud SQL HDD storage, zonal; regional x2", CLOUD_SQL, "2026-08-15"),
    Price("sql_backup_month", 0.08, "GB-month", "Cloud SQL backups (and transaction logs kept for recovery)",
          CLOUD_SQL, "2026-08-15"),
    Price("run_cpu_second", 0.000024, "vCPU-second", "Cloud Run, request-based billing, CPU while a request runs",
          CLOUD_RUN, "2026-08-29"),
    Price("run_memory_second", 0.0000025, "GiB-second", "Cloud Run, request-based billing, memory while a request runs",
          CLOUD_RUN, "2026-08-29"),
    Price("run_requests_million", 0.40, "1M requests", "Cloud Run requests", CLOUD_RUN, "2026-08-29"),
    Price("run_idle_cpu_second", 0.0000025, "vCPU-second", "Cloud Run minimum instances, idle CPU",
          CLOUD_RUN, "2026-08-15 (SKU \"Services Min Instance CPU\")"),
    Price("run_idle_memory_second", 0.0000025, "GiB-second", "Cloud Run minimum instances, idle memory",
          CLOUD_RUN, "2026-08-15"),
    Price("tasks_million", 0.40, "1M operations", "Cloud Tasks billable operations (API calls, deliveries)",
          "https://cloud.google.com/tasks/pricing", "2026-10-07"),
    Price("scheduler_job_month", 0.10, "job-month", "Cloud Scheduler job",
          "https://cloud.google.com/scheduler/pricing", "2026-10"),
    Price("secret_version_month", 0.06, "version-month", "Secret Manager active secret version (per replica location)",
          "https://cloud.google.com/secret-manager/pricing", "2026-08-29"),
    Price("secret_access_10k", 0.03, "10,000 accesses", "Secret Manager access operations",
          "https://cloud.google.com/secret-manager/pricing", "2026-08-29"),
    Price("logging_gib", 0.50, "GiB", "Cloud Logging storage (ingestion; 30 days kept)", OBSERVABILITY, "2026-08-29"),
    Price("metrics_mib", 0.2580, "MiB", "Cloud Monitoring chargeable metrics ingested (user-defined log-based "
          "metrics): a point is 8 bytes, a distribution's 80", OBSERVABILITY, "2026-08-29"),
    Price("alert_condition_month", 1.50, "condition-month", "Cloud Monitoring alerting, each condition of a policy "
          "(the live page names no figure now: check it)", ALERTING, "2025 (\"starting no sooner than April 2025\")"),
    Price("alert_series_million", 0.35, "1M time series", "Cloud Monitoring alerting, time series a condition's "
          "query returns", ALERTING, "2025"),
    Price("registry_gb_month", 0.10, "GB-month", "Artifact Registry storage (the functions' image)",
          "https://cloud.google.com/artifact-registry/pricing", "2026-08-29"),
    Price("storage_gb_month", 0.020, "GB-month", "Cloud Storage standard, regional (the source bundles)",
          "https://cloud.google.com/storage/pricing", "2026-08-15"),
    Price("sendgrid_email", 0.0009, "email", "SendGrid Pro 100K plan ($89.95 a month) at full use",
          "https://sendgrid.com/pricing", "2026-03"),
    Price("twilio_sms_us", 0.0083, "segment", "Twilio SMS to the US, outbound, per segment",
          "https://www.twilio.com/en-us/sms/pricing/us", "2026-07"),
    Price("twilio_carrier_us", 0.0035, "segment", "US carrier pass-through fee (AT&T's long-code figure; "
          "$0.0025-0.0062 by carrier)", "https://www.twilio.com/en-us/sms/pricing/us", "2026-07"),
)  # fmt: skip
PRICE = {p.key: p.usd for p in PRICES}

# Free allotments, per month, and whom they are per.
FREE = {
    "run_cpu_second": (180_000, "billing account"),
    "run_memory_second": (360_000, "billing account"),
    "run_requests_million": (2, "billing account"),
    "tasks_million": (1, "billing account"),
    "scheduler_job_month": (3, "billing account"),
    "secret_version_month": (6, "billing account"),
    "secret_access_10k": (1, "billing account"),
    "logging_gib": (50, "project"),
    "metrics_mib": (150, "billing account"),
    "registry_gb_month": (0.5, "billing account"),
}

HOURS = 730  # a month, as Google's calculators count it
MINUTES = HOURS * 60


def table() -> str:
    """The price table as docs/deploy.md shows it (a test keeps them equal)."""
    lines = ["| item | price (USD) | per | source | read |", "|---|---|---|---|---|"]
    for p in PRICES:
        free = FREE.get(p.key)
        note = f" (free: {free[0]:g} per {free[1]})" if free else ""
        lines.append(f"| {p.what}{note} | {p.usd:g} | {p.unit} | {p.source} | {p.read} |")
    return "\n".join(lines)
