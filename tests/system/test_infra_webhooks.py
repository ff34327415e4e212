"""The webhook settings in infra/: the WEBHOOK_URL setting, the WEBHOOK_SECRET secret, the webhook page."""

from __future__ import annotations

from support.terraform_model import INFRA, load_infra


def test_every_function_gets_the_url_and_only_dispatch_the_secret():
    infra = load_infra()
    assert infra.locals["common_env"]["WEBHOOK_URL"] == "${var.webhook_url}"
    assert infra.locals["secret_env"]["webhook_secret"] == "WEBHOOK_SECRET"
    assert 'var.webhook_url != "" ? ["webhook_secret"]' in infra.locals["enabled_secrets"]
    assert [k for k, s in infra.function_specs.items() if "webhook_secret" in s["secrets"]] == ["dispatch"]
    assert infra.variables["webhook_url"]["default"] == ""


def test_the_webhook_channel_pages_on_its_own_threshold_and_the_message_page_ignores_it():
    """Planned both ways in tests/system/test_infra_plan.py; here the one map entry and its guard."""
    infra = load_infra()
    webhook = infra.locals["webhook_alerts"]
    assert webhook.rstrip("}").rstrip().endswith('key => alert if var.webhook_url != ""')
    assert 'metric.label.channel = \\"webhook\\"' in webhook
    text = (INFRA / "webhooks.tf").read_text()
    assert "threshold    = var.webhook_oldest_ready_threshold_seconds" in text and "runbook" in text
    messages = infra.locals["threshold_alerts"]
    assert 'metric.label.channel != \\"webhook\\"' in messages and "local.webhook_alerts" in messages
