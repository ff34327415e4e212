"""clients/python against the real service (functions-framework apps over loopback
HTTP, a real PostgreSQL): create with a kept Idempotency-Key and retries, typed errors, get, confirm
a code, both caller identities, and webhook verification through the standardwebhooks library."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import signup_verification_client as svc
from standardwebhooks import Webhook

from signup_verification import runtime
from support.auth import cloud_run_identity
from support.client_calls import fresh_email, no_sleep
from support.paths import ROOT
from support.policy import sent
from support.served import serve

SECRET = b"c" * 32
SIGNING_KEY = "site1:" + base64.urlsafe_b64encode(SECRET).decode().rstrip("=")


@pytest.fixture
def urls(service_env):
    with serve("create_verification", "confirm_verification") as served:
        yield served


@pytest.fixture
def client(urls):
    return svc.Client(urls["create_verification"], urls["confirm_verification"], sleep=no_sleep)


def _count(db) -> int:
    return db.run("SELECT count(*) FROM verifications")[0][0]


def test_create_then_get_reads_the_verification_back(client, db):
    created = client.create("acct-1", "email", fresh_email(), locale="ja")
    assert created.status == "pending" and not created.replayed and uuid.UUID(created.idempotency_key)
    state = client.get(created.verification_id)
    assert (state.status, state.account_id, state.channel) == ("pending", "acct-1", "email")
    assert state.destination.startswith("a***@") and not state.is_verified
    assert [(d.channel, d.role, d.status) for d in state.deliveries] == [("email", "primary", "ready")]


def test_the_kept_key_replays_instead_of_creating_twice(client, db):
    destination = fresh_email()
    first = client.create("acct-2", "email", destination)
    replay = client.create("acct-2", "email", destination, idempotency_key=first.idempotency_key)
    assert replay.replayed and replay.verification_id == first.verification_id and _count(db) == 1


def test_typed_errors_from_problem_json(client, db):
    with pytest.raises(svc.InvalidRequest) as bad:
        client.create("acct-3", "email", "not an address")
    assert [e["pointer"] for e in bad.value.errors] == ["#/destination"]
    first = client.create("acct-3", "email", fresh_email())
    with pytest.raises(svc.IdempotencyKeyReused):
        client.create("acct-3", "email", fresh_email(), idempotency_key=first.idempotency_key)
    with pytest.raises(svc.NotFound):
        client.get(str(uuid.uuid4()))
    with pytest.raises(svc.InvalidRequest):
        client.create("acct-3", "email", fresh_email(), return_url="https://evil.example/")  # no allowed origin
    assert _count(db) == 1


def test_a_429_is_raised_at_once_with_its_retry_after(client, db):
    destination = fresh_email()
    client.create("acct-4", "email", destination)
    with pytest.raises(svc.RateLimited) as limited:
        client.create("acct-5", "email", destination)  # within RATE_LIMIT_SPACING_SECONDS (60)
    assert limited.value.retry_after and 0 < limited.value.retry_after <= 60 and _count(db) == 1
    assert limited.value.idempotency_key


def test_a_503_is_retried_after_its_retry_after_with_the_same_key(urls, db, monkeypatch):
    database_url = os.environ["DATABASE_URL"]
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/nothing")
    runtime.reset()
    waits: list[float] = []

    def database_back(seconds: float) -> None:  # the wait the client honours: the database returns meanwhile
        waits.append(seconds)
        monkeypatch.setenv("DATABASE_URL", database_url)
        runtime.reset()

    client = svc.Client(urls["create_verification"], max_retry_wait=5, sleep=database_back)
    created = client.create("acct-6", "email", fresh_email())
    assert waits == [5.0] and created.status == "pending" and not created.replayed
    assert db.run("SELECT count(*) FROM idempotency_keys WHERE key = :k", k=created.idempotency_key)[0][0] == 1


def test_retries_are_bounded(urls, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/nothing")
    runtime.reset()
    waits: list[float] = []
    client = svc.Client(urls["create_verification"], max_attempts=3, max_retry_wait=5, sleep=waits.append)
    with pytest.raises(svc.Unavailable) as unavailable:
        client.create("acct-7", "email", fresh_email())
    assert waits == [5.0, 5.0] and unavailable.value.retry_after == 5


def test_by_default_a_request_handler_is_never_held_by_a_long_retry_after(urls, monkeypatch):
    """The service's 503 asks for 5 s: more than the default bound (2 s), so the error comes at once,
    with the key and the wait, for the site to retry later (a background job, the user's next try)."""
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/nothing")
    runtime.reset()
    waits: list[float] = []
    with pytest.raises(svc.Unavailable) as unavailable:
        svc.Client(urls["create_verification"], sleep=waits.append).create("acct-7b", "email", fresh_email())
    assert waits == [] and unavailable.value.retry_after == 5 and unavailable.value.idempotency_key


def test_confirm_a_code_wrong_then_right(client, db):
    created = client.create("acct-8", "sms", "+14155550142")
    sent(db, uuid.UUID(created.verification_id), "sms")
    row = db.one("SELECT * FROM verifications WHERE id = :id", id=uuid.UUID(created.verification_id))
    key = runtime.get_runtime().keyring.get(row["key_id"])
    code = key.sms_code(row["id"], bytes(row["token_nonce"]), 6)
    wrong = "000000" if code != "000000" else "111111"
    assert client.get(created.verification_id).code_entry_url == created.code_entry_url  # the page asks for it
    with pytest.raises(svc.CodeIncorrect) as incorrect:
        client.confirm_code(created.verification_id, wrong)
    assert incorrect.value.remaining_attempts == 4
    confirmed = client.confirm_code(created.verification_id, code)
    assert confirmed.verification_id == created.verification_id and not confirmed.already_verified
    assert confirmed.proof == svc.Proof("sms", "code", "+1******0142", confirmed.verified_at)
    assert confirmed.channel == "sms" and confirmed.proofs == (confirmed.proof,)
    assert client.confirm_code(created.verification_id, code).already_verified
    state = client.get(created.verification_id)
    assert state.is_verified and state.proofs == confirmed.proofs and state.proved("sms")
    assert state.code_entry_url is None and created.code_entry_url.startswith("http")  # nothing left to type


def test_signed_requests_for_create_and_get(urls, monkeypatch):
    monkeypatch.setenv("REQUEST_SIGNING_KEYS", SIGNING_KEY)
    runtime.reset()
    unsigned = svc.Client(urls["create_verification"])
    with pytest.raises(svc.Unauthenticated):
        unsigned.create("acct-9", "email", fresh_email())
    signed = svc.Client(urls["create_verification"], auth=svc.SignedRequests.from_key(SIGNING_KEY))
    created = signed.create("acct-9", "email", fresh_email())
    assert signed.get(created.verification_id).status == "pending"
    with pytest.raises(svc.Unauthenticated):
        unsigned.get(created.verification_id)
    wrong_key = svc.Client(urls["create_verification"], auth=svc.SignedRequests(b"w" * 32))
    with pytest.raises(svc.Unauthenticated):
        wrong_key.get(created.verification_id)


def test_a_google_id_token_in_production(urls, monkeypatch):
    monkeypatch.setenv("ENVIRONMENT", "production")
    monkeypatch.setenv("SMS_ALLOWED_COUNTRIES", "US")
    monkeypatch.setenv("ALLOWED_INVOKERS", "site@p.iam.gserviceaccount.com")
    runtime.reset()
    audiences: list[str] = []

    def fetch(audience: str) -> str:  # what the metadata server would mint (Cloud Run strips the signature)
        audiences.append(audience)
        return cloud_run_identity("site@p.iam.gserviceaccount.com").removeprefix("Bearer ")

    create_url = urls["create_verification"]
    client = svc.Client(create_url, auth=svc.GoogleIdToken(create_url, fetch=fetch))
    created = client.create("acct-10", "email", fresh_email())
    assert client.get(created.verification_id).status == "pending"
    assert audiences == [create_url]  # fetched once, cached until shortly before its expiry
    with pytest.raises(svc.Unauthenticated):
        svc.Client(create_url).create("acct-10", "email", fresh_email())


def test_google_id_tokens_come_from_google_auth(monkeypatch):
    import google.oauth2.id_token

    seen = []
    monkeypatch.setattr(
        google.oauth2.id_token, "fetch_id_token", lambda request, audience: seen.append(audience) or "h.e30.s"
    )
    headers = svc.GoogleIdToken("https://create.example.run.app/").headers("POST", "create_verification", "k", b"{}")
    assert headers == {"Authorization": "Bearer h.e30.s"} and seen == ["https://create.example.run.app/"]


# -- webhooks -------------------------------------------------------------------------------------
OLD, NEW = "whsec_" + base64.b64encode(b"o" * 24).decode(), "whsec_" + base64.b64encode(b"n" * 24).decode()


def _signed_event(secrets: list[str], body: bytes, at: datetime | None = None, msg_id: str = "evt_1") -> dict[str, str]:
    at = at or datetime.now(UTC)
    signatures = " ".join(Webhook(s).sign(msg_id, at, body.decode()) for s in secrets)
    return {"Webhook-Id": msg_id, "Webhook-Timestamp": str(int(at.timestamp())), "Webhook-Signature": signatures}


EVENT = json.dumps(
    {
        "type": "verification.verified",
        "timestamp": "2026-12-01T12:00:00Z",
        "data": {"verification_id": "v1", "status": "verified"},
    }
).encode()


def test_a_webhook_signed_by_the_standard_library_verifies():
    event = svc.verify_webhook(EVENT, _signed_event([NEW], EVENT), NEW)
    assert (event.id, event.type, event.data["status"]) == ("evt_1", "verification.verified", "verified")


def test_rotation_any_configured_secret_and_any_signature():
    headers = _signed_event([OLD, NEW], EVENT)  # the sender signs with both during a rotation
    assert svc.verify_webhook(EVENT, headers, NEW).id == "evt_1"
    assert svc.verify_webhook(EVENT, _signed_event([OLD], EVENT), f"{NEW},{OLD}").type == "verification.verified"


@pytest.mark.parametrize(
    "tamper",
    [
        lambda h, b: (h, b.replace(b"verified", b"expired")),
        lambda h, b: ({**h, "Webhook-Id": "evt_2"}, b),
        lambda h, b: ({k: v for k, v in h.items() if k != "Webhook-Signature"}, b),
        lambda h, b: ({**h, "Webhook-Signature": "v1,%%%"}, b),
        lambda h, b: ({**h, "Webhook-Signature": "garbage"}, b),
    ],
)
def test_a_tampered_or_malformed_webhook_is_refused(tamper):
    headers, body = tamper(_signed_event([NEW], EVENT), EVENT)
    with pytest.raises(svc.InvalidWebhook):
        svc.verify_webhook(body, headers, NEW)


def test_a_stale_webhook_or_a_foreign_secret_is_refused():
    with pytest.raises(svc.InvalidWebhook):
        svc.verify_webhook(EVENT, _signed_event([NEW], EVENT, at=datetime.now(UTC) - timedelta(minutes=10)), NEW)
    with pytest.raises(svc.InvalidWebhook):
        svc.verify_webhook(EVENT, _signed_event([OLD], EVENT), NEW)


def test_the_client_imports_without_the_service_or_its_drivers():
    """A separate distribution: importing it must not need signup_verification, pg8000 or Flask."""
    blocker = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('signup_verification', 'pg8000', 'flask', 'functions_framework'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import signup_verification_client as c\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pg8000', 'flask', 'signup_verification')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", blocker], capture_output=True, text=True, cwd=ROOT / "clients" / "python", timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_429_is_never_waited_out_so_no_second_message_follows(urls, db, monkeypatch):
    """Waiting out a 429 and creating again is what sent a second email: the limit said this address
    just got one. The client raises at once, whatever the wait, and nothing is created afterwards."""
    monkeypatch.setenv("RATE_LIMIT_SPACING_SECONDS", "1")
    runtime.reset()
    waits: list[float] = []
    client = svc.Client(urls["create_verification"], sleep=waits.append)
    destination = fresh_email()
    client.create("acct-11", "email", destination)
    started = time.monotonic()
    with pytest.raises(svc.RateLimited) as limited:
        client.create("acct-12", "email", destination)  # within the 1 s spacing: 429, Retry-After 1
    assert limited.value.retry_after == 1 and waits == [] and time.monotonic() - started < 1
    time.sleep(1.2)  # the spacing is over: still only the first verification exists
    assert _count(db) == 1
