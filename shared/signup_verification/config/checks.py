"""The checks across settings, in one place: a bad combination refuses to start, never fails sends.
Each records its problem with the others (config.load raises them together)."""

from __future__ import annotations

import dataclasses
from email.utils import parseaddr
from typing import TYPE_CHECKING

from ..api.config import SIGNED_TARGETS, AuthConfig
from ..platform.errors import ConfigError
from ..verifications.config import TWILIO_MAGIC_SENDERS
from .loader import Reading

if TYPE_CHECKING:
    from . import Config

SENDING_TARGET = "dispatch"  # the one target that sends


def across(config: Config, reading: Reading) -> Config:
    """`config` as the combinations of its settings leave it, problems recorded in `reading`."""
    _sender(config, reading)
    _twilio_test_sender(config, reading)
    _sms_budget(config, reading)
    _dispatch_identities(config, reading)
    if config.function_target == SENDING_TARGET:
        for problem in config.channels.missing():  # here with the rest, not at the first send
            reading.fail(problem)
    return dataclasses.replace(config, auth=_signed_targets(config.auth, reading))


def _sender(config: Config, reading: Reading) -> None:
    """EMAIL_FROM must be a real sender where email is really sent (a production console transport
    is refused anyway, and deploy-time commands such as `verifyctl migrate` carry no sender)."""
    email_from = config.dispatch.messages.email_from
    domain = parseaddr(email_from)[1].rpartition("@")[2].lower().rstrip(".")
    if config.is_production and config.channels.email_transport != "console" and domain in ("localhost", ""):
        reading.fail(f"EMAIL_FROM must be a real sender address in production, not {email_from!r}")


def _twilio_test_sender(config: Config, reading: Reading) -> None:
    """Twilio's test sender and its other magic `From` numbers exist only on test credentials, and with
    the test sender create accepts Twilio's magic `To` numbers (verifications/abuse.py): never in
    production, on any target."""
    sender = config.channels.twilio.sender
    if config.is_production and sender in TWILIO_MAGIC_SENDERS:
        reading.fail(
            f"TWILIO_FROM={sender} is one of Twilio's test-credential numbers (it accepts Twilio's magic test "
            "numbers at create): refused in production; set your own number or Messaging Service SID"
        )


def _dispatch_identities(config: Config, reading: Reading) -> None:
    """In production the fan-out identity starts fan-out invocations only, the nudge identity nudged
    ones only (api/dispatch.py), so the scheduled path needs ALLOWED_INVOKERS set, and set without
    either: unset, any identity Cloud Run admitted (theirs too) could start scheduled invocations. The
    two are distinct identities, so neither can start what the other may."""
    paths = {
        "DISPATCH_FANOUT_SERVICE_ACCOUNT": config.dispatch.fanout.service_account,
        "DISPATCH_NUDGE_SERVICE_ACCOUNT": config.dispatch.nudge.service_account,
    }
    paths = {name: identity.lower() for name, identity in paths.items() if identity}
    if not (config.is_production and config.function_target == SENDING_TARGET and paths):
        return
    if not config.auth.allowed_invokers:
        reading.fail(
            f"ALLOWED_INVOKERS must name the scheduler's service account when {' and '.join(paths)} "
            f"{'is' if len(paths) == 1 else 'are'} set in production: the scheduled path accepts the scheduler only"
        )
    for name, identity in paths.items():
        if identity in config.auth.allowed_invokers:
            path = "fan-out" if "FANOUT" in name else "nudged"
            reading.fail(f"ALLOWED_INVOKERS must not name {name}: that identity may start {path} invocations only")
    if len(paths) == 2 and len(set(paths.values())) == 1:
        reading.fail("DISPATCH_FANOUT_SERVICE_ACCOUNT and DISPATCH_NUDGE_SERVICE_ACCOUNT must be different identities")


def _sms_budget(config: Config, reading: Reading) -> None:
    """PRODUCT_NAME in every SMS template, with the longest code and the most minutes a message states."""
    from ..delivery.sms import check_sms_budget  # the template catalogue: loaded for this check

    try:
        check_sms_budget(config.dispatch.messages, config.create.ttl_seconds)
    except ConfigError as exc:
        reading.problems.extend(exc.problems)


def _signed_targets(auth: AuthConfig, reading: Reading) -> AuthConfig:
    """SIGNED_TARGETS takes effect with REQUEST_SIGNING_KEYS only; set without a key it is an error."""
    if auth.signing_keys:
        return auth
    if reading.is_set(SIGNED_TARGETS):
        reading.fail("SIGNED_TARGETS is set but REQUEST_SIGNING_KEYS holds no key")
    return dataclasses.replace(auth, signed_targets=frozenset())
