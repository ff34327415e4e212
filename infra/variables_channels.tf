# ---- WhatsApp and voice (Twilio; off unless enabled; docs/deploy.md, "WhatsApp and voice") ------
# Both use the Twilio account of the SMS channel: twilio_account_sid and the twilio_auth_token
# secret (created when either is enabled, even with sms_transport = "console"). channels.tf passes
# each setting to the functions that read it.

variable "whatsapp" {
  description = "The WhatsApp channel through Twilio's Messages API (WHATSAPP_TRANSPORT=twilio on create, which then offers it, and on dispatch, which sends it). from: the WhatsApp sender registered in Twilio, whatsapp:+<E.164>, or a Messaging Service SID MG... holding it (TWILIO_WHATSAPP_FROM); content_sids: the approved authentication template (HX...) of every language the message templates have, en and ja (TWILIO_WHATSAPP_CONTENT_SIDS; docs/channels.md); max_per_second: WhatsApp messages per second the deployment may send, shared by the dispatch invocations (WHATSAPP_MAX_PER_SECOND, default 80: Meta's default throughput of a business number; raise it when Meta raised yours). WhatsApp messages count in sms_max_per_hour."
  type = object({
    enabled        = optional(bool, false)
    from           = optional(string, "")
    content_sids   = optional(map(string), {})
    max_per_second = optional(number, 80)
  })
  default = {}
  validation {
    condition     = var.whatsapp.from == "" || can(regex("^(whatsapp:\\+[1-9][0-9]{6,14}|MG[0-9a-fA-F]{32})$", var.whatsapp.from))
    error_message = "whatsapp.from must be a WhatsApp sender whatsapp:+<E.164> (e.g. whatsapp:+14155550100) or a Messaging Service SID MG<32 hex digits>."
  }
  validation {
    condition     = alltrue([for language, sid in var.whatsapp.content_sids : can(regex("^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$", language)) && can(regex("^HX[0-9a-fA-F]{32}$", sid))])
    error_message = "whatsapp.content_sids maps a language (en, ja, pt-BR) to a content SID HX<32 hex digits>."
  }
  validation {
    condition     = !var.whatsapp.enabled || (var.whatsapp.from != "" && alltrue([for language in local.template_languages : contains(keys(var.whatsapp.content_sids), language)]))
    error_message = "whatsapp.enabled needs whatsapp.from and a content SID for every language the message templates have (en, ja)."
  }
  validation {
    condition     = !var.whatsapp.enabled || can(regex("^AC[0-9a-fA-F]{32}$", var.twilio_account_sid))
    error_message = "whatsapp.enabled needs twilio_account_sid (AC<32 hex digits>): WhatsApp goes through the Twilio account of the SMS channel."
  }
  validation {
    condition     = var.whatsapp.max_per_second > 0
    error_message = "whatsapp.max_per_second must be positive."
  }
}

variable "voice" {
  description = "The voice channel through Twilio's Calls API (VOICE_TRANSPORT=twilio on create, which then offers it, and on dispatch, which calls). from: the caller ID, an E.164 Twilio number or verified caller ID (TWILIO_VOICE_FROM; empty: twilio_from when that is a number); max_per_hour: the call budget per UTC hour (VOICE_MAX_PER_HOUR; null: the tier's, small 10, standard 2,000, large 20,000), past it calls pause and a page fires (`verifyctl voice resume`); ring_seconds (VOICE_RING_SECONDS, default 30) and time_limit_seconds (VOICE_TIME_LIMIT_SECONDS, default 90, what bounds one call's cost); calls_per_second: calls per second the deployment may place, shared by the dispatch invocations (VOICE_CALLS_PER_SECOND, default 1: Twilio's CPS unless the account's was raised; a call past it waits in Twilio's queue)."
  type = object({
    enabled            = optional(bool, false)
    from               = optional(string, "")
    max_per_hour       = optional(number)
    ring_seconds       = optional(number, 30)
    time_limit_seconds = optional(number, 90)
    calls_per_second   = optional(number, 1)
  })
  default = {}
  validation {
    condition     = var.voice.from == "" || can(regex("^\\+[1-9][0-9]{6,14}$", var.voice.from))
    error_message = "voice.from must be an E.164 number such as +14155550100 (a Twilio number or a verified caller ID)."
  }
  validation {
    condition     = !contains(["+15005550001", "+15005550006", "+15005550007", "+15005550008"], var.voice.from)
    error_message = "voice.from is one of Twilio's test-credential numbers: set your own number."
  }
  validation {
    condition     = !var.voice.enabled || var.voice.from != "" || can(regex("^\\+", var.twilio_from))
    error_message = "voice.enabled needs a caller ID: voice.from, or twilio_from set to a number (a Messaging Service places no calls)."
  }
  validation {
    condition     = !var.voice.enabled || can(regex("^AC[0-9a-fA-F]{32}$", var.twilio_account_sid))
    error_message = "voice.enabled needs twilio_account_sid (AC<32 hex digits>): calls go through the Twilio account of the SMS channel."
  }
  validation {
    condition     = var.voice.max_per_hour == null ? true : var.voice.max_per_hour >= 1 && floor(var.voice.max_per_hour) == var.voice.max_per_hour
    error_message = "voice.max_per_hour must be a whole number of at least 1 (or null: the tier's)."
  }
  validation {
    condition     = var.voice.ring_seconds >= 5 && var.voice.ring_seconds <= 600 && var.voice.time_limit_seconds >= 30 && var.voice.time_limit_seconds <= 600
    error_message = "voice.ring_seconds must be between 5 and 600 and voice.time_limit_seconds between 30 and 600."
  }
  validation {
    condition     = var.voice.calls_per_second > 0
    error_message = "voice.calls_per_second must be positive."
  }
}
