"""Duty: an ambiguous Twilio send (the provider answered 5xx or nothing after the request was sent)
is looked up with Twilio's list API of its resource instead of waiting for an operator or resending:
an SMS or a WhatsApp message in the Messages list (`To` `whatsapp:+...` for WhatsApp), a call in the
Calls list. None of them has an idempotency key, so without the lookup an ambiguous one is either held for
an operator or sent again, a second message or call to the person.

    found (a message or call To the destination, From our sender, created within the window) ->
        accepted with its sid (later status callbacks attach to it);
    absent once the listing has settled (TWILIO_LOOKUP_SETTLE_SECONDS after the attempt began) ->
        retryable (failed when no attempt is left): it was never created, so one new attempt sends it once;
    not settled yet, or the lookup failed (timeout, 5xx, 429, bad credentials) -> left as it is.

Bounded for the three channels together (one account's API): at most TWILIO_LOOKUP_MAX_CALLS requests
per run, each with its own timeout, spaced by the rate budget, and never past the run's time budget.
Never sends. The request filters on To and From only, not DateSent or StartTime: a message still
queued has no date_sent yet, a call not yet answered no start_time, and either would look absent.
Residual window (docs/deploy.md): a message or call Twilio accepted but does not list within the
settle time is sent twice. Transition: outbox.transitions.resolve_by_lookup.
"""

from __future__ import annotations

import json
import logging
import time
from base64 import b64encode
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from urllib.parse import quote, urlencode

import urllib3

from ...outbox import transitions
from ...platform.catalogue import catalogue
from ..config import WHATSAPP_PREFIX, TwilioLookupConfig
from .duty import Duty, DutyReport, SweepContext

_SQL = catalogue("operations")

_log = logging.getLogger("signup_verification.operations.reconciler.lookup_ambiguous_twilio")
_CANDIDATES = _SQL["lookup_ambiguous_twilio"]
_KNOWN_SIDS = _SQL["lookup_known_sids"]
EARLY = timedelta(seconds=60)  # clock skew between us and Twilio's date_created


@dataclass(frozen=True)
class Listing:
    """Where Twilio lists one channel's sends, and how our destination and its sids look there."""

    resource: str  # the list API, Messages or Calls (`<resource>.json`); its answer's list: the name in lower case
    to_prefix: str  # before the E.164 number in `To` and `to`
    sid_prefixes: tuple[str, ...]


LISTINGS = {
    "sms": Listing("Messages", "", ("SM", "MM")),
    "whatsapp": Listing("Messages", WHATSAPP_PREFIX, ("SM", "MM")),
    "voice": Listing("Calls", "", ("CA",)),
}


class LookupFailed(Exception):
    def __init__(self, reason: str, stop: bool = False):
        super().__init__(reason)
        self.reason, self.stop = reason, stop  # stop: every lookup would fail (credentials, account)


def sweep(context: SweepContext) -> DutyReport:
    report = DutyReport(DUTY.name)
    config = context.config.twilio_lookup
    if config is None:
        report.skipped = "no channel sent through Twilio with its credentials, or TWILIO_LOOKUP=off"
        return report
    senders = config.senders()
    candidates = context.db.rows(_CANDIDATES, channels=list(senders), limit=config.max_calls)
    pool = urllib3.PoolManager(num_pools=1, maxsize=1, retries=False)
    decided: list[tuple[int, str, str | None]] = []
    try:
        for n, row in enumerate(candidates):
            if context.budget.exhausted():
                report.drained = False
                break
            if n:
                time.sleep(config.min_interval_seconds)
            channel = row["channel"]
            try:
                found = lookup(
                    pool, config, LISTINGS[channel], row["destination"], senders[channel], row["attempted_at"]
                )
            except LookupFailed as failed:
                report.moves.update({"lookup_failed": 1})
                _log.warning("ambiguous %s lookup failed: %s", channel, failed.reason,
                             extra={"json_fields": {"event": "twilio_lookup", "intent_id": row["intent_id"],
                                                    "channel": channel, "outcome": "failed",
                                                    "reason": failed.reason}})  # fmt: skip
                if failed.stop:
                    break
                continue
            known = {r["provider_ref"] for r in context.db.rows(_KNOWN_SIDS, sids=found)} if found else set()
            sid = next((f for f in found if f not in known), None)  # the closest one no attempt explains
            settled = _now(row["attempted_at"]) - row["attempted_at"] >= timedelta(seconds=config.settle_seconds)
            if sid is not None or settled:
                decided.append((row["intent_id"], row["attempt_id"], sid))
        report.batches = 1 if candidates else 0
        if len(candidates) >= config.max_calls:
            report.drained = False
    finally:
        pool.clear()
    moved = transitions.resolve_by_lookup(context.db, decided)
    report.moves.update(f"ambiguous_lookup_to_{status}" for status in moved.values())  # Counter: one per row
    return report


def lookup(
    pool: urllib3.PoolManager,
    config: TwilioLookupConfig,
    listing: Listing,
    destination: str,
    sender: str,
    attempted_at: datetime,
) -> list[str]:
    """The sids of the messages or calls to `destination` from `sender` ('': any) created around
    `attempted_at`, closest first; LookupFailed. The caller drops those another attempt already
    explains (an older signup's message or call to the same number)."""
    to = listing.to_prefix + destination
    query = {"To": to, "PageSize": "50"}
    if sender:
        query["From"] = sender
    account = quote(config.account_sid, safe="")
    url = f"{config.api_url.rstrip('/')}/2010-04-01/Accounts/{account}/{listing.resource}.json?" + urlencode(query)
    token = b64encode(f"{config.account_sid}:{config.auth_token}".encode()).decode()
    try:
        answer = pool.request(
            "GET", url, headers={"Authorization": f"Basic {token}", "Accept": "application/json"},
            timeout=urllib3.Timeout(total=config.timeout_seconds), retries=False, redirect=False,
        )  # fmt: skip
    except urllib3.exceptions.HTTPError as exc:
        raise LookupFailed(f"no answer: {type(exc).__name__}") from None
    if answer.status in (401, 403, 404):
        raise LookupFailed(f"twilio {answer.status}: credentials or account", stop=True)
    if answer.status != 200:
        raise LookupFailed(f"twilio {answer.status}")
    key = listing.resource.lower()
    try:
        listed = json.loads(answer.data)[key]
    except (ValueError, KeyError, TypeError):
        listed = None
    if not isinstance(listed, list):  # absence is only proven by a real (empty) list
        raise LookupFailed(f"twilio answered something other than a list of {key}")
    latest = attempted_at + timedelta(seconds=config.window_seconds)
    near: list[tuple[float, str]] = []
    for item in listed:
        created = _date(item.get("date_created")) if isinstance(item, dict) else None
        if created is None or item.get("to") != to:
            continue
        if attempted_at - EARLY <= created <= latest and str(item.get("sid") or "").startswith(listing.sid_prefixes):
            near.append((abs((created - attempted_at).total_seconds()), str(item["sid"])))
    return [sid for _, sid in sorted(near)]


def _date(value: object) -> datetime | None:
    try:
        return parsedate_to_datetime(str(value)) if value else None
    except (TypeError, ValueError):
        return None


def _now(like: datetime) -> datetime:
    return datetime.now(like.tzinfo)


DUTY = Duty(
    "lookup_ambiguous_twilio",
    sweep,
    moves=(
        "ambiguous_lookup_to_accepted",
        "ambiguous_lookup_to_retryable",
        "ambiguous_lookup_to_failed",
        "lookup_failed",
    ),
    recovery=False,
)
