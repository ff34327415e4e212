#!/usr/bin/env python3
"""Rehearse the deployment on this machine: every Cloud Run job and service of the Terraform plan,
run from the bundle the way Google runs them, against Cloud SQL's role model.

    .venv/bin/python tools/rehearse_deploy.py [--workdir DIR] [--keep]

1. the bundle (tools/build_bundle.py), and the image made of it as the buildpacks make it: its
   requirements.txt alone in a fresh virtualenv, `compileall -f`, the checkout nowhere on the path
   (rehearsal_image.py);
2. the plan: the real terraform through tf-offline, infra/ with the example variables, an
   operator group and user, and WhatsApp and voice enabled; each job's and service's command, args and environment are read from
   `terraform show -json`, never retyped (rehearsal_plan.py);
3. Cloud SQL: a private embedded PostgreSQL with Cloud SQL's role model (cloudsqlsuperuser owning
   the database, the migrator an IAM-named login role that is only a member of it, every other IAM
   user without privileges), reached only through the Cloud SQL connector's seam, filled in the
   image's virtualenv by a stand-in that dials as the IAM database user (rehearsal_cloudsql.py,
   rehearsal_connector.py);
4. every job, in deploy.sh's order, twice (each run must succeed; the second changes nothing);
5. every service started as Cloud Run starts it, its secrets stubbed, the providers faked at their
   API URLs (the one setting added to the plan's), and the documented smoke test through them:
   create (email, SMS, WhatsApp, voice) -> dispatch -> confirm -> status, then reconcile (rehearsal_services.py, rehearsal_smoke.py);
   each connected as its own database user, none refused a privilege;
6. the operators: a reader (a member of the planned group) runs `verifyctl status` and `inspect` and
   is refused a write; an operator may write.

Prints what each step did; any failure is one line naming the job or service (`rehearsal: FAILED:
...`) and exit status 1. tests/system/test_rehearsal.py runs it in CI and proves it fails on planted
defects.
"""

from __future__ import annotations

import argparse
import base64
import json
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import build_bundle  # noqa: E402
import rehearsal_image as image_  # noqa: E402
from rehearsal_cloudsql import Instance  # noqa: E402
from rehearsal_plan import Container, Plan, PlanError, make_plan, read_plan  # noqa: E402
from rehearsal_services import ServiceError, Services  # noqa: E402
from rehearsal_smoke import provider_settings, smoke, start_providers  # noqa: E402
from signup_verification.local.fake_twilio import content_sids  # noqa: E402
from signup_verification.verifications.tokens import new_key_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".local" / "rehearsal"
# Operators' database access, planned with the example variables (infra/variables_access.tf).
READERS, OPERATORS = ["group:oncall@example.com"], ["user:ada@example.com"]
GROUP_MEMBERS = {"oncall@example.com": ["grace@example.com"]}  # who logs in through the group
# WhatsApp and voice enabled as an operator enables them (infra/variables_channels.tf): create then
# offers both, dispatch sends them. The content SIDs are the approved templates the fake Twilio knows.
WHATSAPP_FROM = "whatsapp:+14155550199"
PLAN_VARS = [
    f"-var=database_readers={json.dumps(READERS)}",
    f"-var=database_operators={json.dumps(OPERATORS)}",
    "-var=whatsapp=" + json.dumps({"enabled": True, "from": WHATSAPP_FROM, "content_sids": content_sids()}),
    "-var=voice=" + json.dumps({"enabled": True, "max_per_hour": 50}),
]
# Stand-ins for the secrets' values (Secret Manager's versions in Google Cloud), by setting.
SECRET_STUBS: dict[str, Callable[[], str]] = {
    "TOKEN_KEYS": new_key_spec,
    "SENDGRID_API_KEY": lambda: "SG.rehearsal-" + secrets.token_hex(8),
    "TWILIO_AUTH_TOKEN": lambda: secrets.token_hex(16),
    "SMTP_PASSWORD": lambda: secrets.token_hex(16),
    "WEBHOOK_SECRET": lambda: "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode(),
}
REHEARSED_TRANSPORTS = {
    "EMAIL_TRANSPORT": {"sendgrid"},
    "SMS_TRANSPORT": {"twilio"},
    "WHATSAPP_TRANSPORT": {"twilio"},
    "VOICE_TRANSPORT": {"twilio"},
}


class RehearsalError(RuntimeError):
    """A job or service failed as deployed; the message is one line naming it."""


@dataclass
class Rehearsal:
    work: Path
    cache: Path = CACHE
    log: Callable[[str], None] = print
    plan: Plan | None = None
    image: image_.Image | None = None
    secrets: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def ready(self) -> tuple[Plan, image_.Image]:
        if self.plan is None or self.image is None:
            raise RehearsalError("prepare() makes the plan and the image first")
        return self.plan, self.image

    def _timed(self, what: str, started: float) -> None:
        self.timings[what] = round(time.monotonic() - started, 1)

    def prepare(self, bundle: Path | None = None, plan: Plan | None = None) -> None:
        """The bundle (built unless given), the plan (made unless given) and the image."""
        self.work.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        if bundle is None:
            bundle = self.work / "function-source.zip"
            digest = build_bundle.build(bundle)
            self.log(f"bundle: {bundle.name} {digest[:12]}")
        self.plan = plan or self._plan(bundle)
        self._timed("bundle and plan", started)
        started = time.monotonic()
        target = (self.plan.outputs.get("build") or {}).get("function_target") or ""
        self.image = image_.build(bundle, self.work, self.cache, target, self.log)
        self._timed("image", started)
        note = image_.environ_note()
        self.log(
            f"image: {len(list(self.image.app.rglob('*.py')))} modules, compiled" + (f"; note: {note}" if note else "")
        )
        self.secrets = {
            name: SECRET_STUBS[name]()
            for name in sorted({s for c in self._containers() for s in c.secrets})
            if name in SECRET_STUBS  # another is named by settings(), in one line
        }

    def _plan(self, bundle: Path) -> Plan:
        try:
            plan = read_plan(make_plan(bundle, self.work, PLAN_VARS))
        except PlanError as exc:
            raise RehearsalError(f"plan: {exc}") from exc
        self.log(
            f"plan: {len(plan.jobs)} jobs ({', '.join(j.name for j in plan.jobs)}), {len(plan.services)} services, "
            f"{len(plan.users)} IAM database users, instance {plan.instance_connection_name}"
        )
        return plan

    def _containers(self) -> list[Container]:
        plan, _ = self.ready()
        return [*plan.jobs, *plan.services]

    def settings(self, container: Container, instance: Instance, extra: dict[str, str]) -> dict[str, str]:
        """The planned environment, the secrets' values injected, the connector's stand-in pointed at the instance."""
        missing = [name for name in container.secrets if name not in self.secrets]
        if missing:
            raise RehearsalError(f"{container.label()}: no stand-in value for secret(s) {missing}")
        for name, rehearsed in REHEARSED_TRANSPORTS.items():
            if container.env.get(name, next(iter(rehearsed))) not in rehearsed:
                raise RehearsalError(f"{container.label()}: {name}={container.env[name]} is not rehearsed here")
        return {
            **container.env,
            **{name: self.secrets[name] for name in container.secrets},
            "REHEARSAL_CLOUDSQL": instance.connector_setting(self.work / "connections.jsonl"),
            **extra,
        }

    def instance(self, plan: Plan) -> Instance:
        """A new instance with the plan's database and IAM users, nothing else."""
        instance = Instance(plan.instance_connection_name, plan.ip_types)
        instance.create(plan.database, plan.users, GROUP_MEMBERS)
        (self.work / "connections.jsonl").write_text("")
        return instance

    def run_job(self, job: Container, instance: Instance, run: int) -> str:
        """One execution of a job's one task, as Cloud Run runs it; its stdout."""
        _, image = self.ready()
        settings = self.settings(
            job,
            instance,
            {
                "CLOUD_RUN_JOB": job.name,
                "CLOUD_RUN_EXECUTION": f"{job.name}-rehearsal-{run}",
                "CLOUD_RUN_TASK_INDEX": "0",
                "CLOUD_RUN_TASK_ATTEMPT": "0",
                "CLOUD_RUN_TASK_COUNT": "1",
            },
        )
        try:
            done = image.run(image.argv(job), settings, timeout=job.timeout_seconds)
        except subprocess.TimeoutExpired as exc:
            raise RehearsalError(f"{job.label()} (run {run}): still running after its timeout") from exc
        if done.returncode != 0:
            raise RehearsalError(f"{job.label()} (run {run}) exited {done.returncode}: {_last(done)}")
        return done.stdout.strip()

    def run_jobs(self, plan: Plan, instance: Instance, runs: int = 2) -> None:
        """Every job in order, `runs` times: each run succeeds, and a migration run after the first applies nothing."""
        for run in range(1, runs + 1):
            for job in plan.jobs:
                out = self.run_job(job, instance, run)
                lines = out.splitlines() or ["done"]
                self.log(
                    f"{job.label()}, run {run}: {lines[0][:100]}"
                    + (f" (+{len(lines) - 1} lines)" if len(lines) > 1 else "")
                )
                if run > 1 and "migrate" in job.args and out != "database is up to date":
                    raise RehearsalError(f"{job.label()} (run {run}): changed the database again: {out[:200]}")

    def start_services(
        self,
        plan: Plan,
        instance: Instance,
        extra: dict[str, str],
        keys: list[str] | None = None,
        instances: dict[str, int] | None = None,
    ) -> Services:
        _, image = self.ready()
        chosen = [s for s in plan.services if keys is None or s.key in keys]
        services = Services(image, self.work / "logs")
        # dispatch: the tick's invocation waits for work until the relay's takes over, on a second instance
        instances = instances or {"dispatch": 2}
        try:
            services.start(chosen, {s.key: self.settings(s, instance, extra) for s in chosen}, instances)
        except ServiceError as exc:
            services.stop()
            raise RehearsalError(str(exc)) from exc
        return services

    def deploy(self) -> dict[str, str]:
        """Steps 3 to 6 (module docstring) on a new instance; every process and server stopped after."""
        plan, _ = self.ready()
        started = time.monotonic()
        instance = self.instance(plan)
        providers = None
        services: Services | None = None
        try:
            self.run_jobs(plan, instance)
            self._timed("jobs", started)
            started = time.monotonic()
            providers = start_providers(plan, self.secrets)
            services = self.start_services(plan, instance, provider_settings(providers))
            self.log(f"services: {len(services.running)} listening ({', '.join(sorted(services.running))})")
            try:
                ids = smoke(plan, services, providers, self.secrets, self.log)
            except ServiceError as exc:
                raise RehearsalError(str(exc)) from exc
            faults = services.privilege_failures() + services.error_records()
            if faults:
                raise RehearsalError(faults[0])
            self._timed("services and smoke test", started)
            started = time.monotonic()
            self.operators(plan, instance, ids)
            self._timed("operators", started)
        finally:
            stopped = services.stop() if services is not None else []
            if providers is not None:
                providers.stop()
            instance.stop()
        if stopped:
            raise RehearsalError(stopped[0])
        self.check_connections(plan)
        return ids

    def verifyctl(self, plan: Plan, instance: Instance, user: str, *argv: str) -> subprocess.CompletedProcess:
        """verifyctl as an operator runs it (docs/runbook.md): through the connector, as their own IAM user."""
        _, image = self.ready()
        settings = {
            "ENVIRONMENT": "production",
            "INSTANCE_CONNECTION_NAME": plan.instance_connection_name,
            "DB_NAME": plan.database,
            "DB_USER": user,
            "DEPLOYMENT": plan.jobs[0].env.get("DEPLOYMENT", ""),
            "REHEARSAL_CLOUDSQL": instance.connector_setting(self.work / "connections.jsonl"),
        }
        return image.run([str(image.python), "-m", "signup_verification.cli", *argv], settings, timeout=120)

    def operators(self, plan: Plan, instance: Instance, ids: dict[str, str]) -> None:
        """A reader looks and is refused a write; an operator writes. Roles as the grant job's args give them."""
        grant = next((j for j in plan.jobs if "grant" in j.args), None)
        if grant is None:
            raise RehearsalError("plan: no grant job")
        granted = dict(a[2:].split("=", 1)[::-1] for a in grant.args if a.startswith("--") and "=" in a)
        readers = [m for group, members in GROUP_MEMBERS.items() if granted.get(group) == "reader" for m in members]
        operators = [u.split(":", 1)[1] for u in OPERATORS if granted.get(u.split(":", 1)[1]) == "operator"]
        if not readers or not operators:
            raise RehearsalError(f"job grant: gives no role to the planned operators ({READERS + OPERATORS})")
        for reader in readers:
            for argv in (["status"], ["inspect", ids["email"]], ["suppression", "list"], ["migrate", "--list"]):
                done = self.verifyctl(plan, instance, reader, *argv)
                if done.returncode != 0:
                    raise RehearsalError(f"operator {reader} (reader): verifyctl {' '.join(argv)}: {_last(done)}")
            refused = self.verifyctl(plan, instance, reader, "channel", "resume", "email")
            if refused.returncode != 1 or "permission denied" not in refused.stderr or refused.stderr.count("\n") != 1:
                raise RehearsalError(
                    f"operator {reader} (reader): a write was not refused in one line: {refused.stderr.strip()[-300:]}"
                )
            self.log(f"operator {reader} (reader), verifyctl channel resume email: {refused.stderr.strip()}")
        for operator in operators:
            done = self.verifyctl(plan, instance, operator, "channel", "resume", "email")
            if done.returncode != 0:
                raise RehearsalError(f"operator {operator}: verifyctl channel resume: {_last(done)}")
        self.log(
            f"operators: {', '.join(readers)} (through the group) ran status, inspect, suppression list and "
            "migrate --list and was refused a write; "
            f"{', '.join(operators)} resumed a channel"
        )

    def check_connections(self, plan: Plan) -> None:
        """Each service and job connected as its own IAM database user, and only as that."""
        seen: dict[str, set[str]] = {}
        for line in (self.work / "connections.jsonl").read_text().splitlines():
            entry = json.loads(line)
            seen.setdefault(entry["who"], set()).add(entry["user"])
        for container in self._containers():
            want = container.env.get("DB_USER", "").removesuffix(".gserviceaccount.com")
            got = seen.get(container.name, set())
            if got != {want}:
                raise RehearsalError(f"{container.label()}: connected as {sorted(got) or 'nobody'}, not only as {want}")


def _last(done: subprocess.CompletedProcess) -> str:
    """The line a failed process ended with (a traceback's last line names its exception)."""
    return (done.stderr.strip() or done.stdout.strip() or "(no output)").splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--workdir", type=Path, default=None, help="where to work (default: a new temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (bundle, app, plan, logs)")
    args = parser.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="rehearsal-"))

    def say(line: str) -> None:
        print(f"rehearsal: {line}", flush=True)

    started = time.monotonic()
    rehearsal = Rehearsal(work, log=say)
    try:
        rehearsal.prepare()
        rehearsal.deploy()
    except (RehearsalError, image_.ImageError, build_bundle.BundleError) as exc:
        print(f"rehearsal: FAILED: {exc}", file=sys.stderr, flush=True)
        say(f"the services' logs and the application are in {work}")
        return 1
    timings = ", ".join(f"{what} {seconds} s" for what, seconds in rehearsal.timings.items())
    say(f"passed in {time.monotonic() - started:.0f} s ({timings})")
    if args.keep:
        say(f"work directory: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
