# ---- Delivery providers (values that are not secret; secrets are in Secret Manager) ----------

variable "email_transport" {
  description = "sendgrid, smtp, or console (logs only: staging)."
  type        = string
  default     = "sendgrid"
  validation {
    condition     = contains(["sendgrid", "smtp", "console"], var.email_transport)
    error_message = "email_transport must be sendgrid, smtp or console."
  }
}

variable "sms_transport" {
  description = "twilio or console (logs only: staging)."
  type        = string
  default     = "twilio"
  validation {
    condition     = contains(["twilio", "console"], var.sms_transport)
    error_message = "sms_transport must be twilio or console."
  }
}

variable "sms_allowed_countries" {
  description = "ISO 3166 alpha-2 countries create may send SMS to (SMS_ALLOWED_COUNTRIES, docs/security.md): no default, the create function refuses to start without it."
  type        = list(string)
  validation {
    condition     = length(var.sms_allowed_countries) > 0 && alltrue([for c in var.sms_allowed_countries : can(regex("^[A-Z]{2}$", c))])
    error_message = "sms_allowed_countries must be a non-empty list of ISO 3166 alpha-2 codes such as \"US\"."
  }
}

variable "sms_max_per_hour" {
  description = "Global SMS budget per hour (SMS_MAX_PER_HOUR): past it SMS sends pause and a page fires; a warning at 80 %. A safety ceiling against SMS pumping, so it follows the tier: null is the tier's (small 100; standard 94,000, the documented load: 100 verifications/s at peak, 20 % SMS = 72,000 SMS an hour, x 1.3 headroom; large 940,000). Set your own peak hour's SMS signups x ~1.3 (docs/deploy.md, Sizing)."
  type        = number
  default     = null
  validation {
    condition     = var.sms_max_per_hour == null ? true : var.sms_max_per_hour >= 1
    error_message = "sms_max_per_hour must be at least 1."
  }
}

variable "verification_ttl_seconds" {
  description = "How long a link or code lives (VERIFICATION_TTL_SECONDS). The oldest-ready page defaults to a fifth of it, and the backlog page fires when the backlog would take longer than it to drain."
  type        = number
  default     = 600
  validation {
    condition     = var.verification_ttl_seconds >= 30 && var.verification_ttl_seconds <= 86400
    error_message = "verification_ttl_seconds must be between 30 and 86400."
  }
}

variable "dispatch_max_parallel" {
  description = "Dispatch invocations the fan-out may run at once beside the scheduled ones (DISPATCH_MAX_PARALLEL; the Cloud Tasks queue's max_concurrent_dispatches). Each is one more dispatch instance and one more database connection, counted in the connection budget. 0: no fan-out, no queue. null: the tier's (small 0, standard 4, large 12)."
  type        = number
  default     = null
  validation {
    condition     = var.dispatch_max_parallel == null ? true : var.dispatch_max_parallel >= 0 && var.dispatch_max_parallel <= 100 && floor(var.dispatch_max_parallel) == var.dispatch_max_parallel
    error_message = "dispatch_max_parallel must be a whole number between 0 and 100."
  }
}

variable "email_max_per_second" {
  description = "Emails per second the deployment may send (EMAIL_MAX_PER_SECOND), shared by the dispatch invocations. Default: SendGrid's documented mail-send limit (docs/capacity.md); lower it for an SMTP relay with a smaller one."
  type        = number
  default     = 10000
  validation {
    condition     = var.email_max_per_second > 0
    error_message = "email_max_per_second must be positive."
  }
}

variable "sms_max_per_second" {
  description = "Twilio Messages API requests per second the deployment may make (SMS_MAX_PER_SECOND), shared by the dispatch invocations."
  type        = number
  default     = 100
  validation {
    condition     = var.sms_max_per_second > 0
    error_message = "sms_max_per_second must be positive."
  }
}

variable "twilio_sender_mps" {
  description = "Message segments per second twilio_from may send (TWILIO_SENDER_MPS). null: Twilio's documented rate for its kind (a long code 1, a toll-free number 3, a short code 100); set it for a Messaging Service (the sum of its senders) or a registered 10DLC number."
  type        = number
  default     = null
  validation {
    condition     = var.twilio_sender_mps == null ? true : var.twilio_sender_mps > 0
    error_message = "twilio_sender_mps must be positive (or null)."
  }
}

variable "email_from" {
  description = "From header of verification emails."
  type        = string
  default     = "Signup <no-reply@example.com>"
}

variable "smtp" {
  description = "SMTP relay when email_transport = smtp (the password is the smtp_password secret)."
  type = object({
    host     = string
    port     = number
    username = string
    security = string
  })
  default = { host = "smtp.example.com", port = 587, username = "", security = "starttls" }
}

variable "twilio_account_sid" {
  description = "Twilio Account SID (an identifier, not a secret; the auth token is the twilio_auth_token secret)."
  type        = string
  default     = ""
}

variable "twilio_from" {
  description = "Twilio sender: an E.164 number or a Messaging Service SID. Twilio's test-credential senders (+15005550006 and the other +1500555000x) are refused: every function refuses them in production."
  type        = string
  default     = ""
  validation {
    condition     = !contains(["+15005550001", "+15005550006", "+15005550007", "+15005550008"], var.twilio_from)
    error_message = "twilio_from is one of Twilio's test-credential senders: set your own number or Messaging Service SID."
  }
}

# ---- Monitoring ----------------------------------------------------------------------------

variable "notification_channels" {
  description = "Further Cloud Monitoring notification channels (projects/P/notificationChannels/N: Slack, PagerDuty, SMS) every alert pages, beside the notification_email channel Terraform creates."
  type        = list(string)
  default     = []
}

variable "oldest_ready_threshold_seconds" {
  description = "Page when the oldest eligible intent of a channel is older than this (READY_AGE_ALERT_SECONDS). null: a fifth of verification_ttl_seconds, rounded down to a bound (120 s for 600 s links). Must be a bucket bound of the age metric (so the percentile is exact at the threshold): 30, 60, 90, 120, 180, 300, 600."
  type        = number
  default     = null
  validation {
    condition     = var.oldest_ready_threshold_seconds == null ? true : contains([30, 60, 90, 120, 180, 300, 600], var.oldest_ready_threshold_seconds)
    error_message = "oldest_ready_threshold_seconds must be null or one of 30, 60, 90, 120, 180, 300, 600."
  }
}

variable "watermark_stale_threshold_seconds" {
  description = "Page when the reconciler watermark is older than this (the reconciler runs every minute). Must be a bucket bound: 120, 180, 300, 600, 900."
  type        = number
  default     = 300
  validation {
    condition     = contains([120, 180, 300, 600, 900], var.watermark_stale_threshold_seconds)
    error_message = "watermark_stale_threshold_seconds must be one of 120, 180, 300, 600, 900."
  }
}

variable "exclude_confirm_request_logs" {
  description = "Drop Cloud Run's request log for the confirm function, whose URLs carry one-time tokens (logging.tf)."
  type        = bool
  default     = true
}

# ---- Webhooks and delivery reports ------------------------------------------------------------

variable "webhook_url" {
  description = "The signup site's endpoint for signed verification events (https). Empty: no events are written. Its secret (WEBHOOK_SECRET, whsec_...) is supplied to deploy.sh like the others (docs/deploy.md, step 3)."
  type        = string
  default     = ""
  validation {
    condition     = var.webhook_url == "" || can(regex("^https://[^/@]+(/.*)?$", var.webhook_url))
    error_message = "webhook_url must be empty or an https URL without credentials."
  }
}

variable "webhook_oldest_ready_threshold_seconds" {
  description = "Page when the oldest eligible webhook event is older than this (the receiver is failing or slow). A bucket bound of the age metric: 30, 60, 90, 120, 180, 300, 600."
  type        = number
  default     = 600
  validation {
    condition     = contains([30, 60, 90, 120, 180, 300, 600], var.webhook_oldest_ready_threshold_seconds)
    error_message = "webhook_oldest_ready_threshold_seconds must be one of 30, 60, 90, 120, 180, 300, 600."
  }
}

variable "sendgrid_webhook_public_key" {
  description = "The verification key SendGrid shows for the Signed Event Webhook (base64, Mail Settings > Event Webhook; docs/deploy.md). Empty = SendGrid reports are refused (403)."
  type        = string
  default     = ""
}

variable "awaiting_report_threshold_seconds" {
  description = "Alert when an accepted delivery has had no delivered report for this long (ACCEPTED_UNDELIVERED_AGE_ALERT_SECONDS)."
  type        = number
  default     = 900
}
