"""The signup site's webhooks: `webhooks test` (one signed test event to WEBHOOK_URL, and the
receiver's answer) and `webhooks replay` (finished events sent again through the outbox, with their
original webhook-id)."""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from ...platform.errors import ConfigError
from ...runtime import Runtime
from . import add_command, add_group
from .observe import verification_id_of

_DURATION = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def cmd_webhooks_test(args: argparse.Namespace, runtime: Runtime) -> int:
    from ...operations import webhook_probe

    config = runtime.config
    channels = config.channels
    if not channels.webhook.url and not config.is_production:  # nothing set, and no `verifyctl dev` found
        raise ConfigError(
            f"WEBHOOK_URL is unset and no `verifyctl dev` runs for {config.local_dir}: set it to your endpoint, "
            "or start `python3 dev.py run` (its demo site's receiver, or yours with WEBHOOK_URL)"
        )
    answer = webhook_probe.probe(channels.webhook, channels.send_timeout_seconds)
    print(json.dumps(answer.as_json()) if args.json else answer.render())
    return 0 if answer.outcome == "accepted" else 1


def cmd_webhooks_replay(args: argparse.Namespace, runtime: Runtime) -> int:
    from ...outbox import replay

    webhook = runtime.config.channels.webhook
    if not webhook.enabled:
        raise ConfigError("WEBHOOK_URL is unset: webhooks are off, nothing would send a replayed event")
    since = parse_since(args.since) if args.since else None
    verification = verification_id_of(args.verification) if args.verification else None
    replayed = replay.replay_events(runtime.db, webhook.max_attempts, since=since, verification_id=verification)
    if args.json:
        print(json.dumps({"replayed": [_event(e) for e in replayed]}))
    elif replayed:
        print(f"replayed {len(replayed)} event(s): sent again at the next dispatch, each with its webhook-id")
        for e in replayed:
            print(
                f"  {e.verification_id} {e.event_type}{'/' + e.event_subject if e.event_subject else ''} (was {e.was})"
            )
    else:
        print("no finished event matches: nothing replayed (events still pending are sent as they are)")
    return 0


def _event(e: Any) -> dict[str, Any]:
    from ...delivery.events import webhook_id

    return {
        "verification_id": str(e.verification_id),
        "type": e.event_type,
        "subject": e.event_subject,
        "webhook_id": webhook_id(e.verification_id, e.event_type, e.event_subject),
        "was": e.was,
    }


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """An RFC 3339 time with its offset (2026-12-01T12:00:00Z), or a duration back from now (90m, 2h, 1d)."""
    found = _DURATION.match(text.strip())
    if found:
        return (now or datetime.now(UTC)) - timedelta(**{_UNITS[found.group(2)]: int(found.group(1))})
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        at = None
    if at is None or at.tzinfo is None:
        raise ValueError(
            f"--since {text!r}: give an RFC 3339 time with its offset (2026-12-01T12:00:00Z) or 90m, 2h, 1d"
        )
    return at


def add_webhooks(sub: Any) -> None:
    actions = add_group(
        sub,
        "webhooks",
        "the signup site's webhooks: send a test event, replay recorded events",
        "The signup site's webhook endpoint (WEBHOOK_URL): check it with a signed test event, or send "
        "recorded events again after it was down.",
        "webhooks_command",
    )
    add_command(
        actions,
        "test",
        "send one signed webhook.test event to WEBHOOK_URL and print the answer",
        "POST one `webhook.test` event, signed with WEBHOOK_SECRET as every event is, straight to WEBHOOK_URL "
        "(never recorded, never retried), and print the receiver's answer and what the outbox would make of "
        "it. Exit 0 when an event answered so is accepted, 1 otherwise.",
        cmd_webhooks_test,
        database=False,
    )
    replay = add_command(
        actions,
        "replay",
        "send finished events again through the outbox, with their original webhook-id",
        "Make the accepted and failed events written since a time (or of one verification) ready again, "
        "with a fresh WEBHOOK_MAX_ATTEMPTS: the next dispatch sends each one with the webhook-id it had, so "
        "the receiver deduplicates what it already handled. Events still pending are left as they are.",
        cmd_webhooks_replay,
    )
    which = replay.add_mutually_exclusive_group(required=True)
    which.add_argument("--since", help="events written since: an RFC 3339 time (2026-12-01T12:00:00Z) or 90m, 2h, 1d")
    which.add_argument("--verification", metavar="ID", help="the events of this verification")
