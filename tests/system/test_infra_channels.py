"""WhatsApp and voice in infra/ (variables_channels.tf, channels.tf): each setting reaches the functions
that read it, the template languages are the templates', the call budget pages as the SMS budget does.
Planned with both channels on in tests/system/test_infra_plan.py (the example's commented blocks) and
run from the bundle in tests/system/test_rehearsal.py."""

from __future__ import annotations

import re

from signup_verification.delivery import templates
from support.infra_plans import EXAMPLE, plan_of, planned_block, run_tool
from support.terraform_model import load_infra


def test_the_whatsapp_templates_infra_requires_are_the_languages_of_the_messages():
    languages = load_infra().locals["template_languages"]
    assert sorted(languages) == sorted(templates.locales(templates.current_version("signup")))


def test_each_channel_setting_goes_to_the_functions_that_read_it():
    """create reads the transports only (what it offers), dispatch everything it sends with, status
    and reconcile the call budget their records report; confirm and reports none of them."""
    channel_env = load_infra().locals["channel_env"]
    assert set(channel_env) == {"create", "dispatch", "reconcile", "status"}
    assert channel_env["create"] == "${local.transports_env}"
    assert channel_env["reconcile"] == channel_env["status"] == "${local.voice_budget_env}"
    dispatch = channel_env["dispatch"]
    for name in ("TWILIO_WHATSAPP_FROM", "TWILIO_WHATSAPP_CONTENT_SIDS", "TWILIO_VOICE_FROM", "VOICE_RING_SECONDS",
                 "VOICE_TIME_LIMIT_SECONDS"):  # fmt: skip
        assert name in dispatch, name
    assert "local.transports_env" in dispatch and "local.voice_budget_env" in dispatch


def test_the_planned_channels_reach_create_dispatch_and_the_twilio_secret(tmp_path):
    """The example with its commented blocks on (whatsapp and voice enabled): create gets the
    transports and nothing else of theirs, dispatch the senders, content SIDs and call limits, the
    call budget page exists, and with sms_transport = console the Twilio secret still exists for the
    readers that need it."""
    plan = plan_of("all-blocks").text
    create = planned_block(plan, 'google_cloud_run_v2_service.function["create"]')
    dispatch = planned_block(plan, 'google_cloud_run_v2_service.function["dispatch"]')
    confirm = planned_block(plan, 'google_cloud_run_v2_service.function["confirm"]')
    assert re.search(r'name  = "WHATSAPP_TRANSPORT"\n\s+\+ value = "twilio"', create)
    assert re.search(r'name  = "VOICE_TRANSPORT"\n\s+\+ value = "twilio"', create)
    assert "TWILIO_WHATSAPP_CONTENT_SIDS" not in create and "VOICE_MAX_PER_HOUR" not in create
    assert re.search(r'name  = "TWILIO_WHATSAPP_CONTENT_SIDS"\n\s+\+ value = "en:HX0{32},ja:HX0{31}1"', dispatch)
    assert re.search(r'name  = "VOICE_MAX_PER_HOUR"\n\s+\+ value = "200"', dispatch)
    assert "WHATSAPP_TRANSPORT" not in confirm and "VOICE_MAX_PER_HOUR" not in confirm
    page = planned_block(plan, 'google_monitoring_alert_policy.threshold["voice_budget"]')
    assert "voice_budget_paused_records" in page and "verifyctl voice resume" in page

    var_file = tmp_path / "console-sms.tfvars"
    var_file.write_text(
        re.sub(r"^sms_transport\s*=.*$", 'sms_transport = "console"', EXAMPLE.read_text(), flags=re.MULTILINE)
        + "\nvoice = { enabled = true }\n"
    )
    copy, _, bundle = plan_of("example").args
    result = run_tool("plan", copy, f"-var-file={var_file}", bundle)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    for reader in ("dispatch", "reconcile", "reports"):
        assert f'google_secret_manager_secret_iam_member.function["{reader}/twilio_auth_token"]' in result.stdout
    assert 'google_secret_manager_secret_iam_member.function["create/twilio_auth_token"]' not in result.stdout


def test_an_incomplete_channel_is_refused_by_the_plan(tmp_path):
    var_file = tmp_path / "incomplete.tfvars"
    var_file.write_text(
        EXAMPLE.read_text()
        + '\nwhatsapp = { enabled = true, from = "+14155550100", content_sids = { en = "HX12" } }\n'
        + 'voice = { enabled = true, from = "+15005550006", ring_seconds = 1 }\n'
    )
    copy, _, bundle = plan_of("example").args
    result = run_tool("plan", copy, f"-var-file={var_file}", bundle)
    said = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 1
    for message in (
        "whatsapp.from must be a WhatsApp sender whatsapp:+<E.164>",
        "whatsapp.content_sids maps a language",
        "a content SID for every language the message templates have (en, ja)",
        "voice.from is one of Twilio's test-credential numbers",
        "voice.ring_seconds must be between 5 and 600",
    ):
        assert message in said, message
