"""The deployment rehearsed (tools/rehearse_deploy.py): every Cloud Run job and service of the plan,
from the bundle, as Google runs them, against Cloud SQL's role model; and the rehearsal failing, in
one line naming the job or service, on defects planted in what ships.

One bundle, plan and image (its virtualenv kept in .local/rehearsal) serve the whole module. About
35 s on a quiet machine, plus the virtualenv's first install (~60 s, once per requirements.txt).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from signup_verification.platform.config import Target
from support.terraform_model import tf_offline

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import build_bundle  # noqa: E402
import rehearse_deploy  # noqa: E402
from rehearsal_services import ServiceError  # noqa: E402
from rehearsal_smoke import caller  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def said() -> list[str]:
    """What the rehearsal printed."""
    return []


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory, said) -> rehearse_deploy.Rehearsal:
    tool, reason = tf_offline()
    if tool is None:
        pytest.skip(reason)
    rehearsed = rehearse_deploy.Rehearsal(tmp_path_factory.mktemp("rehearsal"), log=said.append)
    rehearsed.prepare()
    return rehearsed


def test_every_job_and_service_runs_from_the_bundle_as_planned(rehearsal, said):
    rehearsal.deploy()
    text = "\n".join(said)
    plan = rehearsal.plan
    assert [job.name for job in plan.jobs] == ["verify-migrate", "verify-grant"]  # deploy.sh's order
    assert {s.env["FUNCTION_TARGET"] for s in plan.services} == set(Target)
    for job in plan.jobs:  # each twice; the second migration run applies nothing
        assert f"{job.label()}, run 1:" in text and f"{job.label()}, run 2:" in text
    assert "job verify-migrate, run 1: applied " in text and "job verify-migrate, run 2: database is up to date" in text
    for step in (
        "create: 201",
        "create: 201 for a WhatsApp and a voice verification",
        "the WhatsApp message and the call Twilio",
        "dispatch: 200",
        "confirm:",
        "delivery_reports:",
        "status: both verified",
        "reconcile: 200",
    ):
        assert step in text, step
    assert "was refused a write" in text and "ada@example.com resumed a channel" in text


def test_a_job_command_importing_laptop_only_code_fails_naming_the_job(rehearsal, tmp_path):
    """The defect that stopped every first deploy: verifyctl importing local/, which the bundle leaves out."""
    files = build_bundle.bundle_files()
    planted = "signup_verification/cli/commands/dev.py"
    files[planted] += b"\nfrom ...local import devserver  # planted\n"
    bundle = tmp_path / "planted.zip"
    build_bundle.write_zip(files, bundle)
    broken = rehearse_deploy.Rehearsal(tmp_path / "work", log=lambda line: None)
    broken.prepare(bundle=bundle, plan=rehearsal.plan)
    with pytest.raises(rehearse_deploy.RehearsalError) as failed:
        broken.deploy()
    assert str(failed.value) == (
        "job verify-migrate (run 1) exited 1: ModuleNotFoundError: No module named 'signup_verification.local'"
    )


def test_a_function_lacking_a_privilege_fails_naming_the_service(rehearsal, tmp_path):
    """A grant job that leaves the status function out: its first request names the refused privilege."""
    plan = rehearsal.plan
    grant = next(job for job in plan.jobs if "grant" in job.args)
    status_user = plan.service("status").env["DB_USER"]
    without = dataclasses.replace(grant, args=tuple(a for a in grant.args if a != f"--reader={status_user}"))
    assert without.args != grant.args
    planted = dataclasses.replace(plan, jobs=[without if job is grant else job for job in plan.jobs])
    probe = rehearse_deploy.Rehearsal(
        tmp_path, log=lambda line: None, plan=planted, image=rehearsal.image, secrets=rehearsal.secrets
    )
    instance = probe.instance(planted)
    try:
        probe.run_jobs(planted, instance, runs=1)
        services = probe.start_services(planted, instance, {}, keys=["status"])
        try:
            with pytest.raises(ServiceError) as failed:
                services.call("status", "GET", "/", headers=caller(planted, "status", "operator@example.com"))
        finally:
            services.stop()
    finally:
        instance.stop()
    line = str(failed.value)
    assert line.startswith("service verify-status (status): GET / answered 5"), line
    assert "permission denied for table" in line and f"(as database user {status_user})" in line
    assert "\n" not in line


def test_the_small_tier_s_create_nudges_dispatch_through_a_named_task(rehearsal, tmp_path):
    """The small tier's plan (support/infra_plans.py) run from the same bundle: its migrate and grant
    jobs, then its create service on two instances and its dispatch service. Two creates at once
    make their bucket's one named task at the Tasks API's stand-in, which delivers it to dispatch's
    nudge path with the nudge identity's token: both messages are sent, and nobody ticked dispatch."""
    from rehearsal_nudge import credentials_file, nudge_smoke, settings
    from rehearsal_plan import read_plan
    from rehearsal_smoke import provider_settings, start_providers
    from support.fakes.cloud_tasks import TasksApi
    from support.infra_plans import plan_of

    plan = read_plan(plan_of("small").shown)
    create, dispatch = plan.service("create"), plan.service("dispatch")
    assert create.env["DISPATCH_NUDGE_QUEUE"].endswith("/queues/verify-dispatch-nudge")
    small = rehearse_deploy.Rehearsal(tmp_path, log=lambda line: None, plan=plan, image=rehearsal.image,
                                      secrets=rehearsal.secrets)  # fmt: skip
    instance = small.instance(plan)
    providers = start_providers(plan, rehearsal.secrets)
    api = TasksApi(deliver=True)
    services = None
    try:
        small.run_jobs(plan, instance, runs=1)
        key = credentials_file(
            tmp_path / "key.json", api.token_uri, create.env["DB_USER"].replace(".iam", ".iam.gserviceaccount.com")
        )
        extra = {**provider_settings(providers), **settings(api, key)}
        services = small.start_services(plan, instance, extra, keys=["create", "dispatch"],
                                        instances={"create": 2, "dispatch": 1})  # fmt: skip
        api.routes[create.env["DISPATCH_NUDGE_URL"].rstrip("/")] = services["dispatch"].url
        with api:
            names = nudge_smoke(plan, services, providers, api)
        assert services["dispatch"].requests == []  # never called by us: the tasks' deliveries alone
        assert all("/queues/verify-dispatch-nudge/tasks/nudge-" in n for n in names)
        assert not services.privilege_failures() and not services.error_records()
    finally:
        if services is not None:
            services.stop()
        providers.stop()
        instance.stop()
    assert dispatch.env["DISPATCH_IDLE_WAIT"] == "false"
