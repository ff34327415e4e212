"""Attacker traffic in the chaos run (tools/chaos.py): signups to destinations an outsider chooses,
beside the genuine users, whose providers answer as they would for those destinations
(tools/chaos_faults.py):

    refused   SMS to French numbers (+33 6 12 34 ...) that Twilio refuses with 21606 ("not a valid
              message-capable number for this destination"): a route fault at submission
    filtered  SMS to other French numbers (+33 6 12 35 ...), accepted, then reported `undelivered`
              30007 (carrier filtering) by the provider reports (tools/chaos_reports.py)
    echo      email to addresses at a domain the attacker runs (evil.example), which our relay refuses
              at RCPT quoting that domain's server ("Sender address rejected", "Relay access denied")

Each signup has its own account. None of it is a fault of our account, so none of it may make a
genuine user's message wait. At the end (besides the run's own invariants, which hold for these
intents too) this checks:
    attack_channel_held   no channel was ever held as a whole (the run has no fault of our account)
    attack_route_held     no route was held but the attacker's own (sms:FR, email:evil.example)
    attack_delayed        no genuine delivery was ever stopped for its channel (`channel_stopped`) or
                          left unsent for a held route
    attack_blamed         no attacker destination was suppressed: the faults are of our sender's
                          route, never the recipient's
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
import uuid
from collections import Counter

from chaos_checks import Findings
from chaos_faults import ECHO_DOMAIN, FILTERED_PREFIX, REFUSED_PREFIX
from signup_verification.api import create as verifications
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.platform.database import Database, UnavailableError

KINDS = ("refused", "filtered", "echo")
ATTACKER_ROUTES = {("sms", "FR"), ("email", ECHO_DOMAIN)}


class Attack:
    """The attacker's creator thread and the end-of-run check; tools/chaos.py calls these few methods."""

    def __init__(self, run):
        self.run = run
        self.rng = random.Random(run.config.seed + 23)
        self.count = max(len(KINDS) * 5, int(run.config.intents * run.config.attack_share))
        self.created: set[uuid.UUID] = set()
        self.figures: Counter[str] = Counter()
        self.lock = threading.Lock()

    def threads(self) -> list[threading.Thread]:
        return [threading.Thread(target=self._create_all, name="attacker")]

    @staticmethod
    def destination(kind: str, n: int) -> str:
        if kind == "refused":
            return f"{REFUSED_PREFIX}{n:04d}"
        if kind == "filtered":
            return f"{FILTERED_PREFIX}{n:04d}"
        return f"victim{n}@{ECHO_DOMAIN}"

    def _create_all(self) -> None:
        c = self.run.config
        at = sorted(self.rng.uniform(c.chaos_seconds * 0.05, c.chaos_seconds * 0.6) for _ in range(self.count))
        db = Database(self.run.pg.params, application_name="chaos-attacker")
        try:
            for n, when in enumerate(at):
                while self.run._elapsed() < when and not self.run.stopping.is_set():
                    time.sleep(0.02)
                if self.run.stopping.is_set():
                    return
                kind = KINDS[n % len(KINDS)]
                destination = self.destination(kind, n)
                body = {"account_id": f"attacker-{n}", "channel": "email" if kind == "echo" else "sms",
                        "destination": destination}  # fmt: skip
                vid = self._create(db, f"attack-{n}", body)
                if vid is None:
                    return
                with self.lock:
                    self.created.add(vid)
                self.figures[f"attack_created_{kind}"] += 1
        except Exception as exc:  # a broken attacker is the harness's failure, reported as such
            self.run.errors.append(f"chaos attacker: {type(exc).__name__}: {exc}")
            raise
        finally:
            db.close()

    def _create(self, db: Database, key: str, body: dict) -> uuid.UUID | None:
        request = CreateVerificationRequest.model_validate(body)
        # the shortest TTL (30 s): a signup still waiting on its held route when it dies is suppressed as
        # expired, so the attacker's traffic ends well before the drain whatever the kills did to it
        settings = dataclasses.replace(self.run.create_settings, ttl_seconds=30)
        while not self.run.stopping.is_set():
            try:
                result = verifications.create_verification(db, settings, self.run.keyring, request, key)
            except UnavailableError:  # the database restart: retried with the same key
                time.sleep(0.3)
                continue
            if result.status != 201:
                self.run.errors.append(f"attacker create {key} answered {result.status}")
                return None
            vid = uuid.UUID(result.body["verification_id"])
            self.run.ledger.created[key] = vid
            return vid
        return None

    def check(self, db: Database, found: Findings) -> None:
        attackers = {str(v) for v in self.created}
        holds = db.rows("SELECT channel, route, scope, held_at FROM channel_holds WHERE held_at IS NOT NULL")
        for h in holds:
            if h["scope"] == "account":
                found.fail("attack_channel_held", f"{h['channel']} was held as a whole")
            elif (h["channel"], h["route"]) not in ATTACKER_ROUTES:
                found.fail("attack_route_held", f"route {h['channel']}:{h['route']} of genuine users was held")
        waits = db.rows(
            "SELECT i.verification_id::text AS vid, a.error_class, a.error_detail FROM delivery_attempts AS a"
            " JOIN delivery_intents AS i ON i.id = a.intent_id"
            " WHERE a.outcome = 'retryable' AND (a.error_class = 'channel_stopped'"
            "       OR (a.error_class = 'not_sent' AND a.error_detail LIKE 'not sent: the route%'))"
        )
        for w in waits:
            if w["vid"] not in attackers:
                found.fail("attack_delayed", f"verification {w['vid']}: {w['error_class']}: {w['error_detail']}")
        blamed = db.rows(
            "SELECT i.verification_id::text AS vid FROM destination_suppressions AS s"
            " JOIN delivery_intents AS i ON i.id = s.intent_id"
        )
        for b in blamed:
            if b["vid"] in attackers:
                found.fail("attack_blamed", f"attacker verification {b['vid']}: its destination was suppressed")
        outcomes = db.rows(
            "SELECT i.verification_id::text AS vid, i.status, i.failure_code FROM delivery_intents AS i"
            " WHERE i.role = 'primary'"
        )
        self.figures.update(
            f"attack_ended_{o['status']}_{o['failure_code'] or '-'}" for o in outcomes if o["vid"] in attackers
        )
        self.figures["attack_routes_held"] = sum(1 for h in holds if h["scope"] == "route")
        self.figures["attack_route_waits"] = sum(1 for w in waits if w["error_class"] == "not_sent")
        found.figures.update(sorted(self.figures.items()))
