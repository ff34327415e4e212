"""What a Terraform plan of infra/ holds, as tools/plan_cost.py prices it: its resources by type (the
root module's and every child module's), each Cloud Run service's instances, CPU, memory,
concurrency, plain environment and secret count, and how often a scheduler job's cron schedule fires.

Standard library only, as plan_cost.py: deploy.sh runs that with `python3 -I -S`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from plan_prices import HOURS, MINUTES


def resources(shown: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}

    def walk(module: dict[str, Any]) -> None:
        for resource in module.get("resources", []):
            found.setdefault(resource["type"], []).append(resource)
        for child in module.get("child_modules", []):
            walk(child)

    walk(shown.get("planned_values", {}).get("root_module", {}))
    return found


def gib(memory: str) -> float:
    number = float(re.match(r"[\d.]+", memory).group(0))  # type: ignore[union-attr]
    return number / 1024 if memory.endswith("Mi") else number * (1000**3 / 1024**3 if memory.endswith("G") else 1)


def per_month(schedule: str) -> float:
    """Invocations a month of a cron schedule whose minute field is `*` or `*/N` (the others hourly)."""
    minute = schedule.split()[0]
    if minute == "*":
        return MINUTES
    if minute.startswith("*/"):
        return MINUTES / int(minute[2:])
    return HOURS


@dataclass(frozen=True)
class Service:
    key: str
    min_instances: int
    cpu: float
    memory_gib: float
    concurrency: int
    env: dict[str, str]
    secrets: int


def services(found: dict[str, list[dict[str, Any]]]) -> dict[str, Service]:
    out = {}
    for resource in found.get("google_cloud_run_v2_service", []):
        template = resource["values"]["template"][0]
        [container] = template["containers"]
        limits = container["resources"][0]["limits"]
        env = {e["name"]: e.get("value") or "" for e in container.get("env") or [] if not e.get("value_source")}
        secrets = sum(1 for e in container.get("env") or [] if e.get("value_source"))
        out[str(resource["index"])] = Service(
            str(resource["index"]),
            int((template.get("scaling") or [{}])[0].get("min_instance_count") or 0),
            float(limits["cpu"]),
            gib(limits["memory"]),
            int(template.get("max_instance_request_concurrency") or 1),
            env,
            secrets,
        )
    return out
