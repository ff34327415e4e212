#!/usr/bin/env python3
"""What a Terraform plan of infra/ costs: the monthly cost while idle (no signup at all) and the cost
per 1,000 verifications, at the list prices of tools/plan_prices.py (one table, each price with its
source and date).

    python3 tools/plan_cost.py --plan-json PLAN.json        # `terraform show -json` of a plan (deploy.sh)
    python3 tools/plan_cost.py [--tier small] [--var-file F] # plan infra/ offline first (tf-offline)
    python3 tools/plan_cost.py --prices                     # the price table, as docs/deploy.md shows it
    ... --json                                              # the figures as JSON

Everything is read from the plan: the database's tier, availability and disk, each service's minimum
instances, CPU, memory and concurrency, the scheduler jobs and their schedules, whether dispatch
waits for work all minute, the secrets, every alerting condition and log-based metric. What a plan
cannot say is stated once below (IDLE, PER_VERIFICATION), each figure with where it comes from.
Idle is priced without the free allotments (most are per billing account, shared with anything
else on it); what they would take off is given beside. Messages (SendGrid, Twilio to the US) are
priced apart from Google Cloud's share.

Standard library only: deploy.sh runs it with `python3 -I -S`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan_prices import FREE, HOURS, MINUTES, PRICE, table  # noqa: E402
from plan_resources import Service, per_month, resources, services  # noqa: E402  (what the plan holds)


@dataclass(frozen=True)
class Idle:
    """What the plan cannot say about an idle month, each figure's ground named."""

    backup_gb: float = 1.0  # an idle database's retained backups and recovery logs (Cloud SQL bills what is kept)
    # request-based billing rounds each invocation up to 100 ms: an idle tick on an empty outbox takes
    # 4-17 ms locally (docs/benchmarks.md, "Requests per database connection and per vCPU", idle ticks)
    tick_seconds: float = 0.1
    # an invocation waiting for work all minute, handed over between two jobs: 1.03 instances always
    # billed (docs/benchmarks.md, "Keeping an invocation open")
    open_share: float = 1.03
    log_bytes_per_tick: int = 6_000  # Cloud Run's request log (~1 KB) and each tick's signal records
    channels: int = 3  # email, sms, webhook: one signal record each per tick
    emitting_services: int = 2  # dispatch and reconcile write the signal records
    evaluations_per_month: int = HOURS * 120  # an alerting condition is evaluated every 30 s
    image_gb: float = 0.35  # the functions' image in Artifact Registry
    bundle_gb: float = 0.01  # the source bundles in Cloud Storage
    starts_per_month: int = 30  # instance starts per ticked service (each reads its secrets)


@dataclass(frozen=True)
class PerVerification:
    """One verification: create, its message, confirm, the provider's reports; 80 % email, 20 % SMS."""

    sms_share: float = 0.2
    # requests per verification, by service: create's POST; confirm: the link's page and its POST
    # (email), the code's POST (SMS); reports: two events or status callbacks per message
    requests: tuple[tuple[str, float], ...] = (("create", 1.0), ("confirm", 0.8 * 2 + 0.2 * 1), ("reports", 2.0))
    # one vCPU's CPU per request at 8 per instance (docs/benchmarks.md, capacity-bench: create ~1.1 ms,
    # confirm ~0.8 ms; reports taken as confirm), billed at 60 % utilisation; one per instance bills
    # each request at least 100 ms
    cpu_seconds: tuple[tuple[str, float], ...] = (("create", 0.0011), ("confirm", 0.0008), ("reports", 0.0008))
    utilisation: float = 0.6
    send_cpu_seconds: float = 0.0033  # one send (render, post): ~300 sends/s per vCPU (docs/capacity.md)
    nudged_seconds: float = 0.5  # a nudged invocation at a low rate: its probe, its claim, one send (200-500 ms)
    nudge_operations: int = 2  # Cloud Tasks: the create of the named task and its delivery
    log_bytes: int = 8_000  # request logs of ~5 requests and the app's records
    stored_bytes: int = 7_000  # rows and indexes (~3 KB) and WAL kept for recovery (~4 KB, docs/capacity.md)


IDLE, PER_VERIFICATION = Idle(), PerVerification()


@dataclass
class Line:
    item: str
    quantity: str
    usd: float | None  # None: no list price in the table (said, never guessed)
    free_usd: float = 0.0  # what the free allotment would take off


@dataclass
class Costs:
    tier: str
    idle: list[Line]
    per_thousand: list[Line]
    messages_per_thousand: float

    @property
    def idle_usd(self) -> float:
        return round(sum(line.usd or 0.0 for line in self.idle), 2)

    @property
    def idle_free_usd(self) -> float:
        return round(sum(line.free_usd for line in self.idle), 2)

    @property
    def per_thousand_usd(self) -> float:
        return round(sum(line.usd or 0.0 for line in self.per_thousand), 4)

    @property
    def unpriced(self) -> list[str]:
        return [line.item for line in self.idle + self.per_thousand if line.usd is None]


# -- idle ----------------------------------------------------------------------------------------------
def database(found: dict[str, list[dict[str, Any]]]) -> list[Line]:
    [instance] = found["google_sql_database_instance"]
    settings = instance["values"]["settings"][0]
    tier, edition = settings["tier"], settings.get("edition") or "ENTERPRISE"
    double = 2 if settings.get("availability_type") == "REGIONAL" else 1
    label = f"Cloud SQL {tier} {settings.get('availability_type')}"
    custom = re.match(r"^db-custom-(\d+)-(\d+)$", tier)
    if edition != "ENTERPRISE":
        hourly = None
    elif tier == "db-f1-micro":
        hourly = PRICE["sql_micro_hour"]
    elif tier == "db-g1-small":
        hourly = PRICE["sql_small_hour"]
    elif custom:
        hourly = int(custom.group(1)) * PRICE["sql_vcpu_hour"] + int(custom.group(2)) / 1024 * PRICE["sql_memory_hour"]
    else:
        hourly = None
    disk = float(settings.get("disk_size") or 10)  # Cloud SQL's smallest disk, what a plan leaves unset
    storage = PRICE["sql_ssd_month" if settings.get("disk_type", "PD_SSD") == "PD_SSD" else "sql_hdd_month"]
    return [
        Line(label, f"{HOURS} h x{double}", None if hourly is None else HOURS * hourly * double),
        Line(f"Cloud SQL {settings.get('disk_type', 'PD_SSD')} {disk:g} GB", f"x{double}", disk * storage * double),
        Line("Cloud SQL backups and recovery logs", f"{IDLE.backup_gb:g} GB", IDLE.backup_gb * PRICE["sql_backup_month"]),
    ]  # fmt: skip


def run_seconds_usd(service: Service, seconds: float) -> float:
    return seconds * (service.cpu * PRICE["run_cpu_second"] + service.memory_gib * PRICE["run_memory_second"])


def cloud_run(found: dict[str, list[dict[str, Any]]], by_key: dict[str, Service]) -> list[Line]:
    lines = []
    for service in by_key.values():
        if service.min_instances:
            warm = service.min_instances * HOURS * 3600
            idle = warm * (service.cpu * PRICE["run_idle_cpu_second"] + service.memory_gib * PRICE["run_idle_memory_second"])  # fmt: skip
            lines.append(
                Line(f"Cloud Run {service.key}: {service.min_instances} warm instance(s)", "idle all month", idle)
            )
    jobs: dict[str, float] = {}
    for job in found.get("google_cloud_scheduler_job", []):
        function = "dispatch" if str(job["index"]).startswith("dispatch") else str(job["index"])
        jobs[function] = jobs.get(function, 0.0) + per_month(job["values"]["schedule"])
    free_cpu = 0.0
    for function, ticks in sorted(jobs.items()):
        service = by_key[function]
        if service.env.get("DISPATCH_IDLE_WAIT") == "true":
            seconds, how = HOURS * 3600 * IDLE.open_share, "an invocation kept open all minute"
        else:
            seconds, how = ticks * IDLE.tick_seconds, f"{ticks:,.0f} scheduled ticks"
        usd = run_seconds_usd(service, seconds) + ticks / 1e6 * PRICE["run_requests_million"]
        free_cpu += seconds * service.cpu
        lines.append(Line(f"Cloud Run {function}: {how}", f"{seconds:,.0f} s", usd))
    if lines:
        allowance = min(free_cpu, FREE["run_cpu_second"][0]) * PRICE["run_cpu_second"]
        lines[-1].free_usd = round(allowance, 2)
    return lines


def monitoring(found: dict[str, list[dict[str, Any]]]) -> list[Line]:
    conditions, series = 0, 0.0
    for policy in found.get("google_monitoring_alert_policy", []):
        for condition in policy["values"]["conditions"]:
            conditions += 1
            kind = next(
                (condition[k][0] for k in ("condition_threshold", "condition_absent") if condition.get(k)), None
            )
            if kind is not None:
                series += returned_series(kind)
    ingested = 0.0
    for metric in found.get("google_logging_metric", []):
        descriptor = metric["values"]["metric_descriptor"][0]
        name = metric["values"]["name"]
        if descriptor["value_type"] != "DISTRIBUTION" and not name.endswith("/signal_records"):
            continue  # a condition's count: points only while the condition holds
        labels = {label["key"] for label in descriptor.get("labels") or []}
        per_series = 80 if descriptor["value_type"] == "DISTRIBUTION" else 8
        count = (IDLE.channels if "channel" in labels else 1) * IDLE.emitting_services
        ingested += count * MINUTES * per_series / 2**20
    returned = series * IDLE.evaluations_per_month / 1e6
    return [
        Line("Cloud Monitoring alerting conditions", f"{conditions}", conditions * PRICE["alert_condition_month"]),
        Line("Cloud Monitoring time series the conditions return", f"{returned:.1f} M", returned * PRICE["alert_series_million"]),
        Line("Cloud Monitoring log-based metric points (idle)", f"{ingested:.1f} MiB", ingested * PRICE["metrics_mib"],
             free_usd=min(ingested, FREE["metrics_mib"][0]) * PRICE["metrics_mib"]),
    ]  # fmt: skip


def returned_series(condition: dict[str, Any]) -> float:
    """Time series one evaluation returns: by the condition's group-by (a channel 3, a service the
    services its filter names)."""
    group = (condition.get("aggregations") or [{}])[0].get("group_by_fields") or []
    count = 1.0
    for field in group:
        if field.endswith(".channel"):
            count *= IDLE.channels
        elif field.endswith("service_name"):
            count *= max(1, len(re.findall(r'\\?"[a-z0-9-]+-(?:create|confirm|dispatch|reconcile|status|reports)\\?"', condition.get("filter", ""))))  # fmt: skip
    return count


def the_rest(found: dict[str, list[dict[str, Any]]], by_key: dict[str, Service], ticks: float) -> list[Line]:
    jobs = len(found.get("google_cloud_scheduler_job", []))
    secrets = len(found.get("google_secret_manager_secret", []))
    accesses = sum(s.secrets for s in by_key.values()) * IDLE.starts_per_month
    log_gib = ticks * IDLE.log_bytes_per_tick / 2**30
    return [
        Line("Cloud Scheduler jobs", f"{jobs}", jobs * PRICE["scheduler_job_month"],
             free_usd=min(jobs, FREE["scheduler_job_month"][0]) * PRICE["scheduler_job_month"]),
        Line("Secret Manager versions and accesses", f"{secrets} + {accesses:,.0f}",
             secrets * PRICE["secret_version_month"] + accesses / 1e4 * PRICE["secret_access_10k"],
             free_usd=min(secrets, FREE["secret_version_month"][0]) * PRICE["secret_version_month"]),
        Line("Cloud Logging (idle ticks' records)", f"{log_gib:.2f} GiB", log_gib * PRICE["logging_gib"],
             free_usd=log_gib * PRICE["logging_gib"]),
        Line("Cloud Tasks queues", f"{len(found.get('google_cloud_tasks_queue', []))}", 0.0),
        Line("Artifact Registry image", f"{IDLE.image_gb:g} GB", IDLE.image_gb * PRICE["registry_gb_month"],
             free_usd=min(IDLE.image_gb, FREE["registry_gb_month"][0]) * PRICE["registry_gb_month"]),
        Line("Cloud Storage bundles", f"{IDLE.bundle_gb:g} GB", IDLE.bundle_gb * PRICE["storage_gb_month"]),
    ]  # fmt: skip


# -- per 1,000 verifications --------------------------------------------------------------------------
def per_thousand(by_key: dict[str, Service]) -> tuple[list[Line], float]:
    v = PER_VERIFICATION
    lines = []
    cpu = dict(v.cpu_seconds)
    for key, requests in v.requests:
        service = by_key[key]
        floor = 0.1 / service.concurrency  # each request alone: billed at least 100 ms
        seconds = max(cpu[key] / v.utilisation, floor) if service.concurrency > 1 else 0.1
        usd = 1000 * requests * (run_seconds_usd(service, seconds) + PRICE["run_requests_million"] / 1e6)
        lines.append(Line(f"Cloud Run {key}", f"{1000 * requests:,.0f} requests x {seconds * 1000:.1f} ms", usd))
    dispatch = by_key["dispatch"]
    if dispatch.env.get("DISPATCH_NUDGE_SERVICE_ACCOUNT"):
        seconds, tasks = v.nudged_seconds, 1000 * v.nudge_operations
        lines.append(Line("Cloud Tasks nudges", f"{tasks:,.0f} operations", tasks / 1e6 * PRICE["tasks_million"]))
    else:
        seconds = v.send_cpu_seconds / v.utilisation
    lines.append(Line("Cloud Run dispatch", f"1,000 messages x {seconds * 1000:.1f} ms", 1000 * run_seconds_usd(dispatch, seconds)))  # fmt: skip
    gib_logged = 1000 * v.log_bytes / 2**30
    lines.append(Line("Cloud Logging", f"{gib_logged * 1024:.1f} MiB", gib_logged * PRICE["logging_gib"]))
    stored = 1000 * v.stored_bytes / 1e9
    lines.append(Line("Cloud SQL storage and recovery logs", f"{stored * 1000:.0f} MB",
                      stored * (PRICE["sql_ssd_month"] + PRICE["sql_backup_month"])))  # fmt: skip
    sms = v.sms_share
    messages = 1000 * (
        (1 - sms) * PRICE["sendgrid_email"] + sms * (PRICE["twilio_sms_us"] + PRICE["twilio_carrier_us"])
    )
    return lines, messages


def costs(shown: dict[str, Any]) -> Costs:
    found = resources(shown)
    if not found.get("google_sql_database_instance") or not found.get("google_cloud_run_v2_service"):
        raise ValueError("the plan holds no Cloud SQL instance or Cloud Run service: is it a plan of infra/?")
    by_key = services(found)
    tier = ((shown.get("planned_values", {}).get("outputs", {}).get("tier") or {}).get("value") or {}).get("name", "?")
    ticks = sum(per_month(job["values"]["schedule"]) for job in found.get("google_cloud_scheduler_job", []))
    idle = database(found) + cloud_run(found, by_key) + monitoring(found) + the_rest(found, by_key, ticks)
    lines, messages = per_thousand(by_key)
    return Costs(tier, idle, lines, messages)


# -- output ---------------------------------------------------------------------------------------------
def render(c: Costs) -> str:
    out = [f"plan_cost: tier {c.tier}, list prices (tools/plan_prices.py; docs/deploy.md, \"What a deployment costs\")",
           "idle, per month:"]  # fmt: skip
    for line in c.idle:
        out.append(f"  {line.item:<62} {line.quantity:>26} {money(line.usd):>10}")
    out.append(f"  {'total, list prices':<62} {'':>26} {money(c.idle_usd):>10}")
    out.append(f"  {'  the free allotments would take off (if nothing else uses them)':<62} {'':>26} {money(-c.idle_free_usd):>10}")  # fmt: skip
    out.append("per 1,000 verifications (80 % email, 20 % SMS: create, its message, confirm, the reports):")
    for line in c.per_thousand:
        out.append(f"  {line.item:<62} {line.quantity:>26} {money(line.usd, 4):>10}")
    out.append(f"  {'Google Cloud':<62} {'':>26} {money(c.per_thousand_usd, 4):>10}")
    out.append(f"  {'messages: SendGrid, Twilio to the US (apart)':<62} {'':>26} {money(c.messages_per_thousand):>10}")
    if c.unpriced:
        out.append(f"  not priced (no list price in the table): {', '.join(c.unpriced)}")
    return "\n".join(out)


def money(usd: float | None, places: int = 2) -> str:
    return "unpriced" if usd is None else f"{'-' if usd < 0 else ''}${abs(usd):,.{places}f}"


def as_json(c: Costs) -> dict[str, Any]:
    return {
        "tier": c.tier,
        "idle_usd_per_month": c.idle_usd,
        "idle_free_allotments_usd": c.idle_free_usd,
        "per_1000_verifications_usd": c.per_thousand_usd,
        "messages_per_1000_usd": round(c.messages_per_thousand, 2),
        "unpriced": c.unpriced,
        "idle": [asdict(line) for line in c.idle],
        "per_1000": [asdict(line) for line in c.per_thousand],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan-json", type=Path, help="`terraform show -json` of a plan")
    parser.add_argument("--tier", choices=("small", "standard", "large"), help="plan this tier (tf-offline)")
    parser.add_argument("--var-file", type=Path, help="plan with these variables (default: the example)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--prices", action="store_true", help="print the price table and stop")
    args = parser.parse_args(argv)
    if args.prices:
        print(table())
        return 0
    try:
        shown = json.loads(args.plan_json.read_text()) if args.plan_json else plan(args.tier, args.var_file)
        result = costs(shown)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        print(f"plan_cost: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(as_json(result), indent=1) if args.json else render(result))
    return 0


def plan(tier: str | None, var_file: Path | None) -> dict[str, Any]:
    import rehearsal_plan  # tf-offline through the rehearsal's planner (a checkout only)

    with tempfile.TemporaryDirectory(prefix="plan-cost-") as work:
        bundle = Path(work) / "function-source.zip"
        bundle.write_bytes(b"")  # the plan reads only its hash
        extra = [f"-var=tier={tier}"] if tier else []
        return rehearsal_plan.make_plan(bundle, Path(work), extra, var_file=var_file or rehearsal_plan.EXAMPLE)


if __name__ == "__main__":
    sys.exit(main())
