"""A verification with a WhatsApp or voice step, dispatched through the real worker to the fake
Twilio, then Twilio's callbacks (as the fake writes them) through the delivery_reports target: a
final failure of the step brings the next one forward, a machine's answer ends the call, a
person's answer is delivered."""

from __future__ import annotations

import uuid

import pytest

from support.dispatch import provider_settings, run_dispatch
from support.fakes.twilio import FakeTwilio
from support.fakes.twilio_callbacks import post_callbacks
from support.reports import REPORTS_URL, reports_env
from support.signup_requests import post_create

MOBILE = "+14155550100"


@pytest.fixture
def twilio():
    with FakeTwilio(auth_token="twilio-report-token") as fake:  # nosec B106: the test's token
        yield fake


@pytest.fixture
def apps(configured_app, twilio):
    env = reports_env(TWILIO_ACCOUNT_SID=twilio.account_sid, TWILIO_API_URL=twilio.url, RATE_LIMIT_SPACING_SECONDS="0")
    create = configured_app("create_verification", **env)
    return create, configured_app("delivery_reports", **env)


def _steps(db, create, channel: str) -> uuid.UUID:
    steps = [{"channel": channel, "destination": MOBILE}, {"channel": "email", "destination": "ada@example.com",
                                                           "after_seconds": 300}]  # fmt: skip
    response = post_create(create, {"account_id": "acct-1", "steps": steps}, f"k-{channel}")
    assert response.status_code == 201, response.get_data(as_text=True)
    return uuid.UUID(response.get_json()["verification_id"])


def _intents(db, vid) -> dict[str, dict]:
    rows = db.rows("SELECT * FROM delivery_intents WHERE verification_id = :v AND role <> 'event'", v=vid)
    return {r["channel"]: r for r in rows}


@pytest.mark.parametrize(
    "channel, outcome, delivered",
    [("voice", "human", True), ("voice", "machine", False), ("voice", "busy", False),
     ("voice", "no-answer", False), ("whatsapp", "delivered", True), ("whatsapp", "undelivered:63003", False)],
)  # fmt: skip
def test_a_phone_step_reported_by_twilio(db, apps, twilio, channel, outcome, delivered):
    create, reports = apps
    vid = _steps(db, create, channel)
    settings = provider_settings(twilio=twilio, delivery_reports_url=REPORTS_URL)
    assert run_dispatch(db, settings).accepted == 1
    [sent] = twilio.deliveries
    callback = sent.request["StatusCallback"]  # names the attempt: Twilio signs it, query and all
    assert callback.startswith(REPORTS_URL + "/twilio?attempt=")
    step = _intents(db, vid)[channel]
    ref = db.run("SELECT provider_ref FROM delivery_attempts WHERE intent_id = :i AND outcome = 'accepted'",
                 i=step["id"])[0][0]  # fmt: skip

    def send(body, headers):
        return reports.post(callback.removeprefix(REPORTS_URL), data=body, headers=headers).status_code

    assert set(post_callbacks(twilio, callback, ref, sent.destination, send, outcome)) == {200}
    rows = _intents(db, vid)
    assert (rows[channel]["delivered_at"] is not None) is delivered
    assert (rows["email"]["brought_forward_at"] is not None) is not delivered
    ended = [e for e in twilio.exchanges if "/Calls/" in e.path and e.status == 200]
    assert len(ended) == (1 if outcome == "machine" else 0)
    if not delivered:  # the next step goes out now, not in 300 s
        run_dispatch(db, settings)
        assert _intents(db, vid)["email"]["status"] == "accepted"
