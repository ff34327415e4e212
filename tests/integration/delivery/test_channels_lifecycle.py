"""Adapter lifecycle and SMTP trust: pooled SMTP connections end with QUIT when
the dispatcher shuts down or the CLI's one invocation ends, and SMTP_CA_FILE trusts a private CA
for SMTP in addition to the system store. Real PostgreSQL, aiosmtpd over real sockets."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from signup_verification import cli
from signup_verification.config import ConfigError, load
from signup_verification.delivery.channels import build_channels
from signup_verification.delivery.config import MessageConfig
from signup_verification.delivery.messages import Renderer, sample_intent
from signup_verification.operations.dispatcher import DispatchRun, dispatch
from signup_verification.outbox.transitions import BegunAttempt
from signup_verification.runtime import Runtime
from support.config import make_config
from support.dispatch import KEYRING
from support.fakes.seed import seed_intents
from support.fakes.smtp import FakeSmtpServer
from support.fakes.tls import make_certificate
from support.paths import TEST_TOKEN_KEYS


def message():
    intent = sample_intent(
        "email",
        "signup/v1",
        "en",
        destination="ada@example.com",
        key_id="test-k1",
        expires_at=datetime.now(UTC) + timedelta(minutes=10),
    )
    return Renderer(MessageConfig(email_from="Signup <no-reply@example.org>"), KEYRING).render(
        intent, BegunAttempt(1, "1:1", 1)
    )


def soon() -> float:
    return time.monotonic() + 5


def test_the_pooled_smtp_connection_is_kept_between_invocations_and_quit_at_shutdown(db, database_url, smtp, tmp_path):
    runtime = Runtime(
        make_config(
            database_url=database_url,
            token_keys=TEST_TOKEN_KEYS,
            email_transport="smtp",
            smtp_host=smtp.host,
            smtp_port=smtp.port,
            email_from="Signup <no-reply@example.org>",
            local_dir=tmp_path,
        )
    )

    def invoke(stop: threading.Event):
        """One invocation as the dispatch target runs it, with this instance's adapters."""
        r = runtime
        return dispatch(
            DispatchRun(r.db, r.config.dispatch, r.keyring, r.channels, stop=stop, close_channels=r.close_channels)
        )

    try:
        seed_intents(db, 1)
        stop = threading.Event()
        assert invoke(stop).accepted == 1
        assert smtp.quits == 0  # reused by the next invocation of this instance
        seed_intents(db, 1, prefix="second")
        assert invoke(stop).accepted == 1
        assert smtp.quits == 0 and len(smtp.received) == 2
        stop.set()  # SIGTERM: the next (last) invocation claims nothing and ends the SMTP session
        invoke(stop)
        assert smtp.quits == 1
    finally:
        runtime.close()


def test_verifyctl_dispatch_says_quit_when_it_is_done(db, database_url, smtp, tmp_path, monkeypatch, capsys):
    seed_intents(db, 2)
    for name, value in {
        "DATABASE_URL": database_url,
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "EMAIL_TRANSPORT": "smtp",
        "SMTP_HOST": smtp.host,
        "SMTP_PORT": str(smtp.port),
        "EMAIL_FROM": "Signup <no-reply@example.org>",
        "SEND_CONCURRENCY": "1",
        "VERIFY_LOCAL_DIR": str(tmp_path),
        "RATE_LIMIT_PER_HOUR": "1000",
    }.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["dispatch", "--json"]) == 0
    assert '"accepted": 2' in capsys.readouterr().out
    assert len(smtp.received) == 2 and smtp.quits == 1


def test_smtp_ca_file_trusts_a_private_ca_for_smtp(tmp_path):
    cert = make_certificate(tmp_path)
    with FakeSmtpServer(starttls=cert.server_context()) as fake:
        base = make_config(
            email_from="Signup <no-reply@example.org>",
            email_transport="smtp",
            smtp_host=fake.host,
            smtp_port=fake.port,
            smtp_security="starttls",
        )
        untrusted = build_channels(base.channels)["email"].send(message(), soon())
        assert (untrusted.outcome, untrusted.error_class) == ("failed", "configuration")
        trusted = load(
            {
                "TOKEN_KEYS": TEST_TOKEN_KEYS,
                "EMAIL_TRANSPORT": "smtp",
                "SMTP_HOST": fake.host,
                "SMTP_PORT": str(fake.port),
                "SMTP_SECURITY": "starttls",
                "SMTP_CA_FILE": str(cert.cert_file),
                "EMAIL_FROM": "no-reply@example.org",
            }
        )
        channel = build_channels(trusted.channels)["email"]
        assert channel.send(message(), soon()).outcome == "accepted" and len(fake.received) == 1
        channel.close()


def test_smtp_ca_file_must_exist(tmp_path):
    with pytest.raises(ConfigError, match="SMTP_CA_FILE"):
        load({"TOKEN_KEYS": TEST_TOKEN_KEYS, "SMTP_CA_FILE": str(tmp_path / "missing.pem")})
    (tmp_path / "junk.pem").write_text("not a certificate")
    settings = make_config(email_transport="smtp", smtp_ca_file=str(tmp_path / "junk.pem"))
    with pytest.raises(ConfigError, match="SMTP_CA_FILE"):
        build_channels(settings.channels)
