"""docs/deploy.md and docs/capacity.md state what infra/ does (the functions, who calls them, which
secrets each reads, the scheduler jobs, the connection budget, the tier) in blocks rendered from the
parsed Terraform (support/deploy_docs.py), never typed by hand. tests/system/test_infra_plan.py
checks the same blocks against the real plan's outputs. The guide's smoke test ("5. Check it") runs
as written, with stand-ins of gcloud and terraform, against create and status served in production
mode: the caller checks a deployment makes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from signup_verification import runtime
from support.deploy_docs import DOCS, blocks, render_file
from support.markdown import code_blocks, section
from support.served import serve
from support.terraform_model import load_infra


@pytest.mark.parametrize("doc", ["deploy.md", "capacity.md"])
def test_the_generated_blocks_match_infra(doc):
    text = (DOCS / doc).read_text()
    assert blocks(text), f"{doc} has no generated block"
    assert render_file(text, load_infra()) == text, (
        f"docs/{doc} is stale: run .venv/bin/python tests/support/deploy_docs.py --write"
    )


def test_a_number_typed_into_a_block_is_caught():
    text = (DOCS / "deploy.md").read_text()
    edited = text.replace("= **84** connections", "= **75** connections")
    assert edited != text and render_file(edited, load_infra()) == text


def test_the_deploy_guide_names_every_function_job_and_secret_reader():
    functions = blocks((DOCS / "deploy.md").read_text())["functions"]
    infra = load_infra()
    for key, spec in infra.function_specs.items():
        assert f"`NAME-{key}` | `{spec['entry_point']}`" in functions
    assert functions.startswith(f"{len(infra.function_specs)} functions")
    assert f"{len(infra.locals['scheduler_jobs'])} Cloud Scheduler jobs" in functions
    reconcile = next(line for line in functions.splitlines() if line.startswith("| `NAME-reconcile`"))
    assert "`TWILIO_AUTH_TOKEN`" in reconcile


# ---- "5. Check it": the smoke test, run as written ----------------------------------------------

SITE = "verify-signup-site@signup-prod-1.iam.gserviceaccount.com"
OPERATOR = "oncall@corp.test"  # gcloud's own account: an operator of the status function

# Stand-ins for the two tools the smoke test calls. gcloud's identity tokens are what Google issues
# (unsigned here: Cloud Run checks the signature and passes the token on, support/auth.py): a
# user's carries its email; an impersonated service account's carries it only with --include-email
# (gcloud auth print-identity-token's reference), its `sub` being the account's numeric id.
FAKE_GCLOUD = """
import base64, json, sys, time
args = sys.argv[1:]
flags = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "") for a in args if a.startswith("--"))
assert args[:2] == ["auth", "print-identity-token"], args
part = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")
claims = {"iss": "https://accounts.google.com", "exp": time.time() + 3600, "iat": time.time()}
if "impersonate-service-account" in flags:
    claims.update(aud=flags.get("audiences", "32555940559.apps.googleusercontent.com"), sub="104857600000000000001")
    if "include-email" in flags:
        claims.update(email=flags["impersonate-service-account"], email_verified=True)
else:
    claims.update(aud="32555940559.apps.googleusercontent.com", sub="1099511627776", email=OPERATOR, email_verified=True)
print(part({"alg": "RS256", "typ": "JWT"}) + "." + part(claims) + ".")
"""
FAKE_TERRAFORM = """
import json, sys
args = [a for a in sys.argv[1:] if not a.startswith("-chdir=")]
outputs = json.loads(OUTPUTS)
name = args[-1]
print(outputs[name] if "-raw" in args else json.dumps(outputs[name]))
"""


def smoke_test_block() -> str:
    [block] = [body for info, body in code_blocks(section(DOCS / "deploy.md", "## 5. Check it")) if info == "sh"]
    return block


def run_smoke_test(block: str, urls: dict[str, str], tmp_path) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    outputs = {
        "create_url": urls["create_verification"],
        "signup_site_service_account": SITE,
        "function_urls": {"create": urls["create_verification"], "status": urls["status"]},
    }
    for tool, source in (
        ("gcloud", f"OPERATOR = {OPERATOR!r}\n" + FAKE_GCLOUD),
        ("terraform", f"OUTPUTS = {json.dumps(outputs)!r}\n" + FAKE_TERRAFORM),
    ):
        (bin_dir / tool).write_text(f"#!{sys.executable}\n{source}")
        (bin_dir / tool).chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def deployed_functions(service_env, monkeypatch):
    """create and status served as a deployment runs them: production, each caller checked against
    ALLOWED_INVOKERS (the signup site for create, the operators for status)."""
    monkeypatch.setenv("ENVIRONMENT", "production")
    monkeypatch.setenv("SMS_ALLOWED_COUNTRIES", "US")
    monkeypatch.setenv("ALLOWED_INVOKERS", f"{SITE},{OPERATOR}")
    runtime.reset()
    with serve("create_verification", "status") as urls:
        yield urls


def test_the_smoke_test_creates_a_verification_and_reads_the_status_as_written(deployed_functions, db, tmp_path):
    output = run_smoke_test(smoke_test_block(), deployed_functions, tmp_path)
    head, _, bodies = output.replace("\r\n", "\n").partition("\n\n")
    assert head.startswith("HTTP/1.1 201"), output[:600]  # curl -si: create's status line and headers
    created, end = json.JSONDecoder().raw_decode(bodies)
    status, _ = json.JSONDecoder().raw_decode(bodies[end:].lstrip())
    assert created["account_id"] == "smoke" and created["status"] == "pending"
    assert db.run("SELECT count(*) FROM verifications WHERE account_id = 'smoke'") == [[1]]
    assert "channels" in status  # the operator's token passed status's caller check too


def test_the_smoke_test_fails_with_a_token_that_names_no_email(deployed_functions, db, tmp_path):
    """What the check catches: the site's token minted without --include-email carries no email, and
    create refuses it (401) rather than trusting any Google identity."""
    block = smoke_test_block()
    assert "--include-email" in block
    output = run_smoke_test(block.replace(" --include-email", ""), deployed_functions, tmp_path)
    assert output.startswith("HTTP/1.1 401"), output[:600]
    assert db.run("SELECT count(*) FROM verifications") == [[0]]
