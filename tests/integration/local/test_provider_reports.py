"""The whole report path on the local stack, over real HTTP. The create and delivery_reports
targets served on loopback, the mailbox (SMTP + fake Twilio) posting signed SendGrid events and
Twilio status callbacks to delivery_reports, the dispatcher sending to it. With the sandbox's test
destinations (local/sandbox.py) and Twilio's magic test numbers, each outcome comes by itself."""

from __future__ import annotations

import base64
import dataclasses
import time
import uuid
from types import SimpleNamespace

import pytest
import requests
import urllib3
from cryptography.hazmat.primitives.asymmetric import ec

from signup_verification import cli, runtime
from signup_verification.local import provider_reports
from signup_verification.local.mailbox import MailboxServer
from signup_verification.operations.config import TwilioLookupConfig
from signup_verification.operations.reconciler import lookup_ambiguous_twilio
from signup_verification.operations.reconciler.runner import reconcile
from support.dev_process import free_ports
from support.dispatch import provider_settings, run_dispatch
from support.served import serve
from support.signup_requests import post_create, signup_body
from support.webhooks import events

SID, AUTH = "AC" + "2" * 32, "local-report-token"
WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"r" * 32).decode()


@pytest.fixture
def stack(service_env, db, tmp_path, monkeypatch):
    def start(sendgrid_key=None, twilio_token=AUTH, delay=60.0, **overrides):
        ports = free_ports()
        reports_url = f"http://127.0.0.1:{ports['base'] + 5}"
        key = provider_reports.development_sendgrid_key(tmp_path / "local")
        settings = {
            "DELIVERY_REPORTS_URL": reports_url,
            "SENDGRID_WEBHOOK_PUBLIC_KEY": provider_reports.public_key_setting(key),
            "TWILIO_AUTH_TOKEN": AUTH,
            "WEBHOOK_URL": "http://127.0.0.1:9/hooks",  # events are written; nothing delivers them here
            "WEBHOOK_SECRET": WEBHOOK_SECRET,
            "RATE_LIMIT_SPACING_SECONDS": "0",  # a second create to one address at once: not a 429
            "TWILIO_FROM": "+15005550006",  # Twilio's test sender, as `verifyctl dev` configures it
            "EMAIL_TRANSPORT": "smtp",  # as `verifyctl dev` runs every target: mail goes out over SMTP
        }
        for name, value in settings.items():
            monkeypatch.setenv(name, value)
        runtime.reset()
        served = serve("create_verification", "delivery_reports", ports={"delivery_reports": ports["base"] + 5})
        urls = served.__enter__()
        mailbox = MailboxServer(
            "127.0.0.1",
            ports["smtp"],
            ports["mailbox"],
            twilio_account_sid=SID,
            twilio_auth_token=AUTH,
            reports={  # the keys the mailbox signs with: a forger's, when given
                "sendgrid_url": reports_url + "/sendgrid",
                "sendgrid_key": sendgrid_key or key,
                "twilio_auth_token": twilio_token,
                "delay": delay,
            },
        ).start()
        cleanups.append(lambda: (mailbox.stop(), served.__exit__(None, None, None)))
        smtp = SimpleNamespace(host="127.0.0.1", port=ports["smtp"])
        twilio = SimpleNamespace(account_sid=SID, auth_token=AUTH, url=mailbox.web_url)
        config = provider_settings(smtp=smtp, twilio=twilio, delivery_reports_url=reports_url, **overrides)
        return SimpleNamespace(
            urls=urls, reports_url=reports_url, mailbox=mailbox, dispatch=lambda: run_dispatch(db, config)
        )

    cleanups: list = []
    yield start
    for cleanup in cleanups:
        cleanup()


def _create(stack, channel: str, destination: str) -> requests.Response:
    return post_create(stack.urls["create_verification"], signup_body(destination, channel=channel))


def _sent(stack, channel: str, destination: str):
    created = _create(stack, channel, destination)
    assert created.status_code == 201, created.text
    assert stack.dispatch().accepted == 1
    [message] = [m for m in stack.mailbox.mailbox.messages() if m.recipients == [destination]]
    return uuid.UUID(created.json()["verification_id"]), message


def _press(stack, message, button: str) -> None:
    pressed = requests.post(
        f"{stack.mailbox.web_url}/messages/{message.id}/{button}", timeout=30, allow_redirects=False
    )
    assert pressed.status_code == 303


def _wait_state(stack, message, state: str, timeout: float = 20):
    deadline = time.monotonic() + timeout
    while (current := stack.mailbox.mailbox.get(message.id)).delivery != state:
        assert time.monotonic() < deadline, (current.delivery, current.delivery_note)
        time.sleep(0.05)
    return current


def _intent(db, verification_id):
    return db.one(
        "SELECT id, status, delivered_at, undeliverable_reason FROM delivery_intents"
        " WHERE verification_id = :v AND role = 'primary'",
        v=verification_id,
    )


def test_an_email_shows_delivered_in_inspect_and_the_mailbox_after_its_sendgrid_event(stack, db, capsys):
    s = stack()
    vid, message = _sent(s, "email", "ada.delivered@example.com")
    assert message.delivery == "sent" and message.attempt_id  # pending: SendGrid reports later
    assert _intent(db, vid)["delivered_at"] is None
    _press(s, message, "report")
    shown = _wait_state(s, message, "delivered")
    assert shown.delivery_note == "SendGrid delivered: 200 received 1, stored 1, delivered 1"
    assert _intent(db, vid)["delivered_at"] is not None
    page = requests.get(f"{s.mailbox.web_url}/messages/{message.id}", timeout=30).text
    assert 'id="delivery-state" class="delivery delivered">delivered<' in page

    assert cli.main(["inspect", str(vid)]) == 0
    out = capsys.readouterr().out
    assert f"sendgrid says delivered for attempt {message.attempt_id}" in out


def test_bounce_this_makes_the_next_create_answer_422_and_writes_delivery_failed(stack, db):
    s = stack()
    vid, message = _sent(s, "email", "bob.bounces@example.com")
    _press(s, message, "bounce")
    shown = _wait_state(s, message, "bounced")
    assert shown.delivery_note == "SendGrid bounce: 200 received 1, stored 1, undeliverable 1, suppressed 1"
    intent = _intent(db, vid)
    assert intent["status"] == "failed" and intent["undeliverable_reason"].startswith("bounce")
    assert [e["event_type"] for e in events(db, vid)] == ["delivery.failed"]
    assert s.mailbox.reporter.pending(message.id) == []  # the delivered report it would have posted is withdrawn

    again = _create(s, "email", "bob.bounces@example.com")
    assert again.status_code == 422, again.text
    assert again.headers["Content-Type"].startswith("application/problem+json")
    assert _create(s, "email", "someone.else@example.com").status_code == 201


def test_an_sms_gets_queued_sent_delivered_callbacks_at_its_status_callback(stack, db):
    s = stack()
    vid, message = _sent(s, "sms", "+14155550123")
    # what our Twilio adapter sent: the attempt named in the URL
    assert message.status_callback == s.reports_url + f"/twilio?attempt={_intent(db, vid)['id']}:1"
    assert message.delivery == "accepted"
    _press(s, message, "report")
    _wait_state(s, message, "delivered")
    seen = db.rows("SELECT event FROM delivery_observations WHERE intent_id = :i ORDER BY id", i=_intent(db, vid)["id"])
    assert [r["event"] for r in seen] == ["queued", "sent", "delivered"]
    assert _intent(db, vid)["delivered_at"] is not None


def test_the_failing_test_number_ends_failed_undeliverable_and_suppressed(stack, db):
    s = stack()
    vid, message = _sent(s, "sms", "+12025550111")
    _press(s, message, "report")
    shown = _wait_state(s, message, "failed")
    assert shown.delivery_note == "Twilio failed: 200 received 1, stored 1, undeliverable 1, suppressed 1"
    assert _intent(db, vid)["undeliverable_reason"] == "failed invalid_destination code 30005"
    [delivery] = requests.get(s.urls["create_verification"] + str(vid), timeout=30).json()["deliveries"]
    assert delivery["reason"]["provider"] == "twilio" and delivery["reason"]["code"] == "30005"
    assert _create(s, "sms", "+12025550111").status_code == 422


def test_forged_reports_change_nothing(stack, db):
    s = stack(sendgrid_key=ec.generate_private_key(ec.SECP256R1()), twilio_token="not-the-auth-token")
    email_vid, email = _sent(s, "email", "eve.forged@example.com")
    _press(s, email, "bounce")
    assert _wait_state(s, email, "bounced").delivery_note == (
        "SendGrid bounce: refused 403 The report's signature is not valid"
    )
    sms_vid, sms = _sent(s, "sms", "+14155550124")
    _press(s, sms, "report")
    assert _wait_state(s, sms, "delivered").delivery_note == (
        "Twilio delivered: refused 403 The report's signature is not valid"
    )

    assert db.one("SELECT count(*) AS n FROM delivery_observations")["n"] == 0
    assert db.one("SELECT count(*) AS n FROM destination_suppressions")["n"] == 0
    for vid in (email_vid, sms_vid):
        intent = _intent(db, vid)
        assert (intent["status"], intent["delivered_at"], intent["undeliverable_reason"]) == ("accepted", None, None)
    assert events(db) == []
    assert _create(s, "email", "eve.forged@example.com").status_code == 201


def _lookup_config(twilio_url: str, settle_seconds: float = 120.0) -> TwilioLookupConfig:
    return TwilioLookupConfig(
        account_sid=SID, auth_token=AUTH, api_url=twilio_url, sms_transport="twilio", whatsapp_transport="twilio",
        voice_transport="twilio", sender="+15005550006", whatsapp_sender="whatsapp:+15005550006",
        min_interval_seconds=0.0, settle_seconds=settle_seconds,
    )  # fmt: skip


def _reconcile_with_lookup(db, twilio_url: str, settle_seconds: float):
    config = dataclasses.replace(
        provider_settings().reconciler, twilio_lookup=_lookup_config(twilio_url, settle_seconds)
    )
    return reconcile(db, config, emit_signals=False)


@pytest.mark.parametrize("channel", ["whatsapp", "voice"])
def test_the_mailbox_lists_whatsapp_messages_and_calls_as_the_lookup_asks(stack, db, channel):
    """The local Twilio's Messages and Calls list APIs, filtered by `To` and `From` as Twilio writes
    them: the lookup finds the WhatsApp message or the call just sent, and nothing of another channel."""
    s = stack()
    _, message = _sent(s, channel, "+14155550177")
    config = _lookup_config(s.mailbox.web_url)
    pool = urllib3.PoolManager()
    senders = config.senders()

    def found(on: str, to: str = "+14155550177") -> list[str]:
        listing = lookup_ambiguous_twilio.LISTINGS[on]
        return lookup_ambiguous_twilio.lookup(pool, config, listing, to, senders[on], message.received_at)

    assert found(channel) == [message.sid] and message.sid.startswith("CA" if channel == "voice" else "SM")
    assert found("whatsapp" if channel == "voice" else "voice") == [] and found("sms") == []
    assert found(channel, to="+14155550178") == []


@pytest.mark.parametrize(("number", "created"), [("+12025550150", True), ("+12025550151", False)])
def test_an_sms_answered_500_is_settled_by_the_next_reconcile_asking_the_mailbox(stack, db, number, created):
    """The done-when's SMS half on the local stack: the fake Twilio's 500 numbers make the send
    ambiguous; the reconciler's lookup (Messages list API) finds it -> accepted with its sid, or
    proves it absent -> retryable (settle time 0 here; 120 s by default)."""
    s = stack()
    created_answer = _create(s, "sms", number)
    assert created_answer.status_code == 201, created_answer.text
    assert s.dispatch().ambiguous == 1
    vid = uuid.UUID(created_answer.json()["verification_id"])
    listed = [m for m in s.mailbox.mailbox.messages() if m.recipients == [number]]
    assert len(listed) == (1 if created else 0)
    report = _reconcile_with_lookup(db, s.mailbox.web_url, settle_seconds=0)
    row = db.single(
        "SELECT status, provider_ref FROM delivery_intents WHERE verification_id = :v AND role = 'primary'", v=vid
    )
    if created:
        assert report.moves["ambiguous_lookup_to_accepted"] == 1
        assert row == {"status": "accepted", "provider_ref": listed[0].sid}
    else:
        assert report.moves["ambiguous_lookup_to_retryable"] == 1 and row["status"] == "retryable"


# -- the sandbox: each outcome from the destination alone ------------------------------------------------
def _failure(db, verification_id) -> tuple[str, str, str | None, str | None]:
    row = db.one(
        "SELECT status, failure_category, failure_code, failure_fault FROM delivery_intents"
        " WHERE verification_id = :v AND role = 'primary'",
        v=verification_id,
    )
    return row["status"], row["failure_category"], row["failure_code"], row["failure_fault"]


def test_sandbox_addresses_bounce_and_report_spam_by_themselves(stack, db):
    s = stack(delay=0.1)
    bounced, message = _sent(s, "email", "bounce+signup-1@example.com")
    _wait_state(s, message, "bounced")
    assert _failure(db, bounced) == ("failed", "bounced", "5.1.1", "recipient")
    # The mail went out over SMTP: its reason names smtp, as a refusal at send time would, though the
    # report came in SendGrid's format (the provider its SMTP relay reports through).
    read = requests.get(s.urls["create_verification"] + str(bounced), timeout=30).json()
    [delivery] = read["deliveries"]
    assert delivery["reason"] == {"category": "bounced", "code": "5.1.1", "provider": "smtp", "fault": "recipient"}
    assert _create(s, "email", "bounce+signup-1@example.com").status_code == 422  # suppressed, that exact address
    _sent(s, "email", "bounce+signup-2@example.com")  # a fresh one for the next test is accepted

    spam, message = _sent(s, "email", "spam+signup-1@example.com")
    _wait_state(s, message, "spam reported")
    # delivered, and it stays so: a spam report is not a failure, it suppresses the address
    assert _failure(db, spam) == ("accepted", None, None, None) and _intent(db, spam)["delivered_at"] is not None
    [entry] = db.rows("SELECT category FROM destination_suppressions WHERE category = 'spam_reported'")
    refused = _create(s, "email", "spam+signup-1@example.com")
    assert refused.status_code == 422 and refused.json()["type"].endswith("/destination-suppressed")


def test_sandbox_slow_providers_answer_late_and_the_send_still_succeeds(stack, db):
    from signup_verification.local.sandbox import SLOW_SECONDS

    s = stack(send_timeout_seconds=SLOW_SECONDS + 3)  # within the timeout: slow, not ambiguous
    for channel, destination in (("email", "slow+1@example.com"), ("sms", "+12025550160")):
        started = time.monotonic()
        vid, _ = _sent(s, channel, destination)
        assert time.monotonic() - started >= SLOW_SECONDS
        assert _intent(db, vid)["status"] == "accepted"


@pytest.mark.parametrize(
    "number, category, code",
    [("+15005550001", "invalid_destination", "21211"), ("+15005550009", "not_mobile", "21614"),
     ("+15005550003", "region_not_permitted", "21408")],
)  # fmt: skip
def test_twilio_magic_numbers_are_accepted_on_test_credentials_and_fail_as_documented(
    stack, db, number, category, code
):
    s = stack()
    created = _create(s, "sms", number)
    assert created.status_code == 201, created.text  # TWILIO_FROM is Twilio's test sender
    assert s.dispatch().failed == 1
    status, found_category, found_code, _ = _failure(db, uuid.UUID(created.json()["verification_id"]))
    assert (status, found_category, found_code) == ("failed", category, code)
