"""The channel policy under chaos: mixed policies in the chaos run (tools/chaos.py).

A share of the run's verifications is created with a fallback on the other channel: after a few
seconds (policy `fallback`) or at once (`both`). Some of their primary destinations are ones the
chaos providers refuse for good (SMTP 550 / Twilio 21211), so their primary fails and must bring
the fallback forward; some verifications are confirmed (by the primary's secret) before their
fallback is due; some of those sent both at once are confirmed by both secrets, the primary's then the
fallback's a moment later (a second proof). A share of those with a timer take a third step, on
WhatsApp (on SMS when the first is a WhatsApp message), a few seconds after the fallback (`steps`): some are proved by the fallback's code between
the two, so the WhatsApp step must never be sent, and a failing primary brings the fallback forward
while the third waits its turn (or comes forward when the fallback fails too). Workers are SIGKILLed at random throughout, so
kills land between a primary's failure (which brings the fallback forward in the same statement) and
the fallback's claim, and the database restarts under the confirmations.

At the end, besides the run's own invariants (which read the primary intents), this checks:
    fallback_sent_after_confirm  a verification confirmed before its fallback was due (and before its
                                 primary failed) never had its fallback attempted or taken by a provider
    fallback_not_attempted       a step that failed for good always led to the next one being attempted,
                                 unless the verification died first (then suppressed, saying why)
    fallback_lost                every fallback intent ended terminal (or held ambiguous), explained
    fallback_delivery            every fallback message a provider took belongs to a fallback intent that
                                 began that many attempts, and none was taken after the token expired
    proofs                       every verified verification has its first proof, then at most one proof of
                                 each other step's channel (each after the one before), one
                                 verification.verified event and one verification.proved event per proof, of
                                 that proof's channel
    proof_unsent                 no code proved a step whose message could not have reached its person:
                                 each code proof's step had an attempt begun before the proof that may
                                 have reached the provider (taken, ambiguous and not found absent, or
                                 unsettled), not one proven unsent (released, retryable, refused at
                                 submission, found absent by the provider's lookup)
"""

from __future__ import annotations

import heapq
import random
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from chaos_checks import TERMINAL, Findings
from chaos_faults import Delivered, Faults
from signup_verification.platform.database import Database, UnavailableError
from signup_verification.verifications import confirm
from signup_verification.verifications.tokens import Keyring


@dataclass(frozen=True)
class FallbackShare:
    share: float = 0.25  # verifications created with a fallback
    both_share: float = 0.3  # of those: after_seconds 0
    after_seconds: tuple[int, int] = (4, 12)  # policy fallback: below the short TTL (30 s)
    failing_primary_share: float = 0.25  # of those: a primary destination the providers refuse for good
    # ...with a timer long enough that the primary fails before it (the backlog at the start takes ~20 s)
    failing_after_seconds: int = 28
    confirm_first_share: float = 0.3  # of those with a timer: confirmed before the fallback is due
    second_proof_share: float = 0.5  # of those sent both at once: confirmed by both secrets, the primary's first
    three_step_share: float = 0.4  # of those with a timer: a third step on WhatsApp after the fallback
    step3_after: tuple[int, int] = (4, 8)  # seconds after the fallback's (and below the short TTL)
    proved_at_step_2_share: float = 0.5  # of the three-step ones: proved by the fallback's code before step 3
    code_looks: int = 40  # a code is typed once its message arrived: looked for every 0.5 s, this many times


@dataclass
class Traffic:
    """Decides each creation's policy and confirms some verifications before their fallback is due."""

    faults: Faults
    keyring: Keyring
    seed: int
    share: FallbackShare = field(default_factory=FallbackShare)
    figures: Counter = field(default_factory=Counter)
    _due: list = field(default_factory=list)  # heap of (confirm at, verification id, channel, looks so far)
    # the confirmations' own connection, set up as the confirm API's (webhooks on: their events recorded)
    confirm_db: Database | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed + 14)

    def body(self, body: dict, index: int, superseding: bool) -> dict:
        """The create body, with a fallback for a share of the first creations."""
        s = self.share
        if superseding or self.rng.random() >= s.share:
            return body
        primary = body["channel"]
        other = "sms" if primary == "email" else "email"
        after = 0 if self.rng.random() < s.both_share else self.rng.randint(*s.after_seconds)
        if self.rng.random() < s.failing_primary_share:
            body = {**body, "destination": self._refused(primary, index)}
            after = s.failing_after_seconds
            self.figures["fallback_created_failing_primary"] += 1
        destination = f"+1415{5000000 + index:07d}" if other == "sms" else f"fallback{index}@chaos.example.com"
        self.figures["fallback_created_" + ("both" if after == 0 else "fallback")] += 1
        fallback = {"channel": other, "destination": destination, "after_seconds": after}
        if after == 0 or self.rng.random() >= s.three_step_share:
            return {**body, "fallback": fallback}
        self.figures["fallback_created_three_steps"] += 1
        step3 = {
            "channel": next(c for c in ("whatsapp", "sms") if c not in (primary, other)),
            "destination": f"+1415{6000000 + index:07d}",
            "after_seconds": min(after + self.rng.randint(*s.step3_after), 29),  # below the short TTL (30 s)
        }
        first = {"channel": body["channel"], "destination": body["destination"]}
        rest = {k: v for k, v in body.items() if k not in ("channel", "destination")}
        return {**rest, "steps": [first, fallback, step3]}

    def created(self, vid: uuid.UUID, body: dict) -> None:
        """After the create committed: maybe schedule a confirmation before the fallback is due, or (both
        at once) one by each secret, the fallback's second, or (three steps) one by the fallback's code
        after the fallback's time and before the third step's."""
        steps = body.get("steps")
        if steps is not None:
            first, fallback, step3 = steps
            if self.rng.random() < self.share.proved_at_step_2_share:
                at = time.time() + self.rng.uniform(fallback["after_seconds"] + 0.5, step3["after_seconds"] - 1.5)
                heapq.heappush(self._due, (at, vid.int, fallback["channel"], 0))
                return
            body = {"channel": first["channel"], "fallback": fallback}  # else: as a fallback verification
        fallback = body.get("fallback")
        if fallback is None:
            return
        if fallback["after_seconds"] == 0:
            if self.rng.random() < self.share.second_proof_share:
                first = time.time() + self.rng.uniform(2.0, 6.0)  # after the messages went out, mostly
                heapq.heappush(self._due, (first, vid.int, body["channel"], 0))
                heapq.heappush(self._due, (first + self.rng.uniform(0.0, 2.0), vid.int, fallback["channel"], 0))
            return
        if self.rng.random() >= self.share.confirm_first_share:
            return
        at = time.time() + self.rng.uniform(0.2, max(0.3, fallback["after_seconds"] - 2.0))
        heapq.heappush(self._due, (at, vid.int, body["channel"], 0))

    def tick(self, db: Database, wait: bool = False) -> None:
        """Confirm what is due (all of it, sleeping until each, with `wait`, then close)."""
        while self._due and (wait or self._due[0][0] <= time.time()):
            at, vid_int, channel, looks = heapq.heappop(self._due)
            time.sleep(max(0.0, at - time.time()))
            if not self._confirm(self.confirm_db or db, uuid.UUID(int=vid_int), channel):
                if looks < self.share.code_looks:  # not received yet: the person waits for it
                    heapq.heappush(self._due, (time.time() + 0.5, vid_int, channel, looks + 1))
                else:
                    self.figures["fallback_confirm_code_never_received"] += 1
        if wait and self.confirm_db is not None:
            self.confirm_db.close()
            self.confirm_db = None

    def _confirm(self, db: Database, vid: uuid.UUID, channel: str) -> bool:
        """Type the channel's secret, as its person would: a code only once its message reached them (its
        send accepted by the provider, or ambiguous: maybe taken). False: not received yet, look again."""
        for _ in range(50):
            try:
                step = db.single(_RECEIVED, v=vid, c=channel) if channel != "email" else None
                if step is not None and step["never"]:  # ended unsent: nothing for its person to type
                    self.figures["fallback_confirm_code_never_sent"] += 1
                    return True
                if step is not None and not step["received"]:
                    return False
                row = db.single("SELECT key_id, token_nonce FROM verifications WHERE id = :id", id=vid)
                key = self.keyring.get(row["key_id"])
                nonce = bytes(row["token_nonce"])
                if channel == "email":
                    outcome = confirm.confirm_link(db, self.keyring, key.link(vid, nonce))
                else:  # the code of the channel being confirmed (each code channel its own)
                    outcome = confirm.confirm_code(db, self.keyring, vid, key.code(channel, vid, nonce, 6))
                self.figures[f"fallback_confirm_{outcome.result}"] += 1
                return True
            except UnavailableError:  # the database restart: a person would press the button again
                time.sleep(0.3)
        return True

    def _refused(self, channel: str, index: int) -> str:
        """A destination the chaos providers refuse for good (Faults.permanent)."""
        for n in range(100_000):
            if channel == "email":
                candidate = f"bounce{index}x{n}@chaos.example.com"
            else:  # San Francisco numbers, outside the ranges the run's other numbers use
                candidate = f"+1415{7000000 + (index * 7919 + n) % 2000000:07d}"
            if self.faults.permanent(candidate):
                return candidate
        raise RuntimeError("no refused destination found")


# Whether a step's message reached its person: its provider took it (or may have: ambiguous).
_RECEIVED = """
SELECT status IN ('accepted', 'ambiguous') OR undeliverable_reason IS NOT NULL AS received,
       status IN ('suppressed', 'failed') AND undeliverable_reason IS NULL AS never
  FROM delivery_intents WHERE verification_id = :v AND channel = :c AND event_type IS NULL
"""


# -- the checks -----------------------------------------------------------------------------------------
_FALLBACK_INTENTS = """
SELECT f.id, intent_step(f.verification_id, f.id) AS step, f.verification_id, f.channel, f.status, f.attempts, f.ambiguous_count, f.suppression_reason,
       f.destination, f.policy, f.after_seconds, f.brought_forward_at,
       extract(epoch FROM f.created_at + make_interval(secs => f.after_seconds))::float8 AS due_epoch,
       extract(epoch FROM f.brought_forward_at)::float8 AS brought_forward_epoch,
       p.status AS previous_status, extract(epoch FROM p.failed_at)::float8 AS previous_failed_epoch,
       v.status AS verification_status, v.key_id, v.token_nonce,
       extract(epoch FROM v.verified_at)::float8 AS verified_epoch,
       extract(epoch FROM v.expires_at)::float8 AS expires_epoch
  FROM delivery_intents AS f
  -- the step before it (the primary for the fallback, the fallback for a third step)
  CROSS JOIN LATERAL (SELECT p.status, p.failed_at FROM delivery_intents AS p
                       WHERE p.verification_id = f.verification_id AND p.role <> 'event' AND p.id < f.id
                       ORDER BY p.id DESC LIMIT 1) AS p
  JOIN verifications AS v ON v.id = f.verification_id
 WHERE f.role = 'fallback'
"""


def split(db: Database, deliveries: Iterable[Delivered], keyring: Keyring) -> tuple[list[Delivered], dict[int, list]]:
    """The provider's messages: (those of primary intents, fallback intent id -> its messages)."""
    secrets: dict[tuple[str, str, str], int] = {}
    for f in db.rows(_FALLBACK_INTENTS):
        key = keyring.get(f["key_id"])
        vid, nonce = f["verification_id"], bytes(f["token_nonce"])
        secret = key.link_token(vid, nonce) if f["channel"] == "email" else key.code(f["channel"], vid, nonce, 6)
        secrets[(f["channel"], f["destination"] or "", secret)] = f["id"]
    primary, fallback = [], defaultdict(list)
    for d in deliveries:
        intent = secrets.get((d.channel, d.destination, d.secret or ""))
        if intent is None:
            primary.append(d)
        else:
            fallback[intent].append(d)
    return primary, fallback


def check(db: Database, found: Findings, fallback_deliveries: dict[int, list[Delivered]]) -> None:
    rows = db.rows(_FALLBACK_INTENTS)
    begun: dict[int, int] = defaultdict(int)
    ambiguous: dict[int, int] = defaultdict(int)
    for intent_id, outcome in db.run(
        "SELECT a.intent_id, a.outcome FROM delivery_attempts AS a JOIN delivery_intents AS i ON i.id = a.intent_id"
        " WHERE i.role = 'fallback'"
    ):
        begun[intent_id] += outcome == "attempting"
        ambiguous[intent_id] += outcome == "ambiguous"
    figures: Counter = Counter()
    # steps a proof (or another end) suppressed while their batch waited, claimed ahead, to start
    figures["fallback_suppressed_claimed_ahead"] = db.single(
        "SELECT count(*) AS n FROM delivery_attempts AS a JOIN delivery_intents AS i ON i.id = a.intent_id"
        " WHERE i.role = 'fallback' AND i.status = 'suppressed' AND a.outcome = 'released'"
    )["n"]
    for f in rows:
        label = f"fallback intent {f['id']} ({f['policy']}, {f['status']})"
        messages = fallback_deliveries.get(f["id"], [])
        # when the step before it failed for good: at its last attempt, or later when a report said it
        # never arrived
        verified, failed_at = (
            f["verified_epoch"],
            f["previous_failed_epoch"] if f["previous_status"] == "failed" else None,
        )
        figures[f"fallback_final_{f['status']}"] += 1
        if f["status"] == "suppressed":
            figures[f"fallback_suppressed_{f['suppression_reason']}"] += 1
        if f["step"] == 3 and f["attempts"]:
            figures["step3_attempted"] += 1
        if f["attempts"]:
            reason = "primary_failed" if f["brought_forward_at"] else ("at_once" if f["policy"] == "both" else "timer")
            figures[f"fallback_attempted_{reason}"] += 1
        # confirmed before its time (and before any primary failure brought it forward): never sent
        if verified is not None and verified < f["due_epoch"] and (failed_at is None or verified < failed_at):
            figures["fallback_confirmed_before_due"] += 1
            if f["step"] == 3:  # proved (by step 2's code, mostly) before the third step's time
                figures["step3_proved_before_due"] += 1
            if f["attempts"] or messages or begun[f["id"]]:
                found.fail("fallback_sent_after_confirm", f"{label}: confirmed before due, yet attempted or taken")
            elif (f["status"], f["suppression_reason"]) != ("suppressed", "verified"):
                found.fail("fallback_sent_after_confirm", f"{label}: confirmed first, not suppressed as verified")
        # a primary failed for good: the fallback was attempted, unless the verification died first
        if failed_at is not None:
            figures["fallback_primary_failed"] += 1
            if f["attempts"] == 0:
                died_first = f["status"] == "suppressed" and f["verification_status"] != "pending"
                if not died_first:
                    found.fail(
                        "fallback_not_attempted", f"{label}: its primary failed for good, it was never attempted"
                    )
                else:
                    figures["fallback_primary_failed_but_verification_died_first"] += 1
            if f["attempts"] and failed_at < f["due_epoch"] - 1 and f["brought_forward_at"] is None:
                found.fail(
                    "fallback_not_attempted", f"{label}: its primary failed before it was due, not brought forward"
                )
        if f["status"] not in TERMINAL and f["status"] != "ambiguous":
            found.fail("fallback_lost", f"{label}: neither terminal nor held")
        # suppressed never sends: one claimed ahead and suppressed before its start is fenced out there; only an
        # ambiguous one (a send may have happened, then its verification ended) can have a message taken
        if f["status"] == "suppressed" and messages and not f["ambiguous_count"]:
            found.fail("fallback_sent_after_confirm", f"{label}: suppressed ({f['suppression_reason']}), yet sent")
        if f["status"] == "accepted" and not messages:
            found.fail("fallback_lost", f"{label}: accepted but no provider took its message")
        if len(messages) > begun[f["id"]] or len(messages) - 1 > ambiguous[f["id"]]:
            found.fail("fallback_delivery", f"{label}: {len(messages)} messages taken, {begun[f['id']]} attempts begun")
        if any(m.received_at >= f["expires_epoch"] for m in messages):
            found.fail("fallback_delivery", f"{label}: a message was taken after the token expired")
    figures["fallback_intents"] = len(rows)
    figures["fallback_messages_taken"] = sum(len(m) for m in fallback_deliveries.values())
    found.figures.update({k: v for k, v in sorted(figures.items())})
    check_proofs(db, found)


_PROOFS = """
SELECT v.id, v.channel, v.fallback_channel, v.step3_channel, v.verified_channel, v.verified_at, v.second_proof_at,
       v.second_proof_channel, v.third_proof_at,
       (SELECT count(*) FROM delivery_intents AS e
         WHERE e.verification_id = v.id AND e.event_type = 'verification.verified') AS verified_events,
       (SELECT coalesce(array_agg(e.event_subject ORDER BY e.id), '{}') FROM delivery_intents AS e
         WHERE e.verification_id = v.id AND e.event_type = 'verification.proved') AS proved_subjects
  FROM verifications AS v
 WHERE v.status = 'verified' AND v.verified_channel IS NOT NULL
"""


# Each step's first attempt whose message may have reached the person, by verification and channel,
# from the attempt log alone: the provider took it (`accepted`, at the settle, by its lookup or by a
# report), or it was ambiguous and no lookup found it absent, or it has no outcome yet. An attempt
# released, settled retryable or refused (`failed` alone), or found absent, reached no one.
_FIRST_SENT = """
SELECT i.verification_id, i.channel, min(a.attempted_at) AS first_sent
  FROM delivery_intents AS i
  JOIN delivery_attempts AS a ON a.intent_id = i.id AND a.outcome = 'attempting'
 CROSS JOIN LATERAL (
     SELECT count(*) FILTER (WHERE r.outcome = 'accepted') AS taken,
            count(*) FILTER (WHERE r.outcome = 'ambiguous') AS ambiguous,
            count(*) FILTER (WHERE r.error_class = 'provider_lookup_absent') AS absent, count(*) AS outcomes
       FROM delivery_attempts AS r
      WHERE r.intent_id = a.intent_id AND r.attempt_number = a.attempt_number AND r.outcome <> 'attempting') AS o
 WHERE i.event_type IS NULL
   AND (o.taken > 0 OR (o.ambiguous > 0 AND o.absent = 0) OR o.outcomes = 0)
 GROUP BY i.verification_id, i.channel
"""


def check_proofs(db: Database, found: Findings) -> None:
    """Every secret proved its own destination at most once, the first verified it, each proof wrote
    its event (where its session recorded events at all: chaos_webhooks.py counts those), and no code
    proved before its step's send began (the link is only ever known from its message)."""
    seconds = 0
    first_sent = {(r["verification_id"], r["channel"]): r["first_sent"] for r in db.rows(_FIRST_SENT)}
    for v in db.rows(_PROOFS):
        _proofs_of_sent_steps(found, v, first_sent)
        expected = [v["verified_channel"]]
        steps = [c for c in (v["channel"], v["fallback_channel"], v["step3_channel"]) if c]
        if v["second_proof_at"] is not None:
            seconds += 1
            other = v["second_proof_channel"] or next((c for c in steps[:2] if c != v["verified_channel"]), None)
            expected.append(other)
            if v["fallback_channel"] is None or v["second_proof_at"] < v["verified_at"]:
                found.fail(
                    "proofs", f"verification {v['id']}: a second proof without a second secret, or before the first"
                )
        if v["third_proof_at"] is not None:  # the one step left
            expected += [c for c in steps if c not in expected]
            if len(expected) != 3 or v["third_proof_at"] < v["second_proof_at"]:
                found.fail("proofs", f"verification {v['id']}: a third proof without a third step, or out of order")
        recorded = v["verified_events"] or v["proved_subjects"]  # none: its session had webhooks off
        if recorded and (v["verified_events"] != 1 or list(v["proved_subjects"]) != expected):
            found.fail(
                "proofs",
                f"verification {v['id']}: {v['verified_events']} verification.verified, proved events for"
                f" {list(v['proved_subjects'])}, proofs {expected}",
            )
    found.figures["proofs_second"] = seconds


def _proofs_of_sent_steps(found: Findings, v: dict, first_sent: dict) -> None:
    """Each code proof of the verification (first, second, third) came after its step's send began."""
    later = v["second_proof_channel"] or next(
        (c for c in (v["channel"], v["fallback_channel"]) if c != v["verified_channel"]), None
    )
    made = [(v["verified_channel"], v["verified_at"]), (later, v["second_proof_at"])]
    steps = [c for c in (v["channel"], v["fallback_channel"], v["step3_channel"]) if c]
    made.append((next((c for c in steps if c not in (made[0][0], made[1][0])), None), v["third_proof_at"]))
    for channel, at in made:
        if at is None or channel in (None, "email"):
            continue
        sent = first_sent.get((v["id"], channel))
        if sent is None or sent > at:
            found.fail(
                "proof_unsent",
                f"verification {v['id']}: its {channel} code proved while its message had reached no one",
            )
