"""Stand-ins for `gcloud` and `terraform` that deploy.sh runs against in tests/system/test_deploy_script.py.

The cloud cannot be reached from here, so one JSON file (FAKE_CLOUD) is the project: its account,
billing, organisation policies, quotas, buckets, secrets and their versions, images, builds and job
executions. Both tools read and change it, so a second or interrupted run meets what the first left:
terraform's apply creates the secret containers and records the phase it applied; gcloud adds versions,
builds images, executes jobs. Every call is appended to FAKE_LOG (argv only: never stdin, where secret
values travel). An unsupported command exits 2, so a new call in deploy.sh cannot pass unnoticed.

`fail` in the state makes a command fail a number of times (key: the command's words before its first
flag, e.g. "run jobs execute verify-migrate" or "terraform apply phase2"): an interruption.
With FAKE_TF_OFFLINE set, `terraform plan` is also run by the real terraform (tf-offline) on the
configuration deploy.sh pointed it at, and its text is logged: the plans deploy.sh makes, checked
against the providers' real schemas.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

PHASE1_MARK = "google_sql_database.main"
JOBS_MARK = "google_cloud_run_v2_job.schema"
APIS_MARK = "time_sleep.apis"


class Fail(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def load() -> dict[str, Any]:
    return json.loads(Path(os.environ["FAKE_CLOUD"]).read_text())


def save(state: dict[str, Any]) -> None:
    Path(os.environ["FAKE_CLOUD"]).write_text(json.dumps(state, indent=1))


def flag(args: list[str], name: str) -> str | None:
    for arg in args:
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
    return None


def words(args: list[str]) -> list[str]:
    out = []
    for arg in args:
        if arg.startswith("-"):
            break
        out.append(arg)
    return out


def injected(state: dict[str, Any], label: str) -> None:
    left = state.setdefault("fail", {}).get(label, 0)
    if left:
        state["fail"][label] = left - 1
        save(state)
        raise Fail(f"{label}: injected failure")


# ---- gcloud -------------------------------------------------------------------------------------


def gcloud(args: list[str], state: dict[str, Any]) -> str:
    cmd = words(args)
    injected(state, " ".join(cmd))
    project = flag(args, "project")
    match cmd:
        case ["config", "get-value", "account"]:
            return state.get("account", "")
        case ["auth", "print-access-token"]:
            if not state.get("account"):
                raise Fail("no credentialed accounts")
            return "ya29.fake-token"
        case ["services", "enable", *apis]:
            state.setdefault("enabled_apis", []).extend(apis)
            return ""
        case ["projects", "describe", name]:
            if name not in state["projects"]:
                raise Fail(f"project {name} not found or permission denied")
            return state["projects"][name]["number"]
        case ["billing", "projects", "describe", name]:
            return "True" if state["projects"][name].get("billing", True) else "False"
        case ["org-policies", "describe", constraint]:
            if constraint in state.get("unreadable_policies", []):
                raise Fail("permission denied")
            return json.dumps(state.get("org_policies", {}).get(constraint, {"name": constraint}))
        case ["iam", "service-accounts", "describe", email]:
            if email not in state.get("service_accounts", []):
                raise Fail(f"{email} not found")
            return email
        case ["quotas", "info", "list"]:
            return json.dumps(state.get("quotas", []))
        case ["storage", "buckets", "describe", bucket]:
            if bucket not in state.setdefault("buckets", []):
                raise Fail("bucket not found")
            return bucket
        case ["storage", "buckets", "create", bucket]:
            state.setdefault("buckets", []).append(bucket)
            return ""
        case ["storage", "buckets", "update", _bucket]:
            return ""
        case ["secrets", "versions", "list", secret]:
            if secret not in state.setdefault("secrets", {}):
                raise Fail(f"secret {secret} not found")
            return "\n".join(
                f"projects/{project}/secrets/{secret}/versions/{n + 1}" for n, _ in enumerate(state["secrets"][secret])
            )
        case ["secrets", "versions", "add", secret]:
            if secret not in state.setdefault("secrets", {}):
                raise Fail(f"secret {secret} not found")
            state["secrets"][secret].append(sys.stdin.read())
            return ""
        case ["artifacts", "docker", "images", "describe", image]:
            if image not in state.setdefault("images", []):
                raise Fail("image not found")
            return "sha256:feed"
        case ["builds", "list"]:
            image = (flag(args, "filter") or "").removeprefix("images=")
            builds = state.setdefault("builds", {})
            ongoing = [b for b, build in builds.items() if build["image"] == image and build["polls"] > 0]
            return ongoing[0] if ongoing else ""
        case ["builds", "submit"]:
            subs = dict(pair.split("=", 1) for pair in (flag(args, "substitutions") or "").split(","))
            build_id = f"build-{len(state.setdefault('builds', {})) + 1}"
            state["builds"][build_id] = {
                "image": subs["_IMAGE"],
                "polls": state.get("build_polls", 1),
                "result": state.get("build_result", "SUCCESS"),
                "substitutions": subs,
            }
            return build_id
        case ["builds", "describe", build_id]:
            build = state["builds"][build_id]
            if build["polls"] > 0:
                build["polls"] -= 1
                return "WORKING"
            if build["result"] == "SUCCESS" and build["image"] not in state.setdefault("images", []):
                state["images"].append(build["image"])
            return build["result"]
        case ["run", "jobs", "execute", job]:
            state.setdefault("executions", []).append(job)
            return ""
        case ["beta", "services", "identity", "create"]:
            if "--help" in args:
                if state.get("no_beta"):
                    raise Fail("Invalid choice: 'beta'. The beta component is not installed")
                return "NAME\n    gcloud beta services identity create"
            service = flag(args, "service") or ""
            if service not in state.get("enabled_apis", []):
                raise Fail(f"Service {service} is not enabled for consumer project {project}")
            agents = state.setdefault("service_agents_created", [])
            if service not in agents:
                agents.append(service)
            number = state["projects"][project]["number"]
            return f"service-{number}@gcp-sa-{service.split('.')[0]}.iam.gserviceaccount.com"
    raise Fail(f"fake gcloud: unsupported command: {' '.join(args)}", code=2)


# ---- terraform ----------------------------------------------------------------------------------


def phase_of(args: list[str]) -> str:
    targets = [a.removeprefix("-target=") for a in args if a.startswith("-target=")]
    if not targets:
        return "all"
    if targets == [APIS_MARK]:
        return "apis"
    return "phase2" if JOBS_MARK in targets else "phase1" if PHASE1_MARK in targets else "+".join(targets)


def variables(args: list[str]) -> dict[str, str]:
    """The -var=NAME=VALUE settings of a plan (deploy.sh's own, beside its var file)."""
    return dict(a.removeprefix("-var=").split("=", 1) for a in args if a.startswith("-var="))


def terraform(args: list[str], state: dict[str, Any], entry: dict[str, Any]) -> tuple[str, int]:
    chdir = next((a.removeprefix("-chdir=") for a in args if a.startswith("-chdir=")), ".")
    args = [a for a in args if not a.startswith("-chdir=")]
    applied = state.setdefault("applied", [])
    match args[:1]:
        case ["version"]:
            return json.dumps({"terraform_version": state.get("terraform_version", "1.11.4")}), 0
        case ["init"]:
            injected(state, "terraform init")
            return "Terraform has been successfully initialized!", 0
        case ["plan"]:
            phase = phase_of(args)
            injected(state, f"terraform plan {phase}")
            changes = not ("all" in applied or phase in applied)
            if os.environ.get("FAKE_TF_OFFLINE"):
                import subprocess  # only here: the stand-in starts faster without it

                real = [a for a in args[1:] if not a.startswith(("-out=", "-detailed-exitcode"))]
                run = subprocess.run(
                    ["bash", os.environ["FAKE_TF_OFFLINE"], "plan", chdir, *real], capture_output=True, text=True
                )
                entry["plan"] = run.stdout + run.stderr
                if run.returncode != 0:
                    return entry["plan"], 1
            out = next(a.removeprefix("-out=") for a in args if a.startswith("-out="))
            Path(out).write_text(json.dumps({"phase": phase, "changes": changes, "vars": variables(args)}))
            return f"Plan: {'changes' if changes else 'No changes'} ({phase})", 2 if changes else 0
        case ["show"]:
            outputs = {k: {"value": v} for k, v in state["outputs"].items()}
            return json.dumps({"planned_values": {"outputs": outputs}}), 0
        case ["apply"]:
            plan = json.loads(Path(args[-1]).read_text())
            injected(state, f"terraform apply {plan['phase']}")
            applied.append(plan["phase"])
            if plan["phase"] == "apis":  # what google_project_service.api enables (infra/apis.tf)
                state.setdefault("enabled_apis", []).extend(state["outputs"]["service_agents"])
            state["outputs"]["db_connectivity"] = plan["vars"].get("db_connectivity", "public_ip")
            if plan["phase"] in ("phase1", "all"):
                for secret in state["outputs"]["required_secrets"].values():
                    state.setdefault("secrets", {}).setdefault(secret, [])
            return f"Apply complete ({plan['phase']})", 0
        case ["output"]:
            if not applied:
                raise Fail("No outputs found")
            name = args[-1]
            if name not in state["outputs"]:
                raise Fail(f'Output "{name}" not found')
            value = state["outputs"][name]
            return (value if "-raw" in args else json.dumps(value)), 0
    raise Fail(f"fake terraform: unsupported command: {' '.join(args)}", code=2)


def main() -> int:
    tool = os.environ.get("FAKE_TOOL") or Path(sys.argv[0]).name
    args = sys.argv[1:]
    entry: dict[str, Any] = {"tool": tool, "argv": args}
    if tool == "gcloud":
        entry["token_in_env"] = False
    else:
        entry["token_in_env"] = os.environ.get("GOOGLE_OAUTH_ACCESS_TOKEN") == "ya29.fake-token"
    state = load()
    code = 0
    try:
        if tool == "gcloud":
            output = gcloud(args, state)
        else:
            output, code = terraform(args, state, entry)
        save(state)
        if output:
            print(output)
    except Fail as exc:
        print(f"{tool}: ERROR: {exc}", file=sys.stderr)
        code = exc.code
    except Exception as exc:  # a bug in the stand-in: logged, so the test that hits it says so
        print(f"{tool}: stand-in crashed: {exc!r}", file=sys.stderr)
        entry["crash"] = repr(exc)
        code = 3
    entry["exit"] = code
    with open(os.environ["FAKE_LOG"], "a") as log:
        log.write(json.dumps(entry) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
