"""What the Terraform plan gives each Cloud Run job and service, read from `terraform show -json` of
the offline plan (tools/rehearse_deploy.py runs them as planned; nothing here is retyped).

The plan is made by the real terraform through shared/tools/terraform-offline (`tf-offline plan
-out=FILE`, stand-in providers serving the real schemas). `terraform show -json` needs the
initialised directory that made the plan: tf-offline keeps its working copy when
TF_OFFLINE_KEEP_WORKDIR is set and says where; it is shown there, then deleted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
INFRA = ROOT / "infra"
EXAMPLE = INFRA / "terraform.tfvars.example"
TF_OFFLINE = ROOT.parent / "shared" / "tools" / "terraform-offline" / "tf-offline"
_KEPT = re.compile(r"^tf-offline: kept the working copy: (.+)$", re.MULTILINE)


class PlanError(RuntimeError):
    """The plan could not be made or read; one line."""


@dataclass(frozen=True)
class Container:
    """One job's or service's container as planned: what Cloud Run starts."""

    kind: str  # "job" | "service"
    name: str  # the Cloud Run resource's name (verify-migrate, verify-create, ...)
    key: str  # its for_each key in infra/ (migrate, grant, create, ...)
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: dict[str, str]
    secrets: dict[str, str]  # env name -> Secret Manager secret id (value_source.secret_key_ref)
    timeout_seconds: int
    max_instances: int = 1  # a service's scaling.max_instance_count (a job's task runs alone)

    def label(self) -> str:
        target = self.env.get("FUNCTION_TARGET")
        return f"{self.kind} {self.name}" + (f" ({target})" if target else "")


@dataclass(frozen=True)
class DatabaseUser:
    name: str
    type: str  # CLOUD_IAM_SERVICE_ACCOUNT | CLOUD_IAM_USER | CLOUD_IAM_GROUP
    database_roles: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    jobs: list[Container]  # in the order deploy.sh executes them (output schema_jobs)
    services: list[Container]
    database: str
    instance_connection_name: str
    users: list[DatabaseUser]
    ip_types: tuple[str, ...] = ("public",)  # the instance's addresses the connector may dial
    outputs: dict[str, Any] = field(default_factory=dict)

    def service(self, key: str) -> Container:
        return next(s for s in self.services if s.key == key)


def make_plan(
    bundle: Path, workdir: Path, var_args: list[str], tool: Path = TF_OFFLINE, var_file: Path = EXAMPLE
) -> dict[str, Any]:
    """`tf-offline plan infra/ -var-file=<var_file> -var=source_archive=<bundle> ARGS -out=...`, then
    `terraform show -json` of it in tf-offline's kept copy: the plan as JSON."""
    if not tool.is_file():
        raise PlanError(f"tf-offline is not at {tool} (shared/ beside the checkout)")
    if not shutil.which(os.environ.get("TF_OFFLINE_TERRAFORM") or "terraform"):
        raise PlanError("terraform is not installed (tf-offline runs the real binary)")
    out = workdir / "tfplan"
    env = {**os.environ, "TF_OFFLINE_KEEP_WORKDIR": "1", "NO_COLOR": "1"}
    command = ["bash", str(tool), "plan", str(INFRA), f"-var-file={var_file}", f"-var=source_archive={bundle}"]
    done = subprocess.run(
        [*command, *var_args, f"-out={out}"], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    kept = _KEPT.search(done.stderr)
    try:
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-12:]
            raise PlanError("terraform plan of infra/ failed: " + " | ".join(tail))
        if kept is None:
            raise PlanError("tf-offline did not say where it kept its working copy (TF_OFFLINE_KEEP_WORKDIR)")
        terraform = os.environ.get("TF_OFFLINE_TERRAFORM") or "terraform"
        shown = subprocess.run(
            [terraform, "show", "-json", "-no-color", str(out)],
            cwd=kept.group(1),
            env={**os.environ, "TF_CLI_CONFIG_FILE": os.devnull, "CHECKPOINT_DISABLE": "1"},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if shown.returncode != 0:
            raise PlanError(f"terraform show -json failed: {shown.stderr.strip()[-500:]}")
        return json.loads(shown.stdout)
    finally:
        if kept is not None:  # tf-offline's temporary directory: the copy and its sibling links
            shutil.rmtree(Path(kept.group(1)).parent, ignore_errors=True)


def _resources(module: dict[str, Any]) -> list[dict[str, Any]]:
    found = list(module.get("resources", []))
    for child in module.get("child_modules", []):
        found += _resources(child)
    return found


def _container(kind: str, resource: dict[str, Any], template: dict[str, Any], timeout: str) -> Container:
    scaling = (template.get("scaling") or [{}])[0]
    [container] = template["containers"]  # one container each (infra/services.tf, migrations.tf)
    env, secrets = {}, {}
    for entry in container.get("env") or []:
        source = entry.get("value_source") or []
        if source:
            [ref] = source[0]["secret_key_ref"]
            secrets[entry["name"]] = ref["secret"]
        else:
            env[entry["name"]] = entry["value"] if entry.get("value") is not None else ""
    values = resource["values"]
    return Container(
        kind=kind,
        name=values["name"],
        key=str(resource.get("index", "")),
        command=tuple(container.get("command") or ()),
        args=tuple(container.get("args") or ()),
        env=env,
        secrets=secrets,
        timeout_seconds=int(str(timeout).rstrip("s") or 300),
        max_instances=int(scaling.get("max_instance_count") or 1),
    )


def read_plan(shown: dict[str, Any]) -> Plan:
    """The jobs, services, database and IAM database users of a `terraform show -json` plan."""
    resources = _resources(shown["planned_values"]["root_module"])
    by_type: dict[str, list[dict[str, Any]]] = {}
    for resource in resources:
        by_type.setdefault(resource["type"], []).append(resource)
    outputs = {name: o.get("value") for name, o in shown["planned_values"].get("outputs", {}).items()}
    jobs = {
        r["values"]["name"]: _container(
            "job", r, r["values"]["template"][0]["template"][0], r["values"]["template"][0]["template"][0]["timeout"]
        )
        for r in by_type.get("google_cloud_run_v2_job", [])
    }
    order = list(outputs.get("schema_jobs") or [])
    services = [
        _container("service", r, r["values"]["template"][0], r["values"]["template"][0].get("timeout") or "300s")
        for r in sorted(by_type.get("google_cloud_run_v2_service", []), key=lambda r: str(r.get("index")))
    ]
    [database] = by_type["google_sql_database"]
    [instance] = by_type["google_sql_database_instance"]
    users = [
        DatabaseUser(u["values"]["name"], u["values"]["type"], tuple(u["values"].get("database_roles") or ()))
        for u in by_type.get("google_sql_user", [])
    ]
    connections = {s.env.get("INSTANCE_CONNECTION_NAME") for s in [*jobs.values(), *services]}
    if len(connections) != 1 or None in connections:
        raise PlanError(
            f"the jobs and services name {len(connections)} Cloud SQL instances: {sorted(map(str, connections))}"
        )
    missing = [name for name in order if name not in jobs]
    if missing:
        raise PlanError(f"output schema_jobs names job(s) the plan does not create: {missing}")
    order += sorted(name for name in jobs if name not in order)  # deploy.sh's order first, then any other
    return Plan(
        jobs=[jobs[name] for name in order],
        services=services,
        database=database["values"]["name"],
        instance_connection_name=connections.pop() or "",
        users=users,
        ip_types=_ip_types(instance),
        outputs=outputs,
    )


def _ip_types(instance: dict[str, Any]) -> tuple[str, ...]:
    """`public` when the instance has a public IPv4 address, `private` when it joins a VPC (its
    `private_network` is set, or known only after apply, which leaves it out of the planned values)."""
    [ip] = instance["values"]["settings"][0]["ip_configuration"]
    private = ip.get("private_network", "known after apply")
    kinds = (["public"] if ip.get("ipv4_enabled") else []) + (["private"] if private else [])
    return tuple(kinds)
