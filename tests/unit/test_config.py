"""config.load: every setting read once, into frozen per-concern configs, every bad one reported."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import signup_verification
from signup_verification import cli
from signup_verification.config import ConfigError, load
from signup_verification.delivery.channels import build_channels
from signup_verification.delivery.channels.console import DisabledChannel
from signup_verification.runtime import Runtime
from signup_verification.verifications.tokens import new_key_spec
from support.config import RecordingEnv
from support.paths import ROOT, TEST_TOKEN_KEYS

PACKAGE = Path(signup_verification.__file__).resolve().parent


def test_every_invalid_setting_is_reported_at_once():
    with pytest.raises(ConfigError) as caught:
        load(
            {
                "SMTP_PORT": "x",
                "SEND_CONCURRENCY": "0",
                "DISPATCH_IDLE_WAIT": "maybe",
                "EMAIL_TRANSPORT": "pigeon",
                "SIGNATURE_TOLERANCE_SECONDS": "5",
                "RETRY_BACKOFF_SECONDS": "a,b",
                "RECONCILE_BATCH_SIZE": "0",
                "SIGNALS_WINDOW_SECONDS": "-1",
                "LOG_LEVEL": "LOUD",
                "DEPLOYMENT": "fine",
            }
        )
    problems = caught.value.problems
    named = sorted(re.match(r"[A-Z_]+", p).group(0) for p in problems)
    assert named == [
        "DISPATCH_IDLE_WAIT",
        "EMAIL_TRANSPORT",
        "LOG_LEVEL",
        "RECONCILE_BATCH_SIZE",
        "RETRY_BACKOFF_SECONDS",
        "SEND_CONCURRENCY",
        "SIGNALS_WINDOW_SECONDS",
        "SIGNATURE_TOLERANCE_SECONDS",
        "SMTP_PORT",
    ]
    assert str(caught.value).startswith("9 invalid settings: ")
    assert "SMTP_PORT must be an integer, got 'x'" in problems
    assert "SEND_CONCURRENCY must be >= 1, got 0" in problems


def test_one_invalid_setting_is_its_own_message():
    with pytest.raises(ConfigError, match=r"^DISPATCH_MAX_BATCH must be >= 1, got 0$"):
        load({"DISPATCH_MAX_BATCH": "0"})


def test_a_bad_shutdown_grace_is_an_error_not_a_silent_default():
    for raw in ("soon", "0", "-3"):
        with pytest.raises(ConfigError, match="SHUTDOWN_GRACE_SECONDS"):
            load({"SHUTDOWN_GRACE_SECONDS": raw})
    config = load({"SHUTDOWN_GRACE_SECONDS": "2.5"})
    assert config.shutdown.grace_seconds == config.dispatch.shutdown_grace_seconds == 2.5


def test_defaults_are_the_documented_ones():
    config = load({})
    assert not config.is_production and config.deployment == "local"
    assert (config.database.url, config.database.name, config.database.statement_timeout_ms) == (
        None,
        "verification",
        15_000,
    )
    assert (config.create.ttl_seconds, config.create.code_digits, config.create.max_confirm_attempts) == (600, 6, 5)
    assert (config.create.rate_limit_per_hour, config.create.rate_limit_spacing_seconds) == (5, 60)
    assert config.http.max_body_bytes == 16384
    d = config.dispatch
    assert (d.function_timeout_seconds, d.send_timeout_seconds, d.max_batch) == (60, 10.0, 500)
    assert [d.concurrency(c) for c in ("email", "sms", "webhook")] == [128, 32, 32]
    assert (d.idle_wait, d.shutdown_grace_seconds) == (False, 8.0)
    assert (config.channels.email_transport, config.channels.smtp.host, config.channels.smtp.port) == (
        "console",
        "localhost",
        8025,
    )
    assert config.retry.backoff == (60.0, 300.0, 900.0)
    assert config.retry.channel("sms").ambiguity == "hold" and config.retry.channel("email").ambiguity == "retry"
    assert (config.reconciler.batch_size, config.reconciler.purge_after_seconds) == (500, 90 * 86400)
    assert config.signals.ready_age_alert_seconds == 120.0
    assert (config.logging.format, config.logging.level) == ("text", "INFO")
    assert config.auth.signed_targets == frozenset() and config.auth.tolerance_seconds == 300


def test_a_shared_setting_reaches_every_concern_that_uses_it():
    config = load(
        {
            "SMS_CODE_DIGITS": "8",
            "FUNCTION_TIMEOUT_SECONDS": "120",
            "DEPLOYMENT": "eu",
            "EMAIL_FROM": "Signup <no-reply@mail.example.org>",
            "AMBIGUOUS_POLICY_SMS": "fail",
            "SEND_TIMEOUT_SECONDS": "3",
            "ENVIRONMENT": "production",
            "K_SERVICE": "dispatch",
        }
    )
    assert config.create.code_digits == config.confirm.code_digits == config.dispatch.messages.code_digits == 8
    assert config.dispatch.function_timeout_seconds == config.reconciler.function_timeout_seconds == 120
    assert config.dispatch.deployment == config.reconciler.deployment == config.logging.deployment == "eu"
    assert config.channels.smtp.helo_name == "mail.example.org"  # EMAIL_FROM's domain, no reverse DNS
    assert config.channels.smtp.timeout == config.dispatch.send_timeout_seconds == 3.0
    assert config.retry is config.reconciler.policy and config.retry.channel("sms").ambiguity == "fail"
    assert config.dispatch.idle_wait is True  # on by default in production
    assert config.logging.format == "json"  # on Cloud Run


def test_the_confirm_base_reaches_the_create_answer_and_the_messages_and_is_a_url():
    config = load({"VERIFY_LINK_BASE": "https://verify.example.org/c", "SMS_APP_HASH": "FA+9qCX9VSu"})
    assert config.create.link_base == config.dispatch.messages.link_base == "https://verify.example.org/c"
    assert config.dispatch.messages.autofill("123456") == "FA+9qCX9VSu\n@verify.example.org #123456"
    for name, raw in (("VERIFY_LINK_BASE", "verify.example.org/c"), ("VERIFY_LINK_BASE", "https:///c"),
                      ("SMS_APP_HASH", "too-short"), ("SMS_APP_HASH", "FA+9qCX9VS!")):  # fmt: skip
        with pytest.raises(ConfigError, match=f"^{name} "):
            load({name: raw})


def test_configs_are_frozen():
    config = load({})
    for part in (config, config.dispatch, config.create, config.channels, config.reconciler, config.database):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(part, "deployment" if hasattr(part, "deployment") else "production", "x")


def test_production_refuses_a_development_key_and_a_missing_one_where_tokens_are_used(tmp_path):
    dev = new_key_spec("dev-laptop")
    with pytest.raises(ConfigError, match="refusing to run in production with a development token key"):
        load({"ENVIRONMENT": "production", "TOKEN_KEYS": dev})
    for target in ("create_verification", "confirm_verification", "dispatch"):
        with pytest.raises(ConfigError, match="TOKEN_KEYS is required in production"):
            load({"ENVIRONMENT": "production", "FUNCTION_TARGET": target})
    for target in ("reconcile", "status"):  # never touch tokens: no key secret to grant them
        assert load({"ENVIRONMENT": "production", "FUNCTION_TARGET": target}).tokens.keys is None
    assert load({"TOKEN_KEYS": dev}).tokens.keys == dev  # locally a development key is fine
    with pytest.raises(ConfigError, match="TOKEN_KEYS key 'k' must hold at least 32 bytes"):
        load({"TOKEN_KEYS": "k:c2hvcnQ"})


def test_console_transports_are_refused_in_production(tmp_path):
    channels = build_channels(load({"ENVIRONMENT": "production", "VERIFY_LOCAL_DIR": str(tmp_path)}).channels)
    assert isinstance(channels["email"], DisabledChannel) and isinstance(channels["sms"], DisabledChannel)


def test_no_repr_shows_a_secret():
    secrets = {
        "DATABASE_URL": "postgresql://u:db-password@h/d",
        "SMTP_PASSWORD": "smtp-password",
        "SENDGRID_API_KEY": "SG.sendgrid-key",
        "TWILIO_AUTH_TOKEN": "twilio-token",
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "REQUEST_SIGNING_KEYS": "k1:" + "c" * 43,
    }
    shown = repr(load(secrets))
    for value in ("db-password", "smtp-password", "SG.sendgrid-key", "twilio-token", TEST_TOKEN_KEYS, "c" * 43):
        assert value not in shown


def test_the_runtime_owns_one_set_of_channel_adapters(tmp_path):
    runtime = Runtime(load({"VERIFY_LOCAL_DIR": str(tmp_path)}))
    first = runtime.channels
    assert runtime.channels is first  # pooled connections live as long as the instance
    runtime.close()
    assert runtime.channels is not first  # a closed runtime builds fresh adapters


def test_verifyctl_prints_every_bad_setting_on_one_line(monkeypatch, capsys):
    monkeypatch.setenv("SMTP_PORT", "x")
    monkeypatch.setenv("SHUTDOWN_GRACE_SECONDS", "later")
    assert cli.main(["status"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("verifyctl: 2 invalid settings: ")
    assert "SMTP_PORT" in err and "SHUTDOWN_GRACE_SECONDS" in err


def test_only_the_config_module_reads_the_environment():
    readers = set()
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("local/"):  # the laptop emulation plays the platform's part
            continue
        if re.search(r"\bos\.environ\b|\bgetenv\b|from os import .*environ", path.read_text()):
            readers.add(relative)
    assert readers == {"config/__init__.py"}


def _documented() -> list[str]:
    """The variables README.md's settings tables name in their first column."""
    text = (ROOT / "README.md").read_text()
    names = []
    for _, table in re.findall(r"<!-- generated: (settings[\w-]*) -->\n(.*?)<!-- end: \1 -->", text, re.S):
        for row in table.splitlines()[2:]:
            names += re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split("|")[1])
    return names


def test_every_variable_the_configuration_reads_has_its_row_in_the_readme():
    asked: set[str] = set()
    for env in (
        {},  # every default, the aliases included (GCP_PROJECT after GOOGLE_CLOUD_PROJECT)
        {"ENVIRONMENT": "production", "FUNCTION_TARGET": "dispatch", "TOKEN_KEYS": TEST_TOKEN_KEYS},
        # the settings that apply only where they are used: the SMS lookups, the delivery-report alert
        {"SMS_TRANSPORT": "twilio", "TWILIO_ACCOUNT_SID": "AC1", "TWILIO_AUTH_TOKEN": "t", "TWILIO_FROM": "+15005550006",
         "DELIVERY_REPORTS_URL": "http://127.0.0.1:1"},
    ):  # fmt: skip
        recording = RecordingEnv(env)
        load(recording)
        asked |= recording.asked
    documented = _documented()
    assert len(documented) == len(set(documented)), "a variable documented twice"
    assert asked == set(documented)


def test_a_production_config_reports_every_bad_setting_at_once():
    """Production's own checks (required values, https, no development key, the providers' credentials
    on the sending target, the checks across settings) are reported with the others, not one per start."""
    bad = {
        "LOG_LEVEL": "LOUD",
        "LOG_FORMAT": "xml",
        "SMTP_PORT": "x",
        "TOKEN_KEYS": new_key_spec("dev-laptop"),
        "DELIVERY_REPORTS_URL": "http://reports.example.org",
        "WEBHOOK_URL": "http://hooks.example.org/",
        "RETURN_URL_ALLOWED_ORIGINS": "http://app.example.org",
        "SMS_ALLOWED_COUNTRIES": "USA",
        "EMAIL_TRANSPORT": "sendgrid",  # without SENDGRID_API_KEY
        "SMS_TRANSPORT": "twilio",  # without its credentials
        "EMAIL_FROM": "Signup <no-reply@localhost>",
        "PRODUCT_NAME": "Acme™",
        "SIGNED_TARGETS": "create_verification",  # without REQUEST_SIGNING_KEYS
        "RETENTION_PURGE_AFTER_DAYS": "1",
        "MIGRATION_LOCK_TIMEOUT_MS": "soon",
    }
    production = {
        "ENVIRONMENT": "production",
        "FUNCTION_TARGET": "dispatch",
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "EMAIL_TRANSPORT": "smtp",
        "EMAIL_FROM": "Signup <no-reply@example.org>",
    }
    assert load(production).is_production
    for name, value in bad.items():  # each alone is refused ...
        with pytest.raises(ConfigError, match=name):
            load({**production, name: value})
    with pytest.raises(ConfigError) as caught:  # ... and all of them together, each named
        load({**production, **bad})
    named = {re.match(r"[A-Z_]+", p).group(0) for p in caught.value.problems}
    assert named == set(bad)
    assert "SMS_TRANSPORT=twilio needs TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN, TWILIO_FROM" in caught.value.problems
    assert "dev-laptop" not in str(caught.value)  # a secret's value is never in an error


def test_a_target_that_does_not_send_needs_no_provider_credentials():
    env = {"EMAIL_TRANSPORT": "sendgrid", "SMS_TRANSPORT": "twilio", "WEBHOOK_URL": "http://127.0.0.1:1/"}
    assert load({**env, "FUNCTION_TARGET": "create_verification"}).channels.email_transport == "sendgrid"
    with pytest.raises(ConfigError, match="WEBHOOK_URL needs WEBHOOK_SECRET"):
        load({**env, "FUNCTION_TARGET": "dispatch"})


@pytest.mark.parametrize(("transport", "named"), [("smtp", "smtp"), ("sendgrid", "sendgrid"), ("console", "sendgrid")])
def test_an_email_reports_reason_names_the_provider_the_mail_went_out_through(transport, named):
    """SendGrid's Event Webhook reports on mail relayed over SMTP too (the local mailbox does the same):
    such a bounce names smtp, as a refusal at send time would."""
    assert load({"EMAIL_TRANSPORT": transport}).reports.email_provider == named
