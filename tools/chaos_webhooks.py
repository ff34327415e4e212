"""The chaos run's webhook side: a signup site whose receiver misbehaves, people who
confirm while the faults are on, and the end-of-run invariants of the events.

    ChaosReceiver   a real HTTP endpoint that verifies every signature with the standardwebhooks
                    library and, while `faults.enabled`, times out (event taken, answer too late),
                    resets after taking the event, resets before taking it, answers 429 with
                    Retry-After or 503; it is also stopped outright for a while (connections refused)
    Webhooks        the hook tools/chaos.py calls: the receiver, the WEBHOOK_* environment of every
                    worker and reconciler, a confirmer thread and the outage, then `check`

Invariants (docs/reliability.md): every verified verification has exactly one logical
`verification.verified` event; every event was delivered (taken by the receiver) at least once and
settled accepted; every receipt of one event carries the same webhook-id; a second receipt only
after an ambiguous attempt recorded for that event; no signature was refused.
"""

from __future__ import annotations

import random
import sys
import threading
import uuid
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from chaos_checks import Findings, state_explained_by_attempts  # noqa: E402
from chaos_faults import Faults  # noqa: E402
from signup_verification.delivery.events import webhook_id  # noqa: E402
from signup_verification.delivery.webhook_config import WebhookConfig  # noqa: E402
from signup_verification.platform.database import Database, UnavailableError  # noqa: E402
from signup_verification.verifications import confirm as confirmations  # noqa: E402
from support.fakes.http import Answer  # noqa: E402
from support.fakes.webhooks import FakeWebhookReceiver  # noqa: E402

KINDS = ["timeout", "reset_after", "reset_before", "throttle", "server_error"]
# The chosen email verifications whose message was accepted and that are still pending: clickable now.
_RECEIVED = """
SELECT v.id, v.key_id, v.token_nonce FROM verifications AS v
  JOIN delivery_intents AS i ON i.verification_id = v.id AND i.role = 'primary'
 WHERE v.id = ANY (:ids) AND v.channel = 'email' AND v.status = 'pending' AND i.status = 'accepted'
"""


class _Chaotic(dict):
    """Per-request answers drawn at random while the faults are on (keyed by webhook-id)."""

    def __init__(self, faults: Faults):
        super().__init__()
        self.faults = faults

    def get(self, key, default=None):
        f = self.faults
        kind = f.draw("webhook")
        if kind == "timeout":  # taken (recorded), answered after the worker gave up: ambiguous, may duplicate
            return Answer(delay=f.answer_delay)
        if kind == "reset_after":
            return Answer(reset=True)
        if kind == "reset_before":
            return Answer(reset=True, deliver=False)
        if kind == "throttle":
            return Answer(429, {"error": "slow down"}, headers={"Retry-After": "1"})
        if kind == "server_error":
            return Answer(503, {"error": "unavailable"})
        return default


class ChaosReceiver(FakeWebhookReceiver):
    def __init__(self, faults: Faults):
        super().__init__()
        self.faults = faults
        self.by_destination = _Chaotic(faults)
        self.httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]

    def up(self) -> None:
        super().up()
        self.httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]


class Webhooks:
    """Everything the chaos run adds for webhooks; tools/chaos.py calls these few methods."""

    confirm_share = 0.35  # of the email verifications, confirmed during the run once their email arrived
    outage_at, outage_seconds = 0.55, 4.0  # fraction of the chaos phase; the receiver is down this long

    def __init__(self, run):
        self.run = run
        run.faults.forced["webhook"] = list(KINDS)
        # The workers and reconcilers get webhooks on as production does (WEBHOOK_URL: the setting in
        # their start-up packet). The harness's own sessions (the creator, the fallbacks' confirmations in
        # chaos_fallback.py) are people using the product too: the database default covers them, so
        # every verification verified in this run must have its event.
        db = Database(run.pg.params)
        try:
            for name, value in WebhookConfig(url="http://chaos/", max_attempts=30).session_settings().items():
                db.execute_script(f"ALTER DATABASE \"{run.pg.params.database}\" SET {name} = '{value}'")
        finally:
            db.close()
        self.receiver = ChaosReceiver(run.faults).start()
        self.confirmed: set[uuid.UUID] = set()
        self.outages = 0

    def env(self) -> dict[str, str]:
        return {
            "WEBHOOK_URL": self.receiver.endpoint,
            "WEBHOOK_SECRET": ",".join(self.receiver.secrets),
            "AMBIGUOUS_HOLD_SECONDS_WEBHOOK": "2",
            "WEBHOOK_MAX_ATTEMPTS": "30",  # the short chaos backoff (1,2,4 s) must outlast the outage
        }

    def threads(self) -> list[threading.Thread]:
        return [
            threading.Thread(target=self._confirm_loop, name="confirmer"),
            threading.Thread(target=self._outage, name="receiver-outage"),
        ]

    def _confirm_loop(self) -> None:
        """People clicking their links while workers die and the receiver fails: a share of the email
        verifications, each once its email was accepted (as a person can only click a link they got;
        confirming earlier would suppress the email, not exercise the webhook). The confirm is the
        product's, on a session with webhooks on; tokens are derived as the worker does."""
        run = self.run
        rng = random.Random(run.config.seed + 7)
        settings = WebhookConfig(url=self.receiver.endpoint).session_settings()
        db = Database(run.pg.params, application_name="chaos-confirmer", session_settings=settings)
        seen: set[uuid.UUID] = set()
        chosen: set[uuid.UUID] = set()
        try:
            while not run.stopping.wait(0.5) and run.chaos_on.is_set():  # one indexed probe per poll
                for vid in [v for v in list(run.ledger.created.values()) if v not in seen]:
                    seen.add(vid)
                    if rng.random() < self.confirm_share:
                        chosen.add(vid)
                try:
                    ready = db.run(_RECEIVED, ids=list(chosen)) if chosen else []
                except UnavailableError:
                    run.figures["webhook_confirm_unavailable"] += 1
                    continue
                for vid, key_id, nonce in ready:
                    if not run.chaos_on.is_set():
                        break
                    chosen.discard(vid)
                    self._confirm(db, vid, key_id, bytes(nonce))
        finally:
            db.close()

    def _confirm(self, db: Database, vid: uuid.UUID, key_id: str, nonce: bytes) -> None:
        try:
            token = self.run.keyring.get(key_id).link(vid, nonce)
            if confirmations.confirm_link(db, self.run.keyring, token).result == "verified":
                self.confirmed.add(vid)
        except UnavailableError:  # the database restart: that person does not try again
            self.run.figures["webhook_confirm_unavailable"] += 1

    def _outage(self) -> None:
        run = self.run
        if run.stopping.wait(run.config.chaos_seconds * self.outage_at):
            return
        self.receiver.down()
        self.outages += 1
        run.log(f"webhook receiver down for {self.outage_seconds:g} s")
        run.stopping.wait(self.outage_seconds)
        self.receiver.up()

    def stop(self) -> None:
        self.receiver.stop()

    def check(self, db: Database, findings: Findings) -> None:
        check(db, self.receiver, findings)
        findings.figures["webhook_confirmed_by_run"] = len(self.confirmed)
        findings.figures["webhook_receiver_outages"] = self.outages


def check(db: Database, receiver: FakeWebhookReceiver, found: Findings) -> None:
    verified = {r[0] for r in db.run("SELECT id FROM verifications WHERE status = 'verified'")}
    events = db.rows(
        "SELECT id, verification_id, event_type, event_subject, status, attempts, max_attempts, ambiguous_count,"
        " suppression_reason, lease_owner FROM delivery_intents WHERE role = 'event'"
    )
    attempts: dict[int, list[dict]] = defaultdict(list)
    for row in db.rows(
        "SELECT id, attempt_id, intent_id, attempt_number, outcome, error_class, lease_owner, lease_version"
        " FROM delivery_attempts WHERE channel = 'webhook' ORDER BY id"
    ):
        attempts[row["intent_id"]].append(row)
    # the same state-vs-attempt-log invariant as the messages' (chaos_checks.py), over the events
    state_explained_by_attempts(found, {e["id"]: e for e in events}, attempts)
    ambiguous = Counter(
        r[0]
        for r in db.run("SELECT intent_id FROM delivery_attempts WHERE channel = 'webhook' AND outcome = 'ambiguous'")
    )
    # (verification id, type, subject) -> webhook-ids; the subject: the channel a proof proved, or a delivery's
    receipts: dict[tuple[str, str, str | None], list[str]] = defaultdict(list)
    for d in receiver.deliveries:
        data = d.request["data"]
        subject = (data.get("proof") or data.get("delivery") or {}).get("channel")  # None for the others
        receipts[(data["verification_id"], d.request["type"], subject)].append(d.destination)
    per_verified = Counter(e["verification_id"] for e in events if e["event_type"] == "verification.verified")
    for vid in verified:
        if per_verified[vid] != 1:
            found.fail("webhook_event_count", f"verified {vid} has {per_verified[vid]} verification.verified events")
    known = set()
    for e in events:
        key = (str(e["verification_id"]), e["event_type"], e["event_subject"])
        known.add(key)
        got = receipts.get(key, [])
        if e["status"] != "accepted" or not got:
            found.fail("webhook_lost", f"event {e['id']} ({key[1]}) is {e['status']}, received {len(got)} time(s)")
        if got and set(got) != {webhook_id(e["verification_id"], e["event_type"], e["event_subject"])}:
            found.fail("webhook_id_changed", f"event {e['id']} arrived under ids {sorted(set(got))}")
        if len(got) - 1 > ambiguous[e["id"]]:
            found.fail(
                "webhook_unexplained_duplicate",
                f"event {e['id']} received {len(got)} times after {ambiguous[e['id']]} ambiguous attempt(s)",
            )
    for key in set(receipts) - known:
        found.fail("webhook_unknown", f"received {key[1]} for {key[0]}, which no event intent recorded")
    if receiver.refused:
        found.fail(
            "webhook_signature",
            f"{receiver.refused} request(s) failed the standardwebhooks verification: {receiver.refusals[:3]}",
        )
    for violation in receiver.schema_violations[:10]:  # docs/openapi.yaml's webhooks section
        found.fail("webhook_schema", violation)
    found.figures["webhook_events"] = dict(Counter(e["event_type"] for e in events))
    found.figures["webhook_receipts"] = sum(len(v) for v in receipts.values())
    found.figures["webhook_duplicates_after_ambiguous"] = sum(max(0, len(v) - 1) for v in receipts.values())
