"""clients/typescript against the real service: the functions served over loopback HTTP on this test's
database (support/served.py), in each caller-identity mode the package supports, then `npm test`
(Node's own test runner) with their URLs in the environment; any Node test that fails fails here.
Also: the committed src/openapi.ts is what openapi-typescript makes of docs/openapi.yaml now.

Beside the functions runs a test-only harness for what the Python tests do in process: read an SMS
code or a link token from the database (as the worker derives them), count rows, and make the
database unreachable and back. Without node, npm or clients/typescript/node_modules (`npm ci`) the
tests skip, and under CI=true they fail."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from werkzeug.routing import Map, Rule
from werkzeug.serving import make_server
from werkzeug.wrappers import Response

from signup_verification import runtime
from support.dev_process import free_ports
from support.fakes.smtp import FakeSmtpServer, SmtpBehaviour
from support.fakes.twilio import FakeTwilio
from support.fakes.webhooks import new_secret
from support.policy import sent
from support.served import serve
from support.typescript_client import PACKAGE, node_test_command, npm, run_npm
from support.webhooks import link_token, sms_code

SIGNING_KEY = "site1:" + base64.urlsafe_b64encode(b"t" * 32).decode().rstrip("=")
INVOKER = "site@p.iam.gserviceaccount.com"
RETURN_ORIGIN = "http://localhost:3000"
SUMMARY = re.compile(r"^(?:# |ℹ )(tests|pass|fail|cancelled|skipped|todo) (\d+)$", re.M)


# -- the harness --------------------------------------------------------------------------------------
class Harness:
    """Test-only reads and switches over HTTP (never part of the service)."""

    def __init__(self, db, monkeypatch: pytest.MonkeyPatch):
        self.db, self.monkeypatch = db, monkeypatch
        self.database_url = os.environ["DATABASE_URL"]
        self.routes = Map(
            [
                Rule("/sms-code/<uuid:vid>", endpoint=self._sms_code),
                Rule("/link-token/<uuid:vid>", endpoint=lambda vid: {"token": link_token(self.db, vid)}),
                Rule("/verifications/count", endpoint=lambda: {"count": self._count("verifications", "true")}),
                Rule(
                    "/idempotency-keys/<key>/count",
                    endpoint=lambda key: {"count": self._count("idempotency_keys", "key = :k", k=key)},
                ),
                Rule("/database/down", endpoint=lambda: self._database("postgresql://nobody@127.0.0.1:1/nothing")),
                Rule("/database/up", endpoint=lambda: self._database(self.database_url)),
            ]
        )

    def _sms_code(self, vid: uuid.UUID) -> dict:
        """The code as its person gets it: the SMS sent first (a code proves only once its step was sent)."""
        sent(self.db, vid, "sms")
        return {"code": sms_code(self.db, vid)}

    def _count(self, table: str, where: str, **params) -> int:
        return self.db.run(f"SELECT count(*) FROM {table} WHERE {where}", **params)[0][0]  # noqa: S608 - fixed names

    def _database(self, url: str) -> dict:
        self.monkeypatch.setenv("DATABASE_URL", url)  # the served functions read it at their next request
        runtime.reset()
        return {}

    def __call__(self, environ, start_response):
        try:
            endpoint, arguments = self.routes.bind_to_environ(environ).match()
            answer = Response(json.dumps(endpoint(**arguments)), mimetype="application/json")
        except Exception as exc:  # a harness failure must reach the Node test as an answer, not a hang
            answer = Response(json.dumps({"error": repr(exc)}), status=getattr(exc, "code", 500) or 500)
        return answer(environ, start_response)


@contextmanager
def served_harness(harness: Harness) -> Iterator[str]:
    server = make_server("127.0.0.1", 0, harness, threaded=True)
    threading.Thread(target=server.serve_forever, args=(0.02,), name="ts-harness", daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


# -- the modes ----------------------------------------------------------------------------------------
@contextmanager
def open_service(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The local emulation: no caller identity; real SMTP and Twilio stand-ins for the dispatcher
    (an address starting `ada.bounce.` is refused 550 5.1.1); webhooks to a port the Node test listens on."""
    webhook_port = free_ports()["base"]
    secret = new_secret()
    with FakeSmtpServer() as smtp, FakeTwilio() as twilio:
        smtp.behaviour = SmtpBehaviour(
            rcpt_reply=lambda address: "550 5.1.1 no such user" if address.startswith("ada.bounce.") else None
        )
        settings = {
            "RATE_LIMIT_SPACING_SECONDS": "1",
            "RETURN_URL_ALLOWED_ORIGINS": RETURN_ORIGIN,
            "EMAIL_TRANSPORT": "smtp",
            "SMTP_HOST": smtp.host,
            "SMTP_PORT": str(smtp.port),
            "EMAIL_FROM": "Signup <no-reply@example.org>",
            "SMS_TRANSPORT": "twilio",
            "TWILIO_ACCOUNT_SID": twilio.account_sid,
            "TWILIO_AUTH_TOKEN": twilio.auth_token,
            "TWILIO_FROM": "+15005550006",
            "TWILIO_API_URL": twilio.url,
            "WEBHOOK_URL": f"http://127.0.0.1:{webhook_port}/hooks",
            "WEBHOOK_SECRET": secret,
            "SEND_TIMEOUT_SECONDS": "5",
        }
        for name, value in settings.items():
            monkeypatch.setenv(name, value)
        runtime.reset()
        with serve("create_verification", "confirm_verification", "dispatch") as urls:
            yield {
                "SVC_CREATE_URL": urls["create_verification"],
                "SVC_CONFIRM_URL": urls["confirm_verification"],
                "SVC_DISPATCH_URL": urls["dispatch"],
                "SVC_RETURN_URL": RETURN_ORIGIN + "/welcome",
                "SVC_WEBHOOK_PORT": str(webhook_port),
                "SVC_WEBHOOK_SECRET": secret,
            }


@contextmanager
def signed_service(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    monkeypatch.setenv("REQUEST_SIGNING_KEYS", SIGNING_KEY)
    runtime.reset()
    with serve("create_verification") as urls:
        yield {"SVC_CREATE_URL": urls["create_verification"], "SVC_SIGNING_KEY": SIGNING_KEY}


@contextmanager
def production_service(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    for name, value in {
        "ENVIRONMENT": "production",
        "SMS_ALLOWED_COUNTRIES": "US",
        "ALLOWED_INVOKERS": INVOKER,
    }.items():
        monkeypatch.setenv(name, value)
    runtime.reset()
    with serve("create_verification") as urls:
        yield {"SVC_CREATE_URL": urls["create_verification"], "SVC_INVOKER": INVOKER}


MODES = {"open": open_service, "signed": signed_service, "production": production_service}


def _summary(output: str) -> dict[str, int]:
    """The runner's closing counts (TAP `# pass 3` or the spec reporter's `ℹ pass 3`)."""
    return {name: int(value) for name, value in SUMMARY.findall(output)}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_typescript_client_against_the_service(mode, service_env, db, monkeypatch, typescript_client_built):
    """`npm test`'s Node runner on the session's build (support/typescript_client.py)."""
    with MODES[mode](monkeypatch) as urls, served_harness(Harness(db, monkeypatch)) as harness_url:
        result = subprocess.run(
            node_test_command(),
            cwd=PACKAGE,
            env={**os.environ, "SVC_MODE": mode, "SVC_HARNESS_URL": harness_url, **urls, "NO_COLOR": "1"},
            capture_output=True,
            text=True,
            timeout=300,
        )
    output = result.stdout + result.stderr
    counts = _summary(output)
    failed = [line for line in output.splitlines() if line.startswith("not ok")]
    assert result.returncode == 0 and counts.get("fail") == 0, f"npm test ({mode}) failed: {failed}\n{output[-6000:]}"
    assert counts.get("pass", 0) >= 3 and counts.get("cancelled", 0) == 0, output[-3000:]


def test_the_generated_types_match_docs_openapi_yaml():
    result = run_npm("run", "--silent", "check:openapi")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_package_declares_only_standardwebhooks_at_run_time():
    package = json.loads((PACKAGE / "package.json").read_text())
    assert set(package["dependencies"]) == {"standardwebhooks"}
    assert package["peerDependenciesMeta"]["google-auth-library"]["optional"] is True
    assert package["type"] == "module" and package["engines"]["node"] == ">=20"
    lock = json.loads((PACKAGE / "package-lock.json").read_text())
    assert lock["packages"][""]["dependencies"] == package["dependencies"]


CONSUMER = """
import { Client, GoogleIdToken, InvalidWebhook, verifyWebhook } from "signup-verification-client";
const seen = {};
try { verifyWebhook("{}", {}, "whsec_" + Buffer.alloc(24).toString("base64")); } catch (e) { seen.webhook = e instanceof InvalidWebhook; }
try { await new GoogleIdToken("https://create.example.run.app/").headers(); } catch (e) { seen.google = e.message; }
try { await new Client({ createUrl: "http://127.0.0.1:9/", maxAttempts: 1 }).create("a", "email", "a@example.com", { idempotencyKey: "k1" }); }
catch (e) { seen.create = [e.name, e.slug, e.idempotencyKey]; }
console.log(JSON.stringify(seen));
"""


def test_the_packed_package_installs_and_runs_with_standardwebhooks_alone(tmp_path, typescript_client_tarball):
    """What a site installs: `npm pack`'s tarball (built by prepack), in a project of its own, pulls
    in standardwebhooks and nothing else; without google-auth-library only GoogleIdToken says so."""
    tarball = typescript_client_tarball
    site = tmp_path / "site"
    site.mkdir()
    (site / "package.json").write_text(json.dumps({"name": "site", "private": True, "type": "module"}))
    (site / "main.mjs").write_text(CONSUMER)
    npm_path = npm()
    install = [npm_path, "install", "--prefer-offline", "--no-audit", "--no-fund", str(tarball)]
    installed = subprocess.run(install, cwd=site, capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    installed_names = {p.name for p in (site / "node_modules").iterdir() if not p.name.startswith(".")}
    assert {"signup-verification-client", "standardwebhooks"} <= installed_names
    development = set(json.loads((PACKAGE / "package.json").read_text())["devDependencies"])
    assert not installed_names & {name.split("/")[0] for name in development}, installed_names
    ran = subprocess.run(["node", "main.mjs"], cwd=site, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {
        "webhook": True,
        "google": "GoogleIdToken needs google-auth-library: npm install google-auth-library",
        "create": ["Unavailable", "unreachable", "k1"],
    }
