"""The end-of-run invariants of the chaos run (tools/chaos.py), checked against the database and
what the local providers actually took. Each check returns plain violations (strings); the figures
say how much was exercised. docs/reliability.md states what each one means.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from chaos_faults import Delivered
from signup_verification.outbox.config import RetryPolicy
from signup_verification.platform.database import Database
from signup_verification.verifications.tokens import Keyring

TERMINAL = {"accepted", "failed", "suppressed"}
LIMIT = 20  # violations listed per check; the count is always complete


@dataclass
class Ledger:
    """What the chaos driver did through the create API."""

    created: dict[str, uuid.UUID] = field(default_factory=dict)  # idempotency key -> verification id answered
    superseded_at: dict[uuid.UUID, float] = field(default_factory=dict)  # new verification -> time.time() after commit
    create_retries: int = 0  # 503s retried with the same key (replayed or created by the retry)


@dataclass
class Findings:
    violations: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    figures: dict[str, Any] = field(default_factory=dict)

    def fail(self, check: str, message: str) -> None:
        found = self.violations[check]
        if len(found) < LIMIT:
            found.append(message)
        self.figures[f"violations_{check}"] = int(self.figures.get(f"violations_{check}", 0)) + 1

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())


def check(
    db: Database,
    ledger: Ledger,
    deliveries: Iterable[Delivered],
    keyring: Keyring,
    policy: RetryPolicy,
    code_digits: int = 6,
) -> Findings:
    found = Findings()
    verifications = {
        r["id"]: r
        for r in db.rows(
            "SELECT id, account_id, channel, destination, key_id, token_nonce, status, expires_at, superseded_by,"
            " extract(epoch FROM expires_at)::float8 AS expires_epoch FROM verifications"
        )
    }
    intents = {
        r["verification_id"]: r
        for r in db.rows(
            "SELECT id, verification_id, channel, status, attempts, max_attempts, ambiguous_count, suppression_reason,"
            " lease_owner, undeliverable_reason FROM delivery_intents WHERE role = 'primary'"  # fallbacks: chaos_fallback.py; events: chaos_webhooks.py
        )
    }
    attempts: dict[int, list[dict]] = defaultdict(list)
    for row in db.rows(
        "SELECT id, attempt_id, intent_id, attempt_number, outcome, error_class, lease_owner,"
        " lease_version, extract(epoch FROM attempted_at)::float8 AS attempted_epoch"
        " FROM delivery_attempts ORDER BY id"
    ):
        attempts[row["intent_id"]].append(row)
    by_verification = _match_deliveries(found, verifications, deliveries, keyring, code_digits)
    _no_intent_lost(found, ledger, verifications, intents, attempts, by_verification, policy)
    _no_unexplained_duplicate(found, intents, attempts, by_verification)
    _no_dead_token_delivered(found, ledger, verifications, intents, attempts, by_verification)
    state_explained_by_attempts(found, intents, attempts)
    _no_stale_lease_write(found, attempts)
    _no_secret_stored(found, db, verifications, intents, keyring, code_digits)
    found.figures["final_status"] = dict(Counter(i["status"] for i in intents.values()))
    # handed to a provider and taken: accepted, or accepted and then reported undeliverable
    found.figures["accepted_by_provider"] = sum(
        1 for i in intents.values() if i["status"] == "accepted" or i.get("undeliverable_reason") is not None
    )
    found.figures["suppressed_by_reason"] = dict(
        Counter(i["suppression_reason"] for i in intents.values() if i["status"] == "suppressed")
    )
    found.figures["attempts"] = sum(len({a["attempt_id"] for a in rows}) for rows in attempts.values())
    found.figures["attempt_outcomes"] = dict(
        Counter(
            a["error_class"] if a["error_class"] == "lease_lost" else a["outcome"]
            for rows in attempts.values()
            for a in rows
            if a["outcome"] != "attempting"
        )
    )
    return found


def _match_deliveries(found: Findings, verifications, deliveries, keyring: Keyring, digits: int):
    """Each message a provider took -> the verification whose token or code it carried."""
    links: dict[str, uuid.UUID] = {}
    codes: dict[tuple[str, str], uuid.UUID] = {}
    for vid, v in verifications.items():
        key = keyring.get(v["key_id"])
        nonce = bytes(v["token_nonce"])
        if v["channel"] == "email":
            links[key.link_token(vid, nonce)] = vid
        else:  # each code channel its own code
            codes[(v["destination"], key.code(v["channel"], vid, nonce, digits))] = vid
    matched: dict[uuid.UUID, list[Delivered]] = defaultdict(list)
    count = 0
    for d in deliveries:
        count += 1
        vid = links.get(d.secret or "") if d.channel == "email" else codes.get((d.destination, d.secret or ""))
        if vid is None or verifications[vid]["destination"] != d.destination:
            found.fail("unknown_delivery", f"{d.channel} message to a destination/token no verification issued")
            continue
        matched[vid].append(d)
    found.figures["deliveries"] = count
    found.figures["deliveries_by_channel"] = dict(sorted(Counter(d.channel for d in deliveries).items()))
    return matched


def _no_intent_lost(found, ledger: Ledger, verifications, intents, attempts, delivered, policy: RetryPolicy) -> None:
    answered = set(ledger.created.values())
    if len(answered) != len(ledger.created):
        found.fail("lost", "two idempotency keys were answered with the same verification")
    if set(verifications) != answered:
        found.fail(
            "lost",
            f"{len(answered - set(verifications))} answered verifications missing from the database, "
            f"{len(set(verifications) - answered)} in the database never answered",
        )
    held = 0
    for vid in answered & set(verifications):
        intent = intents.get(vid)
        if intent is None:
            found.fail("lost", f"verification {vid} has no delivery intent")
            continue
        status = intent["status"]
        rows = [a for a in attempts[intent["id"]] if a["outcome"] != "attempting"]
        if status == "ambiguous":
            if policy.channel(intent["channel"]).ambiguity != "hold" or not rows or rows[-1]["outcome"] != "ambiguous":
                found.fail("lost", f"intent {intent['id']} is ambiguous without a hold policy or evidence")
            held += 1
        elif status not in TERMINAL:
            found.fail("lost", f"intent {intent['id']} ended {status}, neither terminal nor held")
        if status == "accepted" and not delivered.get(vid):
            found.fail("lost", f"intent {intent['id']} is accepted but no provider took its message")
    found.figures["held_ambiguous"] = held


def _no_unexplained_duplicate(found, intents, attempts, delivered) -> None:
    duplicates = explained = 0
    for vid, messages in delivered.items():
        intent = intents[vid]
        rows = attempts[intent["id"]]
        # an attempt the fused claim began and released before its send started cannot explain a message
        released = {a["attempt_id"] for a in rows if a["outcome"] == "released"}
        begun = sum(1 for a in rows if a["outcome"] == "attempting" and a["attempt_id"] not in released)
        ambiguous = sum(1 for a in rows if a["outcome"] == "ambiguous")
        if len(messages) > begun:
            found.fail("duplicate", f"intent {intent['id']}: {len(messages)} messages taken, {begun} attempts begun")
        if len(messages) > 1:
            duplicates += len(messages) - 1
            if len(messages) - 1 > ambiguous:
                found.fail(
                    "duplicate",
                    f"intent {intent['id']}: {len(messages)} messages taken, only {ambiguous} "
                    "ambiguous attempts recorded",
                )
            else:
                explained += len(messages) - 1
    found.figures["duplicate_messages"] = duplicates
    found.figures["duplicates_through_recorded_ambiguity"] = explained
    found.figures["intents_delivered_twice_or_more"] = sum(1 for m in delivered.values() if len(m) > 1)


def _no_dead_token_delivered(found, ledger: Ledger, verifications, intents, attempts, delivered) -> None:
    """No attempt begins once its verification is dead; no message is taken after its token expired.
    A message taken after a supersede is allowed only if its attempt had begun before (it was in flight)."""
    dead_at = {}
    for new_id, committed in ledger.superseded_at.items():
        for vid, v in verifications.items():
            if v["superseded_by"] == new_id:
                dead_at[vid] = committed
    in_flight = 0
    for vid, v in verifications.items():
        intent = intents.get(vid)
        if intent is None:
            continue
        released = {a["attempt_id"] for a in attempts[intent["id"]] if a["outcome"] == "released"}
        begun = [
            a["attempted_epoch"]
            for a in attempts[intent["id"]]
            if a["outcome"] == "attempting" and a["attempt_id"] not in released
        ]
        for started in begun:
            if started >= v["expires_epoch"]:
                found.fail("dead_token", f"intent {intent['id']}: an attempt began after its token expired")
            if vid in dead_at and started >= dead_at[vid]:
                found.fail("dead_token", f"intent {intent['id']}: an attempt began after it was superseded")
        for message in delivered.get(vid, []):
            if message.received_at >= v["expires_epoch"]:
                found.fail("dead_token", f"intent {intent['id']}: its message was taken after the token expired")
            if vid in dead_at and message.received_at >= dead_at[vid]:
                in_flight += 1
    found.figures["superseded"] = len(dead_at)
    found.figures["expired_verifications"] = sum(1 for v in verifications.values() if v["status"] == "expired")
    found.figures["sends_in_flight_when_superseded"] = in_flight


def state_explained_by_attempts(found, intents, attempts) -> None:
    """Every intent's status and attempt count follow from its attempt-log rows (shared with chaos_webhooks)."""
    for intent in intents.values():
        rows = attempts[intent["id"]]
        by_attempt: dict[str, list[dict]] = defaultdict(list)
        for a in rows:
            by_attempt[a["attempt_id"]].append(a)
        numbers = sorted({a["attempt_number"] for a in rows})
        label = f"intent {intent['id']} ({intent['status']})"
        if intent["attempts"] != len(by_attempt) or numbers != list(range(1, len(numbers) + 1)):
            found.fail("explained", f"{label}: attempts={intent['attempts']} but attempt rows {numbers}")
            continue
        previous_end = -1
        groups = [by_attempt[f"{intent['id']}:{number}"] for number in numbers]
        for number, group in zip(numbers, groups, strict=True):
            kinds = [a["outcome"] for a in group]
            if kinds[0] != "attempting" or not (len(kinds) == 2 or _resolved_by_evidence(group)):
                found.fail("explained", f"{label}: attempt {number} has rows {kinds}, expected begun then one outcome")
                break
            if group[0]["id"] < previous_end:
                found.fail("explained", f"{label}: attempt {number} began before attempt {number - 1} ended")
            previous_end = group[1]["id"]  # its own outcome; the provider's evidence may settle it later
        else:
            counting = _attempt_that_counts(found, label, groups)
            last = counting[-1]["outcome"] if counting else None
            allowed = {
                None: {"suppressed"},
                "accepted": {"accepted"},
                "failed": {"failed"},
                "retryable": {"failed", "suppressed"},
                "ambiguous": {"ambiguous", "failed", "suppressed"},
                "released": {"suppressed"},  # begun by the claim, never sent, then its link died
            }
            # accepted, then failed by a permanent provider report (tools/chaos_reports.py checks it)
            if intent.get("undeliverable_reason") is not None and last == "accepted":
                allowed = {"accepted": {"failed"}}
            if intent["status"] not in allowed[last]:
                found.fail("explained", f"{label}: last attempt outcome {last}")
            ambiguous = sum(1 for a in rows if a["outcome"] == "ambiguous")
            if ambiguous != intent["ambiguous_count"]:
                found.fail("explained", f"{label}: ambiguous_count={intent['ambiguous_count']}, {ambiguous} rows")


# Outcome rows written from the provider's evidence, not by a lease holder: the reconciler's
# Messages lookup of an ambiguous SMS, and a delivery report settling an ambiguous/retryable attempt as
# accepted. Their statements move only a row still in that state for that same attempt.
EVIDENCE = {"provider_lookup_found", "provider_lookup_absent", "provider_report"}


def _attempt_that_counts(found, label: str, groups: list[list[dict]]) -> list[dict] | None:
    """The attempt whose outcome the intent's status follows: the last one, unless the provider's
    evidence settled an earlier one after later attempts began; those must all have ended unsent
    (released), or a message was handed to a provider after the one the evidence settled."""
    for n, group in enumerate(groups):
        later = groups[n + 1 :]
        if len(group) == 3 and later and group[2]["id"] > later[0][0]["id"]:
            if any(g[-1]["outcome"] != "released" for g in later):
                found.fail("explained", f"{label}: attempt {group[0]['attempt_number']} was settled by the "
                                        "provider's evidence after a later attempt was sent")  # fmt: skip
            return group
    return groups[-1] if groups else None


def _resolved_by_evidence(group: list[dict]) -> bool:
    """begun, an ambiguous or retryable outcome, then one outcome from the provider's evidence."""
    return (
        len(group) == 3
        and group[1]["outcome"] in ("ambiguous", "retryable")
        and group[2]["error_class"] in EVIDENCE
        and group[2]["lease_owner"] is None
    )


def _no_stale_lease_write(found, attempts) -> None:
    """An outcome row carries the fence of the attempt it ends; fences only grow from attempt to attempt."""
    for rows in attempts.values():
        begun = {a["attempt_id"]: a for a in rows if a["outcome"] == "attempting"}
        last_version = 0
        for a in rows:
            start = begun.get(a["attempt_id"])
            if a["outcome"] == "attempting":
                if a["lease_version"] <= last_version:
                    found.fail("stale_write", f"attempt {a['attempt_id']} began under an older lease")
                last_version = a["lease_version"]
            elif a["error_class"] in EVIDENCE and a["lease_owner"] is None and start is not None:
                continue  # settled from the provider's evidence, fenced by its own statement (see EVIDENCE)
            elif (
                start is None
                or a["lease_version"] != start["lease_version"]
                or (a["error_class"] != "lease_lost" and a["lease_owner"] != start["lease_owner"])
            ):
                found.fail(
                    "stale_write", f"attempt {a['attempt_id']}: outcome {a['outcome']} written under another lease"
                )


_TOKEN_RUN = re.compile(r"[A-Za-z0-9_-]{43,}")  # a link token is 43 base64url characters


def _no_secret_stored(found: Findings, db: Database, verifications, intents, keyring: Keyring, digits: int) -> None:
    """No issued link token in any row of any table (as text), and no SMS code in the provider texts
    of its own intent (a code is 6 digits: elsewhere it would match ids by chance). The echo_url
    fault makes the mail server quote the live link."""
    tokens, codes = set(), {}
    for vid, v in verifications.items():
        key = keyring.get(v["key_id"])
        nonce = bytes(v["token_nonce"])
        if v["channel"] == "email":
            tokens.add(key.link_token(vid, nonce))
        else:
            codes[vid] = key.code(v["channel"], vid, nonce, digits)
    tables = [r[0] for r in db.run("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
    rows = 0
    for table in tables:
        query = f'SELECT t::text FROM "{table}" AS t'  # nosec B608 - table names from pg_tables, no input
        for (text,) in db.run(query):
            rows += 1
            for run in _TOKEN_RUN.findall(text or ""):
                if any(run[i : i + 43] in tokens for i in range(len(run) - 42)):
                    found.fail("secret_stored", f"a live link token is stored in {table}")
    texts = db.run(
        "SELECT i.verification_id, concat_ws(' ', i.last_error, string_agg(a.error_detail, ' '),"
        " string_agg(a.provider_ref, ' ')) FROM delivery_intents AS i"
        " LEFT JOIN delivery_attempts AS a ON a.intent_id = i.id WHERE i.channel IN ('sms', 'whatsapp', 'voice')"
        " GROUP BY i.verification_id, i.last_error"
    )
    for vid, text in texts:
        if vid in codes and codes[vid] in (text or ""):
            found.fail("secret_stored", f"the code of verification {vid} is stored in its provider texts")
    found.figures["rows_searched_for_secrets"] = rows
