# WhatsApp and voice (variables_channels.tf): each setting goes to exactly the functions that read
# it (services.tf merges local.channel_env[key] into that function's settings). create reads the
# transports to know which channels it offers (in production it answers 422 channel-not-offered
# for one whose transport is not twilio); dispatch sends, paced to whatsapp.max_per_second and
# voice.calls_per_second as SMS is to sms_max_per_second (fanout.tf); status and reconcile report the call
# budget in their signal records (the voice_budget page, alerts.tf). The reports function ends
# calls a machine answered (delivery/call_control.py) with TWILIO_ACCOUNT_SID and the Twilio
# secret, which it already holds; reconcile asks Twilio about ambiguous attempts with the same,
# each channel's where dispatch sends it (the transports) and from the sender dispatch uses
# (senders_env: the lookup lists a channel's messages or calls by To and From).
# What infra leaves to the code's per-channel defaults, as for SMS (an ambiguous send held for the
# operator, the sends in flight per invocation): tests/system/test_infra_channels.py lists them.
locals {
  # The languages of the message templates (delivery/templates/signup): WhatsApp needs an approved
  # template in each. tests/system/test_infra_channels.py checks this list against the templates.
  template_languages = ["en", "ja"]

  whatsapp_on = var.whatsapp.enabled
  voice_on    = var.voice.enabled
  # The call budget: as set, else the tier's (tiers.tf).
  voice_max_per_hour = coalesce(var.voice.max_per_hour, local.tier.voice_max_per_hour)

  transports_env = {
    WHATSAPP_TRANSPORT = local.whatsapp_on ? "twilio" : ""
    VOICE_TRANSPORT    = local.voice_on ? "twilio" : ""
  }
  senders_env = {
    TWILIO_WHATSAPP_FROM = local.whatsapp_on ? var.whatsapp.from : ""
    TWILIO_VOICE_FROM    = local.voice_on ? var.voice.from : ""
  }
  voice_budget_env = { VOICE_MAX_PER_HOUR = local.voice_on ? tostring(local.voice_max_per_hour) : "" }
  channel_env = {
    create = local.transports_env
    dispatch = merge(local.transports_env, local.senders_env, local.voice_budget_env, {
      TWILIO_WHATSAPP_CONTENT_SIDS = local.whatsapp_on ? join(",", [for language in sort(keys(var.whatsapp.content_sids)) : "${language}:${var.whatsapp.content_sids[language]}"]) : ""
      WHATSAPP_MAX_PER_SECOND      = local.whatsapp_on ? tostring(var.whatsapp.max_per_second) : ""
      VOICE_RING_SECONDS           = local.voice_on ? tostring(var.voice.ring_seconds) : ""
      VOICE_TIME_LIMIT_SECONDS     = local.voice_on ? tostring(var.voice.time_limit_seconds) : ""
      VOICE_CALLS_PER_SECOND       = local.voice_on ? tostring(var.voice.calls_per_second) : ""
    })
    reconcile = merge(local.transports_env, local.senders_env, local.voice_budget_env)
    status    = local.voice_budget_env
  }
  # Whether a Twilio channel is on: the twilio_auth_token secret exists then (locals.tf).
  twilio_on = var.sms_transport == "twilio" || local.whatsapp_on || local.voice_on
}
