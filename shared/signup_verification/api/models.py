"""Request models at the HTTP edge (pydantic): strict types, no unknown fields, normalised destinations."""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from typing import Any, Literal, TypeGuard

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails

from ..delivery import templates

_LOCALE = re.compile(r"[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3}")
_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]{1,255}")
# E.164: '+', then at most 15 digits. Visual separators are dropped first; anything else (a second
# '+', letters, an extension) is refused rather than guessed at by libphonenumber's lenient parser.
_E164 = re.compile(r"\+[1-9][0-9]{1,14}")
_PHONE_SEPARATORS = str.maketrans("", "", " -.()")
# The message channels a verification's steps (and its fallback) may use: platform/channels.py's
# MESSAGE_CHANNELS, spelled out for the type (tests/unit/test_api_models.py keeps the two equal).
MessageChannel = Literal["email", "sms", "whatsapp", "voice"]
# The steps a verification may take: one secret per step, each step on a channel of its own; the
# records hold three (step 1, the fallback, step 3), as Vonage Verify's workflows do.
MAX_STEPS = 3
# Cc controls, and Cf/Zl/Zp (U+202E reorders what `verifyctl inspect` prints; U+2028 breaks lines).
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def _missing(fields: list[str]) -> list[InitErrorDetails]:
    """The errors a required field gives when absent, at its own pointer."""
    return [InitErrorDetails(type="missing", loc=(f,), input=None) for f in fields]


def _detail(error: Any) -> InitErrorDetails:
    """A field's error as reported, to be raised again beside others."""
    return InitErrorDetails(type=error["type"], loc=error["loc"], input=error["input"], ctx=error.get("ctx", {}))


class FallbackRequest(BaseModel):
    """The other channel, `after_seconds` after create (0: both at once). That it is the
    other channel is checked by the request; that it is due before expiry by api/create.py (the TTL is config)."""

    model_config = ConfigDict(extra="forbid", strict=True, str_strip_whitespace=True, frozen=True)

    channel: MessageChannel
    destination: str = Field(min_length=3, max_length=320)
    after_seconds: int = Field(ge=0, le=86_400)

    @field_validator("destination")
    @classmethod
    def _destination_for_channel(cls, value: str, info: ValidationInfo) -> str:
        channel = info.data.get("channel")
        return normalise_destination(channel, value) if channel else value


class StepRequest(BaseModel):
    """One step of an ordered verification: its channel and destination, sent `after_seconds` after
    create unless the verification was proved first, or earlier when the step before failed for good.
    The first step is sent at once (its after_seconds is 0)."""

    model_config = ConfigDict(extra="forbid", strict=True, str_strip_whitespace=True, frozen=True)

    channel: MessageChannel
    destination: str = Field(min_length=3, max_length=320)
    after_seconds: int = Field(default=0, ge=0, le=86_400)

    @field_validator("destination")
    @classmethod
    def _destination_for_channel(cls, value: str, info: ValidationInfo) -> str:
        channel = info.data.get("channel")
        return normalise_destination(channel, value) if channel else value


class CreateVerificationRequest(BaseModel):
    """Either `channel` + `destination` (+ `fallback`, the two-step shorthand) or `steps`: after
    validation `channel`, `destination` and `fallback` always hold the first two steps, so the rest of
    the service (and the idempotency fingerprint) sees one shape whichever the caller used; a third
    step is only ever in `steps` (`step3`)."""

    model_config = ConfigDict(extra="forbid", strict=True, str_strip_whitespace=True, frozen=True)

    account_id: str = Field(min_length=1, max_length=255)
    # absent only when `steps` names the channels (the model validator fills them in)
    channel: MessageChannel = None  # type: ignore[assignment]
    destination: str = Field(default=None, min_length=3, max_length=320)  # type: ignore[assignment]
    locale: str | None = Field(default=None, max_length=35)
    template: str = Field(default="signup", min_length=1, max_length=64)
    # The end user's address as the site saw it: the per-client velocity limit counts on it.
    client_ip: str | None = Field(default=None, max_length=45)
    # the channel policy (absent: this channel only)
    fallback: FallbackRequest | None = None

    @field_validator("fallback")
    @classmethod
    def _fallback_on_the_other_channel(
        cls, value: FallbackRequest | None, info: ValidationInfo
    ) -> FallbackRequest | None:
        if value is not None and value.channel == info.data.get("channel"):
            raise ValueError("fallback.channel must differ from channel")
        return value

    # the ordered steps (absent: `channel` + `destination`, and `fallback` if given)
    steps: list[StepRequest] | None = Field(default=None, min_length=1)

    @field_validator("steps")
    @classmethod
    def _steps_in_order(cls, value: list[StepRequest] | None, info: ValidationInfo) -> list[StepRequest] | None:
        if value is None:
            return value
        if any(info.data.get(f) is not None for f in ("channel", "destination", "fallback")):
            raise ValueError("give either steps or channel and destination (with an optional fallback), not both")
        if len(value) > MAX_STEPS:
            raise ValueError(f"a verification takes at most {MAX_STEPS} steps")
        if len({s.channel for s in value}) != len(value):
            raise ValueError("each step must be on a channel of its own")
        if value[0].after_seconds != 0:
            raise ValueError("the first step is sent at once: its after_seconds must be 0")
        if any(b.after_seconds < a.after_seconds for a, b in zip(value, value[1:], strict=False)):
            raise ValueError("after_seconds must not decrease from one step to the next")
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _one_shape(cls, data: Any, handler: ModelWrapValidatorHandler[CreateVerificationRequest]) -> Any:
        # Without `steps`, channel and destination are required: their absence is told with every
        # other field's error at once, as a required field's would be.
        missing = (
            [f for f in ("channel", "destination") if data.get(f) is None]
            if isinstance(data, dict) and data.get("steps") is None
            else []
        )
        try:
            model = handler(data)
        except ValidationError as exc:
            if not missing:
                raise
            details = [_detail(e) for e in exc.errors() if e["loc"][:1] not in {(f,) for f in missing}]
            raise ValidationError.from_exception_data(cls.__name__, details + _missing(missing)) from None
        if missing:
            raise ValidationError.from_exception_data(cls.__name__, _missing(missing))
        return model._derive_steps()

    def _derive_steps(self) -> CreateVerificationRequest:
        if self.steps is None:
            return self
        first, *rest = self.steps
        # frozen model: the derived fields are written once, here, before anyone can read them
        object.__setattr__(self, "channel", first.channel)
        object.__setattr__(self, "destination", first.destination)
        if rest:
            second = rest[0]
            fallback = FallbackRequest(
                channel=second.channel, destination=second.destination, after_seconds=second.after_seconds
            )
            object.__setattr__(self, "fallback", fallback)
        return self

    @property
    def step3(self) -> StepRequest | None:
        """The third step, when `steps` has one."""
        return self.steps[2] if self.steps is not None and len(self.steps) > 2 else None

    # Where the confirmation pages send the person back to: checked against
    # RETURN_URL_ALLOWED_ORIGINS at the edge (api/return_url.py), stored with the verification.
    return_url: str | None = Field(default=None, min_length=8, max_length=1024)

    @field_validator("account_id")
    @classmethod
    def _account_printable(cls, value: str) -> str:
        if any(unicodedata.category(ch) in _REFUSED_CATEGORIES for ch in value):
            raise ValueError("account_id must not contain control or format characters")
        return value

    @field_validator("client_ip")
    @classmethod
    def _client_ip_address(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ipaddress.ip_address(value)
            except ValueError:
                raise ValueError("client_ip must be an IPv4 or IPv6 address") from None
        return value

    @field_validator("locale")
    @classmethod
    def _locale_shape(cls, value: str | None) -> str | None:
        if value is not None and not _LOCALE.fullmatch(value):
            raise ValueError("locale must be a BCP 47 tag such as 'en' or 'ja-JP'")
        return value

    @field_validator("template")
    @classmethod
    def _known_template(cls, value: str) -> str:
        if value not in templates.purposes():
            raise ValueError(f"unknown template; known: {', '.join(templates.purposes())}")
        return value

    @field_validator("destination")
    @classmethod
    def _destination_for_channel(cls, value: str, info: ValidationInfo) -> str:
        channel = info.data.get("channel")
        return normalise_destination(channel, value) if channel else value


def normalise_destination(channel: str, destination: str) -> str:
    if channel == "email":
        from email_validator import EmailNotValidError, validate_email  # only for email (25 ms)

        try:
            return validate_email(destination, check_deliverability=False).normalized
        except EmailNotValidError as exc:
            raise ValueError(f"destination is not a valid email address: {exc}") from None
    compact = destination.translate(_PHONE_SEPARATORS)
    if not _E164.fullmatch(compact):
        raise ValueError("destination must be an E.164 phone number such as +14155550100")
    import phonenumbers  # only for the phone channels (17 ms at import)

    try:
        number = phonenumbers.parse(compact, None)
    except phonenumbers.NumberParseException:
        raise ValueError("destination is not a valid E.164 phone number") from None
    if not phonenumbers.is_valid_number(number):
        raise ValueError("destination is not a valid E.164 phone number")
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


def valid_idempotency_key(value: str | None) -> TypeGuard[str]:
    # fullmatch: re's `$` would also accept a trailing newline. Blank keys are no key at all.
    return value is not None and bool(_PRINTABLE_ASCII.fullmatch(value)) and not value.isspace()


def field_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """Pydantic errors as problem+json `errors`, without echoing the input value."""
    errors = []
    for err in exc.errors(include_url=False, include_input=False, include_context=False):
        pointer = "/" + "/".join(str(p) for p in err["loc"]) if err["loc"] else ""
        message = err["msg"].removeprefix("Value error, ")
        errors.append({"pointer": "#" + pointer, "detail": message})
    return errors
