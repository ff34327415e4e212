"""Shared set-up for the dispatcher tests: a config pointing at the local fake providers."""

from __future__ import annotations

import json
import os
import time

from signup_verification.config import Config
from signup_verification.delivery.batch_sizing import LatencyEstimator
from signup_verification.delivery.channels import build_channels
from signup_verification.operations.dispatcher import Dispatcher, DispatchReport, DispatchRun
from signup_verification.verifications.tokens import Keyring
from support.config import make_config
from support.fakes.twilio import whatsapp_contents
from support.paths import TEST_TOKEN_KEYS

KEYRING = Keyring.parse(TEST_TOKEN_KEYS)


def provider_settings(smtp=None, twilio=None, **overrides) -> Config:
    """The whole config (names as the variables', lower-cased): dispatch, channels, create, retry."""
    settings: dict = dict(
        deployment="test",
        token_keys=TEST_TOKEN_KEYS,
        email_from="Signup <no-reply@example.org>",
        verify_link_base="https://app.example.org/confirm",
        rate_limit_per_hour=10_000,
        rate_limit_spacing_seconds=0,
        function_timeout_seconds=30,
        send_timeout_seconds=2.0,
        send_concurrency=4,
    )
    if smtp is not None:
        settings.update(email_transport="smtp", smtp_host=smtp.host, smtp_port=smtp.port)
    if twilio is not None:
        settings.update(
            sms_transport="twilio",
            twilio_account_sid=twilio.account_sid,
            twilio_auth_token=twilio.auth_token,
            twilio_from="+15005550006",
            twilio_api_url=twilio.url,
            # the fake is no real long code: its sends are not paced at one per second (a test of pacing sets it)
            twilio_sender_mps=1000,
            # WhatsApp and calls through the same fake: its approved templates, calls from TWILIO_FROM
            whatsapp_transport="twilio",
            twilio_whatsapp_from="whatsapp:+15005550006",
            twilio_whatsapp_content_sids=",".join(f"{k}:{v}" for k, v in whatsapp_contents().items()),
            voice_transport="twilio",
            voice_calls_per_second=1000,
        )
    return make_config(**{**settings, **overrides})


def run_dispatch(
    db, config: Config, *, channels=None, dispatcher_class=Dispatcher, estimator=None, **run
) -> DispatchReport:
    """The pipeline alone (no heartbeat nor signals records); `run`: the rest of its DispatchRun
    (stop, invocation, tasks, fault)."""
    channels = channels or build_channels(config.channels)
    try:
        return dispatcher_class(DispatchRun(db, config.dispatch, KEYRING, channels, **run), estimator=estimator).run()
    finally:
        for channel in channels.values():
            channel.close()


def intent(db, intent_id: int) -> dict:
    return db.one("SELECT * FROM delivery_intents WHERE id = :id", id=intent_id)


def attempts(db, intent_id: int) -> list[tuple[str, str, str | None]]:
    rows = db.run(
        "SELECT attempt_id, outcome, error_class FROM delivery_attempts WHERE intent_id = :id ORDER BY id", id=intent_id
    )
    return [tuple(r) for r in rows]


def worker_env(database_url, smtp, twilio, tmp_path, **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DISPATCH_", "EMAIL_", "SMS_"))}
    env.update(
        {
            "DATABASE_URL": database_url,
            "TOKEN_KEYS": TEST_TOKEN_KEYS,
            "DEPLOYMENT": "crash",
            "VERIFY_LOCAL_DIR": str(tmp_path / "local"),
            "EMAIL_TRANSPORT": "smtp",
            "SMTP_HOST": smtp.host,
            "SMTP_PORT": str(smtp.port),
            "SMS_TRANSPORT": "twilio",
            "TWILIO_ACCOUNT_SID": twilio.account_sid,
            "TWILIO_AUTH_TOKEN": twilio.auth_token,
            "TWILIO_FROM": "+15005550006",
            "TWILIO_API_URL": twilio.url,
            "TWILIO_SENDER_MPS": "1000",
            "EMAIL_FROM": "Signup <no-reply@example.org>",
            "SEND_TIMEOUT_SECONDS": "5",
        }
    )
    env.update(extra)
    return env


# -- the fan-out's tests (tests/integration/delivery/test_fanout*.py) -----------------------------------
class Recorded:
    """The platform seam, recording the bodies it was asked to start."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []

    def start(self, bodies) -> None:
        self.bodies += [json.loads(b) for b in bodies]


class Slow:
    """An email adapter that takes `latency` seconds to accept each message."""

    channel, transport = "email", "slow"

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.sent: list[str] = []

    def send(self, message, deadline):
        from signup_verification.delivery.channels.base import SendResult

        time.sleep(self.latency)
        self.sent.append(message.to)
        return SendResult.accepted()

    def close(self) -> None:
        pass


def fanout_settings(**overrides):
    settings = dict(
        dispatch_fanout_url="http://127.0.0.1:9/",  # never called: the recording seam stands in
        dispatch_max_parallel=3,
        dispatch_fanout_drain_seconds=1,
        send_concurrency_max_email=4,
        function_timeout_seconds=8,
        dispatch_safety_margin_seconds=2,
    )
    return provider_settings(**{**settings, **overrides})


def warm(latency: float) -> LatencyEstimator:
    estimator = LatencyEstimator()
    estimator.seed({"email": latency})
    return estimator
