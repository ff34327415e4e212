"""Where `verifyctl dev` points the service's webhooks and return URLs, and what its banner says:
the demo site by default; your own site's endpoint when WEBHOOK_URL is set, and then no demo link."""

from __future__ import annotations

import base64
import stat

from signup_verification.local import banner, demo_site
from signup_verification.local.wiring import Wiring

SECRET = "whsec_" + base64.b64encode(b"d" * 32).decode()


def _shown() -> banner.Shown:
    return banner.Shown({"create_verification": 8081}, set(), 60.0, "localhost", "127.0.0.1", 8025, 8090)


def test_by_default_webhooks_go_to_the_demo_site_under_the_development_secret(tmp_path):
    wiring = Wiring.of({}, "127.0.0.1", 8089, "localhost")
    assert wiring.runs_demo and wiring.webhook_url == "http://127.0.0.1:8089/webhooks"
    settings = wiring.service_settings({}, tmp_path)
    assert settings["WEBHOOK_URL"] == "http://127.0.0.1:8089/webhooks"
    assert settings["RETURN_URL_ALLOWED_ORIGINS"] == "http://localhost:8089"
    secret = settings["WEBHOOK_SECRET"]
    assert secret.startswith("whsec_") and len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
    assert stat.S_IMODE((tmp_path / demo_site.SECRET_FILE).stat().st_mode) == 0o600
    assert wiring.service_settings({}, tmp_path)["WEBHOOK_SECRET"] == secret  # generated once, kept

    shown = banner.lines(_shown(), ["001"], "embedded", wiring, True, tmp_path, [], user_env={})
    assert any(line.startswith("demo site") and "http://localhost:8089/ <- sign up here" in line for line in shown)
    [hooks] = [line for line in shown if line.startswith("webhooks ")]
    assert (
        "http://127.0.0.1:8089/webhooks <- the demo signup site's" in hooks
        and str(tmp_path / "dev-webhook-secret") in hooks
    )
    assert shown[-1] == banner.READY


def test_webhooks_pointed_at_your_site_take_its_origin_and_hide_the_demo(tmp_path):
    env = {"WEBHOOK_URL": "http://localhost:3000/webhooks"}
    wiring = Wiring.of(env, "127.0.0.1", 8089, "localhost")
    assert not wiring.runs_demo
    settings = wiring.service_settings(env, tmp_path)
    assert settings["WEBHOOK_URL"] == "http://localhost:3000/webhooks"
    assert settings["RETURN_URL_ALLOWED_ORIGINS"] == "http://localhost:3000"  # your endpoint's origin
    shown = banner.lines(_shown(), [], "embedded", wiring, False, tmp_path, [], user_env=env)
    assert "http://localhost:3000/webhooks <- WEBHOOK_URL" in "\n".join(shown)
    assert "return_url origins     http://localhost:3000 <- RETURN_URL_ALLOWED_ORIGINS" in shown
    [demo] = [line for line in shown if line.startswith("demo site")]
    assert "8089" not in demo and "not started" in demo


def test_explicit_settings_win_and_a_remote_http_endpoint_gets_no_origin_by_default(tmp_path):
    explicit = {
        "WEBHOOK_URL": "https://hooks.example/",
        "WEBHOOK_SECRET": SECRET,
        "RETURN_URL_ALLOWED_ORIGINS": "https://a.example",
    }
    wiring = Wiring.of(explicit, "127.0.0.1", 8089, "localhost")
    assert wiring.service_settings(explicit, tmp_path) == explicit
    assert "signed with WEBHOOK_SECRET" in "\n".join(banner.lines(_shown(), [], "x", wiring, False, tmp_path, [],
                                                                  user_env=explicit))  # fmt: skip
    remote = {"WEBHOOK_URL": "http://192.0.2.7:3000/hooks"}  # http to another machine: not an allowed origin
    assert "RETURN_URL_ALLOWED_ORIGINS" not in Wiring.of(remote, "127.0.0.1", 8089, "x").service_settings(
        remote, tmp_path
    )


def test_without_a_demo_site_or_a_webhook_url_webhooks_are_off(tmp_path):
    wiring = Wiring.of({}, "127.0.0.1", None, "localhost")
    assert wiring.webhook_url is None and wiring.service_settings({}, tmp_path) == {}
    assert "webhooks               off" in "\n".join(banner.lines(_shown(), [], "x", wiring, False, tmp_path, []))
