"""The chaos run's provider reports: SendGrid events and Twilio status callbacks about the
messages the run's providers accepted, posted while workers die and the database restarts, as the
providers post them in the wild: duplicated (a retried batch, a repeated callback), reordered
(delivered before sent, a batch shuffled) and late (held until the faults are over, an
asynchronous bounce after delivered). Each report goes through the target's own parsing
(delivery/reports.py: sendgrid_events, twilio_observation) and ingest; a batch the database
refused (the restart) is posted again later, as a provider retries a non-2xx.

    Reports   the hook tools/chaos.py calls: a reporter thread, `caught_up` for the drain,
              `finish` for what is still held, then `check`

The reports cover every kind of verdict (delivery/classification/): delivered, deferred, hard
bounces and spam reports (the recipient's fault), blocks and quota drops (ours), Twilio's
unreachable handset (final, nobody's fault), carrier filtering (ours) and unknown numbers; on
WhatsApp a number without WhatsApp (the recipient's) and Meta's failures (nobody's); a call answered
by a person or a machine (detection's result, then `completed`), busy, not answered or failed.
Some reports come early: a final one about an attempt still in flight (its send not settled, or
settled ambiguous, or retryable once its ambiguous hold passed), linked by the attempt it names (a
Twilio callback's URL, SendGrid's custom_args), as a provider posts it when its failure is faster
than our batch.

Invariants (docs/reliability.md): the observation log explains every state: every delivered_at has
a delivered observation of its intent, every undeliverable intent a final one, no intent is both,
every failed delivery has its reason; every report the ingest acknowledged is stored exactly once
and nothing else is stored; a final report that came before its attempt was found sent (settled
accepted, found by the reconciler's lookup, or ambiguous: the report proves it sent) failed it for
good, unless a delivery came first, and nothing was sent again for it, and its settlement names the
message or call the report did (chaos_settlements.py); a suppression only for a
destination whose intent failed or was reported for the recipient's fault: no sender or account fact
ever suppresses.
"""

from __future__ import annotations

import json
import random
import threading
import uuid
from collections import Counter, defaultdict

from chaos_checks import Findings
from chaos_faults import FILTERED_PREFIX, never_taken
from chaos_settlements import check_settlements_named
from signup_verification.delivery import reports
from signup_verification.outbox.config import FailurePolicy
from signup_verification.platform.database import Database, UnavailableError

_ACCEPTED = """
SELECT a.id, a.attempt_id, a.intent_id, a.channel, a.provider_ref,
       CASE WHEN i.role = 'fallback' THEN i.destination ELSE v.destination END AS destination
  FROM delivery_attempts AS a
  JOIN delivery_intents AS i ON i.id = a.intent_id
  JOIN verifications AS v ON v.id = i.verification_id
 WHERE a.outcome = 'accepted' AND a.channel IN ('email', 'sms', 'whatsapp', 'voice') AND a.id > :after
 ORDER BY a.id LIMIT 500
"""
# Attempts handed to the provider whose send is not settled as sent yet: in flight (its start ran: a
# provider cannot report an attempt a claim began but nobody sent), ambiguous, or retryable after that.
_IN_FLIGHT = (
    "SELECT i.id AS intent_id, i.id || ':' || i.attempts AS attempt_id, i.channel,"
    " CASE WHEN i.role = 'fallback' THEN i.destination ELSE v.destination END AS destination"
    " FROM delivery_intents AS i JOIN verifications AS v ON v.id = i.verification_id"
    " WHERE ((i.status = 'attempting' AND i.sending_at IS NOT NULL) OR i.status = 'ambiguous'"
    "        OR (i.status = 'retryable' AND EXISTS (SELECT 1 FROM delivery_attempts AS a WHERE a.intent_id = i.id"
    "                                               AND a.attempt_number = i.attempts AND a.outcome = 'ambiguous')))"
    " AND i.attempts > 0 AND i.channel IN ('email', 'sms', 'whatsapp', 'voice')"
    " ORDER BY i.id LIMIT 200"
)


# A later attempt begun after a final report proved the earlier one was sent (it may have been: an
# ambiguous outcome; or it was: accepted). A claim that committed while the report's ingest waited
# for the intent may win the race, so one begun within a few seconds of the report is not counted.
_SENT_AGAIN = """
SELECT DISTINCT o.attempt_id, o.intent_id, later.attempt_id AS later_attempt
  FROM delivery_observations AS o
  JOIN delivery_attempts AS sent
    ON sent.intent_id = o.intent_id AND sent.attempt_id = o.attempt_id AND sent.outcome IN ('ambiguous', 'accepted')
  JOIN delivery_attempts AS later
    ON later.intent_id = o.intent_id AND later.attempt_number > sent.attempt_number AND later.outcome = 'attempting'
 WHERE o.attempt_id = ANY (:attempts) AND o.permanent AND later.observed_at > o.received_at + interval '5 seconds'
"""
_LAST_ACCEPTED = (
    "SELECT coalesce(max(id), 0) FROM delivery_attempts WHERE outcome = 'accepted'"
    " AND channel IN ('email', 'sms', 'whatsapp', 'voice')"
)


class Reports:
    """Everything the chaos run adds for provider reports; tools/chaos.py calls these few methods."""

    bounce_share, async_bounce_share, deferred_share = 0.04, 0.02, 0.1  # email: the recipient's
    blocked_share, quota_share, spam_share = 0.02, 0.01, 0.02  # email: ours, ours, the recipient's (after delivery)
    # sms: 30005 unknown number (the recipient's), 30003 handset off (nobody's), 30007 filtered (ours)
    failed_share, undelivered_share, filtered_share = 0.04, 0.03, 0.01
    # whatsapp: 63003 no WhatsApp on the number (the recipient's), 63009 Meta failed (nobody's)
    no_whatsapp_share, meta_share = 0.03, 0.02
    # voice: the call's end (busy, no-answer, failed: nobody answered) or a machine answering
    busy_share, no_answer_share, call_failed_share, machine_share = 0.04, 0.04, 0.02, 0.05
    duplicate_share, reorder_share, late_share = 0.15, 0.3, 0.2
    early_share = 0.3  # of the attempts seen in flight: a final report before their settle
    # Faults of our account (the quota drops) are reported, counted and never suppress; the run never
    # holds the channel for them (a hold would stop its sends until an operator resumed it: tests cover
    # holds). Route faults (blocks, carrier filtering) count as in production: the genuine users' never
    # reach a hold, the attacker's may hold its own route only (tools/chaos_attack.py checks both).
    failures = FailurePolicy(hold_after=10**9)

    def __init__(self, run):
        self.run = run
        self.rng = random.Random(run.config.seed + 13)
        self.lock = threading.Lock()
        self.watermark = 0  # the last accepted attempt row reported about
        self.later: list[tuple[str, list]] = []  # (provider, observations): late, duplicates, refused
        self.acknowledged: dict[tuple[str, str], int] = {}  # (provider, dedup key) -> intent id, once ingested
        self.early_seen: set[str] = set()  # attempts seen in flight (each given an early report or not, once)
        self.early: dict[str, int] = {}  # attempt id -> intent id of the early final reports ingested
        self.figures: Counter[str] = Counter()

    def threads(self) -> list[threading.Thread]:
        return [threading.Thread(target=self._loop, name="reporter")]

    def caught_up(self, db: Database) -> bool:
        """For the drain: every accepted attempt reported about, nothing held back."""
        last = db.run(_LAST_ACCEPTED)[0][0]
        with self.lock:
            return self.watermark >= last and not self.later

    def finish(self, db: Database) -> None:
        self._report_new(db)
        self._post_later(db)

    def _loop(self) -> None:
        db = Database(self.run.pg.params, application_name="chaos-reports")
        try:
            while not self.run.stopping.wait(0.5):
                try:
                    self._report_early(db)
                    self._report_new(db)
                    if not self.run.chaos_on.is_set():  # the faults are over: what was held arrives now
                        self._post_later(db)
                except UnavailableError:
                    self.figures["reports_database_unavailable"] += 1
        except Exception as exc:  # a broken reporter is the harness's failure, reported as such
            self.run.errors.append(f"chaos reporter: {type(exc).__name__}: {exc}")
            raise
        finally:
            db.close()

    # -- building and posting -------------------------------------------------------------------
    def _report_new(self, db: Database) -> None:
        rows = db.rows(_ACCEPTED, after=self.watermark)
        email: list[dict] = []
        sms: list[dict] = []
        for row in rows:
            (email if row["channel"] == "email" else sms).extend(self._reports_of(row))
        if email:
            self.rng.shuffle(email)  # SendGrid's batches are in no particular order
            self._post(db, "sendgrid", reports.sendgrid_events(json.dumps(email).encode()).observations)
        for form in sms:
            try:
                self._post(db, "twilio", [reports.twilio_observation(form)])
            except reports.MalformedReport:  # an accepted SMS without a sid: Twilio could not report it
                self.figures["reports_sms_without_sid"] += 1
        if rows:
            with self.lock:
                self.watermark = rows[-1]["id"]

    def _report_early(self, db: Database) -> None:
        """A final report about some attempts not yet settled as sent, linked by the attempt it names."""
        for row in db.rows(_IN_FLIGHT):
            if row["attempt_id"] in self.early_seen:
                continue
            self.early_seen.add(row["attempt_id"])
            if never_taken(row["destination"] or ""):
                continue
            if self.rng.random() >= self.early_share:
                continue
            sid = uuid.UUID(int=self.rng.getrandbits(128)).hex
            attempt = {**row, "provider_ref": None}
            if row["channel"] == "email":
                provider = "sendgrid"
                # a full or disabled mailbox: final, nobody's fault (suppresses nothing, the attacker's neither)
                event = {**self._sendgrid_event(attempt, "bounce"), "status": "5.2.2",
                         "bounce_classification": "Mailbox Unavailable"}  # fmt: skip
                observations = reports.sendgrid_events(json.dumps([event]).encode()).observations
            else:
                provider = "twilio"
                if row["channel"] == "voice":
                    form = {"CallSid": "CA" + sid, "CallStatus": "busy", "CallDuration": "0"}
                else:
                    form = self._twilio_form({**attempt, "provider_ref": "SM" + sid}, "undelivered", "30003")
                attempt_query = f"attempt={row['attempt_id']}"  # the StatusCallback's, as Twilio signed it
                observations = [reports.callback_attempt(reports.twilio_observation(form), attempt_query)]
            self._post(db, provider, observations)
            with self.lock:
                self.early[row["attempt_id"]] = row["intent_id"]
            self.figures["reports_early"] += 1

    def _reports_of(self, attempt: dict) -> list:
        """What the provider says now about one accepted attempt; what it says later goes to `later`."""
        rng = self.rng
        if attempt["channel"] == "email":
            events = [self._sendgrid_event(attempt, "deferred")] if rng.random() < self.deferred_share else []
            roll = rng.random()
            kind = (
                "bounce" if roll < self.bounce_share
                else "blocked" if roll < self.bounce_share + self.blocked_share
                else "dropped" if roll < self.bounce_share + self.blocked_share + self.quota_share
                else "delivered"
            )  # fmt: skip
            final = self._sendgrid_event(attempt, kind)
            if final["event"] == "delivered" and rng.random() < self.async_bounce_share:
                late_bounce = self._sendgrid_event(attempt, "bounce")  # bounced after it was delivered
                self._hold("sendgrid", reports.sendgrid_events(json.dumps([late_bounce]).encode()).observations)
                self.figures["reports_async_bounces"] += 1
            events.append(final)
            if final["event"] == "delivered" and rng.random() < self.spam_share:
                events.append(self._sendgrid_event(attempt, "spamreport"))  # read, then reported as spam
                self.figures["reports_spam"] += 1
            parse = lambda e: reports.sendgrid_events(json.dumps([e]).encode()).observations  # noqa: E731
            provider = "sendgrid"
        elif not attempt["provider_ref"]:
            return []
        elif attempt["channel"] == "voice":
            events = self._call_forms(attempt)
            parse = lambda f: [reports.twilio_observation(f)]  # noqa: E731
            provider = "twilio"
            if rng.random() < self.reorder_share:
                events.reverse()  # completed before detection's result
                self.figures["reports_reordered"] += 1
        else:
            roll = rng.random()
            filtered = (attempt["destination"] or "").startswith(FILTERED_PREFIX)  # the attacker's (chaos_attack.py)
            final_status, code = self._whatsapp_final(roll) if attempt["channel"] == "whatsapp" else (
                ("undelivered", "30007") if filtered
                else ("failed", "30005") if roll < self.failed_share
                else ("undelivered", "30003") if roll < self.failed_share + self.undelivered_share
                else ("undelivered", "30007") if roll < self.failed_share + self.undelivered_share + self.filtered_share
                else ("delivered", None)
            )  # fmt: skip
            events = [self._twilio_form(attempt, s, None) for s in ("queued", "sent")]
            events.append(self._twilio_form(attempt, final_status, code))
            if rng.random() < self.reorder_share:
                events.reverse()  # delivered before sent before queued
                self.figures["reports_reordered"] += 1
            parse = lambda f: [reports.twilio_observation(f)]  # noqa: E731
            provider = "twilio"
        if rng.random() < self.late_share:
            self._hold(provider, parse(events.pop()))  # the final report arrives after the faults
            self.figures["reports_late"] += 1
        if events and rng.random() < self.duplicate_share:
            self._hold(provider, parse(rng.choice(events)))  # sent again: a retried batch
            self.figures["reports_duplicated"] += 1
        self.figures[f"reports_{provider}"] += len(events)
        return events

    def _sendgrid_event(self, attempt: dict, event: str) -> dict:
        ref = attempt["provider_ref"] or "none"
        fields = {
            "email": "chaos@example.org",
            "timestamp": 1_800_000_000,
            "event": event,
            "sg_event_id": uuid.UUID(int=self.rng.getrandbits(128)).hex,
            "sg_message_id": f"{ref}.filterdrecv-chaos",
            "intent_id": str(attempt["intent_id"]),
            "attempt_id": attempt["attempt_id"],
        }
        if event == "bounce":
            fields.update(type="bounce", status="5.1.1")
        elif event == "blocked":
            fields.update(event="bounce", type="blocked", status="5.7.1")
        elif event == "dropped":
            fields.update(reason="Recipient List over Package Quota")
        return fields

    @staticmethod
    def _twilio_form(attempt: dict, status: str, code: str | None) -> dict[str, str]:
        form = {"MessageSid": attempt["provider_ref"] or "", "MessageStatus": status}
        if attempt["channel"] == "whatsapp":
            form["ChannelPrefix"] = "whatsapp"
        return {**form, "ErrorCode": code} if code else form

    def _whatsapp_final(self, roll: float) -> tuple[str, str | None]:
        if roll < self.no_whatsapp_share:
            return "undelivered", "63003"
        if roll < self.no_whatsapp_share + self.meta_share:
            return "failed", "63009"
        return "read", None

    def _call_forms(self, attempt: dict) -> list[dict[str, str]]:
        """A call's callbacks: detection's result then `completed` when it was answered, else its end."""
        sid, roll = attempt["provider_ref"], self.rng.random()
        ends = [("busy", self.busy_share), ("no-answer", self.no_answer_share), ("failed", self.call_failed_share)]
        for status, share in ends:
            if roll < share:
                self.figures[f"reports_calls_{status}"] += 1
                return [{"CallSid": sid, "CallStatus": status, "CallDuration": "0"}]
            roll -= share
        answered_by = "machine_start" if roll < self.machine_share else "human"
        self.figures[f"reports_calls_{answered_by}"] += 1
        return [{"CallSid": sid, "AnsweredBy": answered_by, "MachineDetectionDuration": "2400"},
                {"CallSid": sid, "CallStatus": "completed", "CallDuration": "12"}]  # fmt: skip

    def _hold(self, provider: str, observations: list) -> None:
        with self.lock:
            self.later.append((provider, observations))

    def _post_later(self, db: Database) -> None:
        with self.lock:
            held, self.later = self.later, []
        self.rng.shuffle(held)
        for provider, observations in held:
            self._post(db, provider, observations)

    def _post(self, db: Database, provider: str, observations: list) -> None:
        try:
            result = reports.ingest(db, provider, observations, self.failures)
        except UnavailableError:
            self.figures["reports_refused_and_retried"] += 1
            self._hold(provider, observations)  # the provider retries a batch we did not answer 2xx
            return
        self.figures["reports_ingested"] += result.stored
        self.figures["reports_duplicates_answered"] += result.duplicates
        self.figures["reports_unknown"] += result.unknown
        self.figures["reports_sender_faults"] += result.sender_faults
        self.figures["reports_route_faults"] += result.route_faults
        with self.lock:
            for o in observations:
                self.acknowledged.setdefault((provider, o.dedup_key), o.intent_id or 0)

    def check(self, db: Database, findings: Findings) -> None:
        check(db, findings, set(self.acknowledged))
        check_early(db, findings, dict(self.early))
        check_settlements_named(db, findings)
        findings.figures.update(sorted(self.figures.items()))


def check(db: Database, found: Findings, acknowledged: set[tuple[str, str]]) -> None:
    intents = db.rows(
        "SELECT id, status, delivered_at, undeliverable_reason, failure_category, failure_fault FROM delivery_intents"
        " WHERE channel <> 'webhook'"  # every message channel: a WhatsApp or voice refusal may suppress too
    )
    observed: dict[int, list[dict]] = defaultdict(list)
    stored: Counter[tuple[str, str]] = Counter()
    for o in db.rows(
        "SELECT provider, dedup_key, intent_id, event, permanent, fault FROM delivery_observations ORDER BY id"
    ):
        observed[o["intent_id"]].append(o)
        stored[(o["provider"], o["dedup_key"])] += 1
    for i in intents:
        said = observed[i["id"]]
        label = f"intent {i['id']} ({i['status']})"
        if i["delivered_at"] is not None and not any(o["event"] in ("delivered", "read") for o in said):
            found.fail("reports_explained", f"{label}: delivered_at without a delivered observation")
        if i["undeliverable_reason"] is not None and not any(o["permanent"] for o in said):
            found.fail("reports_explained", f"{label}: undeliverable without a permanent observation")
        if i["delivered_at"] is not None and i["undeliverable_reason"] is not None:
            found.fail("reports_explained", f"{label}: both delivered and undeliverable")
        if i["status"] == "failed" and i["failure_category"] is None:
            found.fail("reports_explained", f"{label}: failed without a reason")
    for key, n in stored.items():
        if n > 1:
            found.fail("reports_duplicate", f"report {key} stored {n} times")
        elif key not in acknowledged:
            found.fail("reports_duplicate", f"report {key} stored, but no provider report was acknowledged for it")
    for key in acknowledged - set(stored):
        found.fail("reports_lost", f"report {key} acknowledged but not in the observation log")
    blamed = {i for i, said in observed.items() if any(o["fault"] == "recipient" for o in said)}
    blamed |= {i["id"] for i in intents if i["failure_fault"] == "recipient"}  # refused at submission
    for s in db.rows("SELECT channel, intent_id, reason FROM destination_suppressions"):
        if s["intent_id"] not in blamed:
            found.fail("reports_suppression", f"{s['channel']} destination suppressed for intent {s['intent_id']} "
                       "without a recipient's fault")  # fmt: skip
    found.figures["reports_sender_fault_observations"] = sum(
        1 for said in observed.values() for o in said if o["fault"] == "sender_or_account"
    )
    found.figures["reports_observations"] = sum(stored.values())
    found.figures["reports_delivered_intents"] = sum(1 for i in intents if i["delivered_at"] is not None)
    found.figures["reports_undeliverable_intents"] = sum(1 for i in intents if i["undeliverable_reason"] is not None)


def check_early(db: Database, found: Findings, early: dict[str, int]) -> None:
    """Every attempt reported final before it was found sent (settled accepted, accepted by the lookup,
    or settled by the report itself when ambiguous) failed for good with that report (undeliverable),
    unless it was reported delivered first; and no attempt of its intent began after that proof (no
    step sent again, no second message)."""
    if not early:
        return
    for r in db.rows(_SENT_AGAIN, attempts=list(early)):
        found.fail("reports_early", f"intent {r['intent_id']}: attempt {r['later_attempt']} began after a final "
                   f"report proved attempt {r['attempt_id']} was sent")  # fmt: skip
    rows = db.rows(
        "SELECT a.attempt_id, i.id, i.status, i.delivered_at, i.undeliverable_reason FROM delivery_attempts AS a"
        " JOIN delivery_intents AS i ON i.id = a.intent_id"
        " WHERE a.attempt_id = ANY (:attempts) AND a.outcome = 'accepted'",
        attempts=list(early),
    )
    applied = 0
    for r in rows:
        if r["delivered_at"] is None and (r["status"] != "failed" or r["undeliverable_reason"] is None):
            found.fail("reports_early", f"intent {r['id']} ({r['status']}): attempt {r['attempt_id']} was reported "
                       "final before it was found sent, and is not failed")  # fmt: skip
        applied += r["undeliverable_reason"] is not None
    found.figures["reports_early_applied"] = applied
