"""The chaos run's traffic (tools/chaos.py mixes it into its Run): the genuine users' creates through
the create API, half at once and the rest spread over the chaos phase, some with the shortest TTL
(they expire while the run is faulty), some superseded by a second verification of the same account
mid-run, some with a fallback channel (tools/chaos_fallback.py). A create that meets the database
down is retried with the same idempotency key, as a client retries a 503; the ledger records what
each key was answered for the end-of-run checks (tools/chaos_checks.py)."""

from __future__ import annotations

import dataclasses
import random
import time
import uuid

from chaos_state import RunState
from signup_verification.api import create as verifications
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.platform.channels import PHONE_CHANNELS
from signup_verification.platform.database import Database, UnavailableError
from signup_verification.verifications.config import CreateConfig


class Creates(RunState):
    def _create_all(self) -> None:
        c = self.config
        rng = random.Random(c.seed + 1)
        plan = []  # (at seconds, index, superseding)
        for i in range(c.intents):
            plan.append((0.0 if i < c.intents // 2 else rng.uniform(0, c.chaos_seconds * 0.6), i, False))
        for i in rng.sample(range(c.intents), int(c.intents * c.supersede_share)):
            plan.append((rng.uniform(c.chaos_seconds * 0.1, c.chaos_seconds * 0.8), i, True))
        plan.sort()
        normal = self.create_settings
        short = dataclasses.replace(normal, ttl_seconds=30)
        done: set[int] = set()
        db = Database(self.pg.params, application_name="chaos-creator")
        try:
            for at, i, superseding in plan:
                while self._elapsed() < at and not self.stopping.is_set():
                    self.fallback.tick(db)  # confirmations due before a fallback's time
                    time.sleep(0.01)
                if superseding and i not in done:
                    continue  # its first verification was not made yet: nothing to supersede
                sms = i % round(1 / c.sms_share) == 0
                # the phone verifications take each phone channel in turn: SMS, WhatsApp, a call
                channel = PHONE_CHANNELS[(i // round(1 / c.sms_share)) % len(PHONE_CHANNELS)] if sms else "email"
                suffix = "-2" if superseding else ""
                destination = (
                    f"+1415{(3000000 if superseding else 2000000) + i:07d}"
                    if sms
                    else f"user{i}{suffix}@chaos.example.com"
                )
                settings = short if (not superseding and rng.random() < c.short_ttl_share) else normal
                body = {"account_id": f"acct-{i}", "channel": channel, "destination": destination}
                body = self.fallback.body(body, i, superseding)  # maybe a fallback channel
                vid = self._create(db, settings, f"create-{i}{suffix}", body)
                if vid is None:
                    return
                self.fallback.created(vid, body)
                done.add(i)
                if superseding:
                    self.ledger.superseded_at[vid] = time.time()
                self.figures["short_ttl_created" if settings is short else "created"] += 1
            self.fallback.tick(db, wait=True)
        finally:
            db.close()

    def _create(self, db: Database, settings: CreateConfig, key: str, body: dict) -> uuid.UUID | None:
        request = CreateVerificationRequest.model_validate(body)
        while not self.stopping.is_set() and self._elapsed() < self.config.max_seconds:
            try:
                result = verifications.create_verification(db, settings, self.keyring, request, key)
            except UnavailableError:  # the API answers 503 + Retry-After: a client retries with the same key
                self.ledger.create_retries += 1
                self.figures["create_retries_after_503"] += 1
                time.sleep(0.3)
                continue
            if result.status != 201:
                self.errors.append(f"create {key} answered {result.status}")
                return None
            vid = uuid.UUID(result.body["verification_id"])
            self.ledger.created[key] = vid
            return vid
        if not self.stopping.is_set():
            self.errors.append(f"create {key} reached no database before --max-seconds")
        return None
