"""The operator's levers: the SMS and call budgets, a held channel or route, the suppression list."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from ...runtime import Runtime
from . import add_command, add_group, operator


def cmd_sms_resume(args: argparse.Namespace, runtime: Runtime) -> int:
    """Lift a paused SMS budget for the rest of this hour: another SMS_MAX_PER_HOUR sends."""
    from ...operations import budgets

    left = budgets.resume(runtime.db, runtime.config.signals, "sms", operator())
    print(json.dumps({"sms_budget_left": left}) if args.json else f"SMS resumed: {left} sends left this hour")
    return 0


def cmd_voice_resume(args: argparse.Namespace, runtime: Runtime) -> int:
    """Lift a paused call budget for the rest of this hour: another VOICE_MAX_PER_HOUR calls."""
    from ...operations import budgets

    left = budgets.resume(runtime.db, runtime.config.signals, "voice", operator())
    print(json.dumps({"voice_budget_left": left}) if args.json else f"Calls resumed: {left} calls left this hour")
    return 0


def cmd_channel_resume(args: argparse.Namespace, runtime: Runtime) -> int:
    """Lift a hold (the whole channel, or one route of it) once its cause is fixed."""
    from ...operations import channel_holds

    scope = args.scope
    held = channel_holds.resume(runtime.db, scope, operator())
    if args.json:
        print(json.dumps({"channel": scope.channel, "scope": scope.scope, "route": str(scope) if scope.route else None,
                          "was_held": held}))  # fmt: skip
    else:
        print(f"{scope} resumed: sends start at the next dispatch" if held else f"{scope} was not held")
    return 0


def _hold_scope(text: str):
    from ...operations.channel_holds import HoldScope

    try:
        return HoldScope.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_suppression_list(args: argparse.Namespace, runtime: Runtime) -> int:
    """Destinations a provider reported permanently undeliverable: keys, never destinations."""
    from ...operations import suppression_list

    found = suppression_list.entries(runtime.db)
    print(json.dumps([s.as_json() for s in found]) if args.json else suppression_list.render(found))
    return 0


def cmd_suppression_clear(args: argparse.Namespace, runtime: Runtime) -> int:
    """Let a destination receive messages again: by destination (normalised as create does) or --key."""
    from ...operations import suppression_list

    if args.key:
        channel, prefix = _key_prefix(args)
        cleared = suppression_list.clear_key(runtime.db, channel, prefix, operator())
    else:
        channel, keys = _suppression_keys(args, runtime)
        cleared = any(
            [suppression_list.clear(runtime.db, channel, k, operator()) for k in keys]
        )  # every one, not the first
    if args.json:
        print(json.dumps({"cleared": cleared}))
    else:
        print("cleared: the destination may receive messages again" if cleared else "no such suppression")
    return 0 if cleared else 1


_KEY_PREFIX = re.compile(r"^[0-9a-fA-F]{8,64}$")


def _key_prefix(args: argparse.Namespace) -> tuple[str, str]:
    """--key: the hex key `suppression list` shows (its first 12 digits, or the whole of --json's)."""
    if not _KEY_PREFIX.match(args.key):
        raise ValueError("--key must be the hex key `verifyctl suppression list` shows (at least 8 of its digits)")
    if args.channel is None:
        raise ValueError("--key needs --channel email|sms")
    return args.channel, args.key


def _suppression_keys(args: argparse.Namespace, runtime: Runtime) -> tuple[str, list[bytes]]:
    from pydantic import ValidationError

    from ...api.models import CreateVerificationRequest
    from ...verifications import abuse

    if not args.destination:
        raise ValueError("give the destination to clear, or --key HEX --channel email|sms")
    channel = args.channel or ("email" if "@" in args.destination else "sms")
    try:
        request = CreateVerificationRequest.model_validate(
            {"account_id": "verifyctl", "channel": channel, "destination": args.destination}
        )
    except ValidationError:
        raise ValueError(f"not a valid {channel} destination") from None
    policy = runtime.config.create.abuse
    # under every key of the ring: an entry written before a TOKEN_KEYS rotation is found too
    found = abuse.destination_keys([k.secret for k in runtime.keyring.keys], policy, channel, request.destination)
    return channel, list(dict.fromkeys(found.exact + found.alias))  # its exact entry, and an older alias-keyed one


def add_sms(sub: Any) -> None:
    actions = add_group(
        sub,
        "sms",
        "the global SMS budget (SMS_MAX_PER_HOUR), WhatsApp messages included",
        "The global SMS budget: past SMS_MAX_PER_HOUR in a UTC hour, SMS and WhatsApp sends "
        "pause (intents stay eligible) until the next hour or a resume.",
        "sms_command",
    )
    add_command(
        actions,
        "resume",
        "grant this hour another budget's worth of SMS after a pause",
        "Grant the current UTC hour another SMS_MAX_PER_HOUR sends (recorded with who asked).",
        cmd_sms_resume,
    )


def add_voice(sub: Any) -> None:
    actions = add_group(
        sub,
        "voice",
        "the global call budget (VOICE_MAX_PER_HOUR)",
        "The global call budget: past VOICE_MAX_PER_HOUR in a UTC hour, calls pause (intents stay "
        "eligible) until the next hour or a resume.",
        "voice_command",
    )
    add_command(
        actions,
        "resume",
        "grant this hour another budget's worth of calls after a pause",
        "Grant the current UTC hour another VOICE_MAX_PER_HOUR calls (recorded with who asked).",
        cmd_voice_resume,
    )


def add_channel(sub: Any) -> None:
    actions = add_group(
        sub,
        "channel",
        "a channel, or one route of it, held after a run of faults of our side",
        "A run of faults of our account (credentials, a suspended account, an exhausted quota) holds "
        "the channel; route faults (our sender towards one SMS destination country or one email "
        "receiving domain) from several destinations hold that route only. Held deliveries wait, none "
        "fails. `status` shows each hold and its scope.",
        "channel_command",
    )
    resume = add_command(
        actions,
        "resume",
        "let a held channel or route send again once its cause is fixed",
        "Lift the hold of one scope and start its fault count afresh (recorded with who asked): "
        "`sms` or `email` for the whole channel, `sms:FR` for SMS to one country, "
        "`email:example.com` for one receiving domain.",
        cmd_channel_resume,
    )
    resume.add_argument("scope", type=_hold_scope, metavar="SCOPE", help="email | sms | sms:<COUNTRY> | email:<domain>")


def add_suppression(sub: Any) -> None:
    actions = add_group(
        sub,
        "suppression",
        "destinations refused after a delivery failed for the recipient's fault",
        "The suppression list: create refuses an exact destination whose delivery failed for the "
        "recipient's fault (a hard bounce, an invalid or unsubscribed number, a spam report), until it is "
        "cleared here or SUPPRESSION_DAYS pass.",
        "suppression_command",
    )
    add_command(actions, "list", "show the current entries (keys, never destinations)",
                "The entries that still block create, newest first.", cmd_suppression_list)  # fmt: skip
    clear = add_command(actions, "clear", "let a destination receive messages again",
                        "Remove the entry of a destination (or of a --key from `list`).", cmd_suppression_clear)  # fmt: skip
    clear.add_argument("destination", nargs="?", help="the email address or E.164 number")
    clear.add_argument("--channel", choices=("email", "sms"), help="default: email if it has an @")
    clear.add_argument("--key", help="the hex key `suppression list` shows (instead of a destination)")
