"""infra/*.tf, checked without a terraform binary or a cloud: parsed with python-hcl2, then checkov.

What a wrong edit here would break in production: a function deployed with an entry point that
does not exist, a scheduler token Cloud Run rejects, a secret a function cannot read, a secret
value committed, a connection budget the database cannot hold.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from signup_verification.platform.channels import DELIVERY_CHANNELS
from signup_verification.platform.config import Target
from signup_verification.verifications.config import TOKEN_TARGETS
from support import deploy_docs
from support.terraform_model import INFRA, first, load_infra

ROOT = INFRA.parent


def main_py_functions() -> set[str]:
    tree = ast.parse((ROOT / "functions" / "main.py").read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_every_target_of_the_service_is_deployed():
    assert set(load_infra().entry_points.values()) == set(Target)


@pytest.mark.parametrize("key", sorted(load_infra().entry_points))
def test_entry_point_exists_in_functions_main(key):
    entry_point = load_infra().entry_points[key]
    assert entry_point in main_py_functions(), (
        f"infra deploys {entry_point!r} but functions/main.py has no such function"
    )


def test_each_function_is_a_cloud_run_service_of_the_bundles_image():
    infra = load_infra()
    service = infra.resource("google_cloud_run_v2_service", "function")
    assert service["for_each"] == "${local.function_specs}"
    assert set(infra.locals["function_defaults"]) == set(infra.function_specs)
    container = first(first(service["template"])["containers"])
    assert container["image"] == "${local.image}"
    # One image, six targets: each service names its entry point, as functions-framework --target does.
    assert re.search(r"FUNCTION_TARGET\s+= spec\.entry_point", (INFRA / "services.tf").read_text())
    assert first(service["build_config"])["function_target"] == "${each.value.entry_point}"
    # The image is tagged by the bundle's hash, and built from the object of the same hash.
    assert infra.locals["bundle_sha"] == "${filesha256(var.source_archive)}"
    assert infra.locals["image"].endswith("/functions:${local.bundle_sha}")
    assert "${local.bundle_sha}" in infra.resource("google_storage_bucket_object", "source")["name"]
    repo = infra.resource("google_artifact_registry_repository", "functions")
    assert first(repo["docker_config"])["immutable_tags"] is True
    # The build config builds on Python 3.11: the interpreter the bundle's pins are resolved for.
    build = yaml.safe_load((INFRA / "deploy" / "cloudbuild.yaml").read_text())
    assert "--env=GOOGLE_PYTHON_VERSION=3.11.x" in build["steps"][-1]["args"]
    assert build["options"]["logging"] == "CLOUD_LOGGING_ONLY" and build["images"] == ["${_IMAGE}"]


def test_scheduler_jobs_carry_an_oidc_token_for_their_own_function():
    infra = load_infra()
    job = infra.resource("google_cloud_scheduler_job", "tick")
    assert job["for_each"] == "${local.ticks}"
    jobs = infra.locals["scheduler_jobs"]
    assert {key: j["function"] for key, j in jobs.items()} == {
        "dispatch": "dispatch",
        "dispatch_relay": "dispatch",
        "reconcile": "reconcile",
    }
    # the relay only where the tier keeps dispatch waiting for work (the small tier nudges it instead)
    assert [key for key, j in jobs.items() if j["relay"]] == ["dispatch_relay"]
    assert "local.idle_wait || !job.relay" in infra.locals["ticks"]
    target = first(job["http_target"])
    own_uri = "google_cloud_run_v2_service.function[each.value.function].uri"
    assert target["uri"] == "${" + own_uri + "}"
    token = first(target["oidc_token"])
    assert token["audience"] == "${" + own_uri + "}"
    assert token["service_account_email"] == "${google_service_account.scheduler.email}"


def test_scheduled_invocations_cannot_pile_up():
    infra = load_infra()
    job = infra.resource("google_cloud_scheduler_job", "tick")
    assert job["schedule"] == "* * * * *"
    assert first(job["retry_config"])["retry_count"] == 0
    # attempt_deadline = the function's own timeout + a margin: the scheduler never gives up first.
    match = re.fullmatch(
        r"\$\{local\.functions\[each\.value\.function\]\.timeout_seconds \+ (\d+)\}s", job["attempt_deadline"]
    )
    assert match and int(match.group(1)) > 0
    defaults = infra.locals["function_defaults"]
    for key in ("dispatch", "reconcile"):
        assert defaults[key]["timeout_seconds"] + int(match.group(1)) >= 15  # Cloud Scheduler's minimum
    assert defaults["reconcile"]["timeout_seconds"] < 60  # ends before the next tick
    # dispatch outlives one tick (an idle invocation hands over to the next, outbox/idle.py), never
    # two: at most max_instances (2) invocations at once.
    assert 60 < defaults["dispatch"]["timeout_seconds"] <= 110 and defaults["dispatch"]["max_instances"] >= 2


def test_only_the_intended_principals_invoke_each_function():
    infra = load_infra()
    invokers = infra.locals["private_invokers"]
    assert '"create/signup-site"' in invokers and "local.signup_site_email" in invokers
    assert "local.scheduled" in invokers and "google_service_account.scheduler.member" in invokers
    assert '"status/${m}"' in invokers and "var.operators" in invokers
    specs = infra.function_specs
    assert sorted(k for k, s in specs.items() if s["public"]) == ["confirm", "reports"]
    assert specs["dispatch"]["ingress"] == specs["reconcile"]["ingress"] == "INGRESS_TRAFFIC_INTERNAL_ONLY"
    # Public without an allUsers binding by default (Domain Restricted Sharing); the private
    # targets keep Cloud Run's invoker check whatever the mode.
    service = infra.resource("google_cloud_run_v2_service", "function")
    assert service["invoker_iam_disabled"] == '${each.value.public && var.public_access == "invoker_iam_disabled"}'
    assert infra.variables["public_access"]["default"] == "invoker_iam_disabled"
    public = infra.resource("google_cloud_run_v2_service_iam_member", "public")
    assert public["for_each"] == '${toset(var.public_access == "allUsers" ? local.public_functions : [])}'
    text = "\n".join(p.read_text() for p in INFRA.glob("*.tf"))
    assert len(re.findall(r'member\s*=\s*"allUsers"', text)) == 1 and '"allAuthenticatedUsers"' not in text
    assert "--no-invoker-iam-check" not in (ROOT / "deploy.sh").read_text()  # nothing outside Terraform


def _enabled_secrets(
    email_transport: str, sms_transport: str, smtp_username: str = "", webhook_url: str = ""
) -> set[str]:
    """Python mirror of local.enabled_secrets (the expression is asserted unchanged below)."""
    enabled = {"token_keys"}
    if email_transport == "sendgrid":
        enabled.add("sendgrid_api_key")
    if email_transport == "smtp" and smtp_username:
        enabled.add("smtp_password")
    if sms_transport == "twilio":
        enabled.add("twilio_auth_token")
    if webhook_url:
        enabled.add("webhook_secret")
    return enabled


def test_every_secret_a_function_reads_exists_and_is_granted_to_it():
    infra = load_infra()
    local = infra.locals
    assert set(local["secret_env"].values()) <= {
        "TOKEN_KEYS",
        "SENDGRID_API_KEY",
        "SMTP_PASSWORD",
        "TWILIO_AUTH_TOKEN",
        "WEBHOOK_SECRET",
    }
    for key, spec in infra.function_specs.items():
        assert set(spec["secrets"]) <= set(local["secret_env"]), key
        # Exactly the targets that derive or check tokens load TOKEN_KEYS (least privilege).
        needs_keys = spec["entry_point"] in TOKEN_TARGETS
        assert ("token_keys" in spec["secrets"]) == needs_keys, key
    for name in local["secret_env"]:
        assert f'"{name}"' in local["enabled_secrets"], f"{name} can never be created"
    # The three places that must agree all derive from local.function_secrets:
    assert "local.enabled_secrets" in local["function_secrets"]
    assert local["secret_grants"].startswith("${merge([for key, secrets in local.function_secrets")
    grant = infra.resource("google_secret_manager_secret_iam_member", "function")
    assert grant["for_each"] == "${local.secret_grants}"
    assert grant["role"] == "roles/secretmanager.secretAccessor"
    assert grant["member"] == "${google_service_account.function[each.value.function].member}"
    assert infra.resource("google_secret_manager_secret", "secret")["for_each"] == "${local.enabled_secrets}"
    container = first(first(infra.resource("google_cloud_run_v2_service", "function")["template"])["containers"])
    # The platform injects each value at instance start (no Secret Manager call in a cold start),
    # under the setting's own variable name, so the code reads a plain value.
    [plain, secret] = [d["env"] for d in container["dynamic"]]
    assert plain["for_each"] == "${local.function_env[each.key]}"
    assert secret["for_each"] == "${toset(local.function_secrets[each.key])}"
    content = first(secret["content"])
    assert content["name"] == "${local.secret_env[env.value]}"
    ref = first(first(content["value_source"])["secret_key_ref"])
    assert ref["secret"] == "${google_secret_manager_secret.secret[env.value].secret_id}"
    assert ref["version"] == "${local.secret_version[env.value]}"
    assert not any(name in infra.locals["common_env"] for name in local["secret_env"].values())
    # With the default transports, dispatch reads exactly the token keys and the two provider secrets.
    defaults = {n: infra.variables[n]["default"] for n in ("email_transport", "sms_transport")}
    enabled = _enabled_secrets(defaults["email_transport"], defaults["sms_transport"])
    dispatch = [s for s in infra.function_specs["dispatch"]["secrets"] if s in enabled]
    assert sorted(dispatch) == ["sendgrid_api_key", "token_keys", "twilio_auth_token"]
    # With a webhook_url, dispatch (and only dispatch: it signs) reads WEBHOOK_SECRET.
    enabled = _enabled_secrets(defaults["email_transport"], defaults["sms_transport"], webhook_url="https://x")
    readers = [k for k, spec in infra.function_specs.items() if "webhook_secret" in spec["secrets"]]
    assert "webhook_secret" in enabled and readers == ["dispatch"]


SECRET_LOOKING = [
    (re.compile(r"\bsecret_data\s*="), "secret_data puts the value in state (use out-of-band versions)"),
    (re.compile(r"google_secret_manager_secret_version"), "secret versions are added with gcloud, not Terraform"),
    (re.compile(r"\b(password|root_password|auth_token|api_key)\s*="), "a credential attribute"),
    (re.compile(r"SG\.[A-Za-z0-9_-]{16,}"), "a SendGrid API key"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "a 32-hex-digit token (Twilio auth token?)"),
    (re.compile(r"[A-Za-z0-9_-]{2,}:[A-Za-z0-9_-]{43}\b"), "a TOKEN_KEYS entry"),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a private key"),
]


@pytest.mark.parametrize("path", sorted(INFRA.glob("*.tf")) + sorted(INFRA.glob("*.example")), ids=lambda p: p.name)
def test_no_secret_value_in_infra(path: Path):
    text = path.read_text()
    for pattern, what in SECRET_LOOKING:
        found = pattern.search(text)
        assert not found, f"{path.name}: {what}: {found.group(0)!r}"


def test_the_secret_scan_catches_a_committed_value():
    leaked = 'resource "google_secret_manager_secret_version" "k" {\n  secret_data = "k1:' + "A" * 43 + '"\n}\n'
    assert sum(1 for pattern, _ in SECRET_LOOKING if pattern.search(leaked)) >= 2


def test_connection_budget_fits_the_database():
    """In every tier (infra/tiers.tf): its functions' instances x concurrency, its fan-out's and its
    nudged invocations, and the reserve fit max_connections; the plan refuses a budget that does not."""
    infra = load_infra()
    for tier, preset in infra.locals["tiers"].items():
        _, peak = deploy_docs.connections(infra, tier)
        assert peak + preset["db"]["reserved_connections"] <= preset["db"]["max_connections"], tier
    # The arithmetic holds only while one connection serves one request thread per worker.
    assert re.search(
        r"THREADS\s+= tostring\(local\.functions\[key\]\.concurrency\)", (INFRA / "services.tf").read_text()
    )
    assert infra.locals["common_env"]["WORKERS"] == "1"
    assert infra.locals["peak_connections"] == "${sum(values(local.connection_budget))}"
    # The fan-out's and the nudge's invocations are sources of their own, on instances of their own.
    budget = infra.locals["connection_budget"]
    assert 'dispatch_fanout = local.dispatch_max_parallel * local.functions["dispatch"].concurrency' in budget
    assert 'dispatch_nudge = local.nudge_parallel * local.functions["dispatch"].concurrency' in budget
    assert "local.dispatch_extra" in infra.locals["instance_limits"]
    service = infra.resource("google_cloud_run_v2_service", "function")
    scaling = first(first(service["template"])["scaling"])
    assert scaling["max_instance_count"] == "${local.instance_limits[each.key]}"
    instance = infra.resource("google_sql_database_instance", "main")
    precondition = first(first(instance["lifecycle"])["precondition"])
    assert (
        "local.peak_connections + local.db.reserved_connections <= local.db.max_connections"
        in precondition["condition"]
    )


def test_cloud_sql_is_connector_only_with_iam_auth_tls_backups_and_protection():
    instance = load_infra().resource("google_sql_database_instance", "main")
    assert instance["database_version"] == "POSTGRES_16"
    assert instance["deletion_protection"] is True
    settings = first(instance["settings"])
    assert settings["deletion_protection_enabled"] is True
    assert settings["connector_enforcement"] == "REQUIRED"
    ip = first(settings["ip_configuration"])
    assert "authorized_networks" not in ip
    assert ip["ssl_mode"] == "TRUSTED_CLIENT_CERTIFICATE_REQUIRED"
    backup = first(settings["backup_configuration"])
    assert backup["enabled"] is True and backup["point_in_time_recovery_enabled"] is True
    flags = {f["name"]: f["value"] for f in settings["database_flags"]}
    assert flags["cloudsql.iam_authentication"] == "on"
    assert flags["max_connections"] == "${tostring(local.db.max_connections)}"


def test_function_users_log_in_with_iam_and_hold_no_password():
    users = load_infra().resource("google_sql_user", "function")
    assert users["type"] == "CLOUD_IAM_SERVICE_ACCOUNT"
    assert "password" not in users and "password_wo" not in users
    # A service account's IAM database user is its email (ACCOUNT_ID@PROJECT.iam.gserviceaccount.com, as
    # Google assigns it) without ".gserviceaccount.com": written from account_id, so the plan knows it.
    assert users["name"] == "${google_service_account.function[each.key].account_id}@${var.project_id}.iam"
    migrator = load_infra().resource("google_sql_user", "migrator")
    assert migrator["name"] == "${google_service_account.migrator.account_id}@${var.project_id}.iam"


def test_every_variable_is_described():
    for name, body in load_infra().variables.items():
        assert len(body.get("description", "")) > 10, name


def test_every_checkov_skip_is_justified():
    skips = []
    for path in INFRA.glob("*.tf"):
        skips += re.findall(r"#checkov:skip=([A-Z0-9_]+)(?::(.*))?", path.read_text())
    assert skips, "no skips found: the parser or the files changed"
    for check, reason in skips:
        assert len((reason or "").strip()) >= 40, f"{check} is skipped without a reason"


def test_terraform_fmt_is_clean():
    terraform = shutil.which("terraform")
    if terraform is None:
        pytest.skip("terraform is not installed (formatting only; the other checks need no binary)")
    result = subprocess.run([terraform, "fmt", "-check", "-diff", str(INFRA)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def _checkov() -> str | None:
    for candidate in (
        os.environ.get("CHECKOV"),
        str(ROOT / ".local" / "tools" / "checkov" / "bin" / "checkov"),
        shutil.which("checkov"),
    ):
        if candidate and Path(candidate).exists():
            return candidate
    return None


@pytest.mark.slow
def test_checkov_passes():
    checkov = _checkov()
    if checkov is None:
        if os.environ.get("CI"):
            pytest.fail("checkov is missing: .ci/run installs it into .local/tools/checkov")
        pytest.skip("checkov is not installed (.ci/run installs it)")
    result = subprocess.run(
        [checkov, "-d", str(INFRA), "--framework", "terraform", "--compact", "--quiet", "--skip-download"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_metric_filters_match_the_signal_records_the_code_emits(db):
    """Every jsonPayload field a log-based metric reads is in signal_records.emit's records, of the type it compares."""
    import logging

    from signup_verification.operations import signal_records

    infra = load_infra()
    fields = {spec["field"] for spec in infra.locals["distributions"].values()}
    fields |= {f"attempts_{o}" for o in infra.locals["attempt_outcomes"]}
    conditions = [c["condition"] for c in infra.locals["condition_records"].values()]
    counted = dict(re.fullmatch(r"jsonPayload\.(\w+)(?:>=?|=)(\w+)", c).groups() for c in conditions)  # type: ignore[union-attr]
    assert len(counted) == len(conditions)
    assert re.findall(r'jsonPayload\.(\w+)=\\?"', infra.locals["signals_filter"]) == ["event", "deployment"]

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("test_infra.signals")
    logger.addHandler(Keep())
    logger.setLevel(logging.DEBUG)  # an idle channel's record is DEBUG; the metrics count it all the same
    signal_records.emit(db, "verify", logger, source="dispatch")
    payloads = [r.json_fields for r in records]
    assert {p["channel"] for p in payloads} == set(DELIVERY_CHANNELS)
    for payload in payloads:
        assert payload["event"] == "signals" and payload["deployment"] == "verify"
        for field in fields:
            assert field in payload, f"metric reads jsonPayload.{field}, signal_records.emit does not write it"
            assert payload[field] is None or isinstance(payload[field], (int, float)), field
        for field, value in counted.items():  # a counted condition tests a boolean or compares a number
            if field.startswith(("sms_", "voice_")) and payload["channel"] != field.split("_")[0]:
                continue  # the SMS budget is on the SMS record only, the call budget on the voice record
            assert field in payload, f"a metric counts jsonPayload.{field}, signal_records.emit does not write it"
            assert isinstance(payload[field], bool if value == "true" else (int, float)), field


def test_confirm_request_urls_with_tokens_are_kept_out_of_cloud_logging():
    """The link's token rides in the query string; Cloud Run's request log would store it."""
    infra = load_infra()
    [exclusion] = infra.resources("google_logging_project_exclusion").values()
    log_filter = exclusion["filter"]
    assert 'resource.type=\\"cloud_run_revision\\"' in log_filter or 'resource.type="cloud_run_revision"' in log_filter
    assert 'local.function_names["confirm"]' in log_filter
    assert "run.googleapis.com/requests" in log_filter
    assert infra.variables["exclude_confirm_request_logs"]["default"] is True
