"""WhatsApp and voice in infra/ (variables_channels.tf, channels.tf): each setting reaches the functions
that read it, the template languages are the templates', the call budget pages as the SMS budget does.
Planned with both channels on in tests/system/test_infra_plan.py (the example's commented blocks) and
run from the bundle in tests/system/test_rehearsal.py."""

from __future__ import annotations

import re

from signup_verification.config import load
from signup_verification.config.loader import Reading
from signup_verification.delivery import templates
from signup_verification.delivery.capacity_config import PacingConfig
from signup_verification.delivery.config import VOICE_MAX_PER_HOUR
from signup_verification.operations.config import ReconcilerConfig
from support.config import RecordingEnv
from support.deploy_docs import CALL_SHARE
from support.infra_plans import EXAMPLE, plan_of, planned_block, run_tool
from support.terraform_model import INFRA, load_infra

# The settings of these channels infra leaves to the code's per-channel defaults, as it leaves their
# SMS twins (functions.<name>.env still sets one): why each is not an infra variable.
LEFT_TO_THE_CODE = {
    "AMBIGUOUS_POLICY_WHATSAPP": "hold: Twilio has no idempotency key for a message, a resend may repeat a code",
    "AMBIGUOUS_POLICY_VOICE": "hold: nor for a call, a resend may ring twice",
    "AMBIGUOUS_HOLD_SECONDS_WHATSAPP": "how long the held attempt waits, the SMS channel's 300 s",
    "AMBIGUOUS_HOLD_SECONDS_VOICE": "as for WhatsApp",
    "SEND_CONCURRENCY_MAX_WHATSAPP": "sends in flight per invocation: the pace (max_per_second) binds first",
    "SEND_CONCURRENCY_MAX_VOICE": "calls in flight per invocation: the CPS (calls_per_second) binds first",
}


def _channel_settings() -> set[str]:
    """Every variable the configuration reads for WhatsApp or voice, both channels on."""
    recording = RecordingEnv({"WHATSAPP_TRANSPORT": "twilio", "VOICE_TRANSPORT": "twilio", "SMS_TRANSPORT": "twilio"})
    load(recording)
    return {name for name in recording.asked if "WHATSAPP" in name or "VOICE" in name}


def _infra_settings() -> set[str]:
    """Every setting infra gives a function: the names its env maps assign."""
    text = "\n".join(path.read_text() for path in sorted(INFRA.glob("*.tf")))
    return set(re.findall(r"(?:^|\{)\s*([A-Z][A-Z0-9_]+)\s*=", text, re.MULTILINE))


def test_the_whatsapp_templates_infra_requires_are_the_languages_of_the_messages():
    languages = load_infra().locals["template_languages"]
    assert sorted(languages) == sorted(templates.locales(templates.current_version("signup")))


def test_each_channel_setting_goes_to_the_functions_that_read_it():
    """create reads the transports only (what it offers), dispatch everything it sends with, status
    the call budget its records report, reconcile that budget and the transports and senders its
    lookup of ambiguous sends asks Twilio with; confirm and reports none of them."""
    infra = load_infra().locals
    channel_env = infra["channel_env"]
    assert set(channel_env) == {"create", "dispatch", "reconcile", "status"}
    assert channel_env["create"] == "${local.transports_env}"
    assert channel_env["status"] == "${local.voice_budget_env}"
    assert set(infra["senders_env"]) == {"TWILIO_WHATSAPP_FROM", "TWILIO_VOICE_FROM"}
    dispatch, reconcile = channel_env["dispatch"], channel_env["reconcile"]
    for name in ("TWILIO_WHATSAPP_CONTENT_SIDS", "WHATSAPP_MAX_PER_SECOND", "VOICE_RING_SECONDS",
                 "VOICE_TIME_LIMIT_SECONDS", "VOICE_CALLS_PER_SECOND"):  # fmt: skip
        assert name in dispatch and name not in reconcile, name
    for env in (dispatch, reconcile):
        assert all(f"local.{part}" in env for part in ("transports_env", "senders_env", "voice_budget_env")), env
    recording = RecordingEnv({"WHATSAPP_TRANSPORT": "twilio", "VOICE_TRANSPORT": "twilio",
                              "TWILIO_ACCOUNT_SID": "AC" + "0" * 32, "TWILIO_AUTH_TOKEN": "t"})  # fmt: skip
    Reading(recording).build(ReconcilerConfig)  # what the reconcile function reads
    assert {"TWILIO_WHATSAPP_FROM", "TWILIO_VOICE_FROM", "WHATSAPP_TRANSPORT", "VOICE_TRANSPORT"} <= recording.asked


def test_every_setting_of_the_channels_is_an_infra_variable_or_left_to_the_code_as_its_sms_twin():
    """What the code reads for WhatsApp and voice is either set from a variable whose description
    names it, or listed above; a setting left to the code has no SMS twin that infra sets."""
    read, infra = _channel_settings(), _infra_settings()
    assert {"WHATSAPP_MAX_PER_SECOND", "VOICE_CALLS_PER_SECOND", "VOICE_MAX_PER_HOUR"} <= read
    assert set(LEFT_TO_THE_CODE) <= read, "a setting listed that the code no longer reads"
    assert read - set(LEFT_TO_THE_CODE) <= infra, "a setting of the channels infra cannot set"
    assert not set(LEFT_TO_THE_CODE) & infra, "a setting both set by infra and listed as left to the code"
    for name in LEFT_TO_THE_CODE:
        twin = name.replace("WHATSAPP", "SMS").replace("VOICE", "SMS")
        assert twin not in infra, f"{twin} is an infra setting: {name} should be one too"
    variables = load_infra().variables
    described = variables["whatsapp"]["description"] + variables["voice"]["description"]
    for name in read - set(LEFT_TO_THE_CODE) - {"WHATSAPP_TRANSPORT", "VOICE_TRANSPORT"}:
        assert name in described, f"{name}: no variable's description names it"


def test_each_tiers_call_budget_is_its_share_of_the_phone_load_and_the_default_cps_places_the_standard_ones():
    """docs/capacity.md, "Calls and WhatsApp in the budgets": 2 % of the tier's SMS budget (its design
    phone hour x 1.3), rounded up, at least 10; the application's default is the standard tier's."""
    tiers = load_infra().locals["tiers"]
    budgets = {tier: preset["voice_max_per_hour"] for tier, preset in tiers.items()}
    assert budgets["standard"] == VOICE_MAX_PER_HOUR.default
    for tier, preset in tiers.items():
        design = CALL_SHARE * preset["sms_max_per_hour"]
        assert design <= budgets[tier] <= max(10, 1.1 * design), tier
    # one call a second (Twilio's default CPS) places the standard tier's budget, not the large tier's
    assert budgets["standard"] <= 3600 * PacingConfig().voice_calls_per_second < budgets["large"]


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
    assert re.search(r'name  = "WHATSAPP_MAX_PER_SECOND"\n\s+\+ value = "80"', dispatch)
    assert re.search(r'name  = "VOICE_CALLS_PER_SECOND"\n\s+\+ value = "1"', dispatch)
    assert "WHATSAPP_MAX_PER_SECOND" not in create and "VOICE_CALLS_PER_SECOND" not in create
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
        + '\nwhatsapp = { enabled = true, from = "+14155550100", content_sids = { en = "HX12" }, max_per_second = 0 }\n'
        + 'voice = { enabled = true, from = "+15005550006", ring_seconds = 1, calls_per_second = 0 }\n'
    )
    copy, _, bundle = plan_of("example").args
    result = run_tool("plan", copy, f"-var-file={var_file}", bundle)
    said = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 1
    for message in (
        "whatsapp.from must be a WhatsApp sender whatsapp:+<E.164>",
        "whatsapp.content_sids maps a language",
        "whatsapp.max_per_second must be positive",
        "a content SID for every language the message templates have (en, ja)",
        "voice.from is one of Twilio's test-credential numbers",
        "voice.ring_seconds must be between 5 and 600",
        "voice.calls_per_second must be positive",
    ):
        assert message in said, message
