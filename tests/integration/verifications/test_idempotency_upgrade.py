"""Idempotency records that held their answer as a document (outcome_data, before the answer's
inputs were columns) are retired by 051: an expired one goes, and one still live (a TTL longer than
a day) keeps replaying the same verification, its answer rebuilt from the inputs taken out of that
document."""

from __future__ import annotations

import importlib.resources
import json
import shutil
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from signup_verification.api import create as create_edge
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.platform import migrations
from signup_verification.verifications.config import CreateConfig
from signup_verification.verifications.create import IDEMPOTENCY_SCOPE
from signup_verification.verifications.tokens import Keyring
from support.paths import TEST_TOKEN_KEYS


def _release_before(tmp_path: Path, version: str) -> Path:
    folder = tmp_path / "release"
    folder.mkdir()
    for file in importlib.resources.files("signup_verification.sql").iterdir():
        if file.name[:3].isdigit() and file.name < version:
            shutil.copyfile(str(file), folder / file.name)
    return folder


def _record(db, key: str, request: CreateVerificationRequest, answer: dict, expires_in: timedelta) -> None:
    """A record as the create of that time wrote it: the answer itself, no inputs."""
    db.run(
        "INSERT INTO idempotency_keys (scope, key, fingerprint, expires_at, outcome, outcome_data)"
        " VALUES (:scope, :key, :fingerprint, now() + make_interval(secs => :ttl), 'created', CAST(:answer AS jsonb))",
        scope=IDEMPOTENCY_SCOPE,
        key=key,
        fingerprint=create_edge.fingerprint(request),
        ttl=expires_in.total_seconds(),
        answer=json.dumps(answer),
    )


def test_a_live_record_with_its_answer_as_a_document_still_replays_after_the_upgrade(new_database, tmp_path):
    db = new_database()
    try:
        migrations.migrate(db, _release_before(tmp_path, "051"))
        request = CreateVerificationRequest(account_id="acct-1", channel="email", destination="ada@example.com")
        now = datetime.now(UTC).replace(microsecond=0)
        answer = {
            "verification_id": str(uuid.uuid4()),
            "account_id": "acct-1",
            "channel": "email",
            "status": "pending",
            "expires_at": (now + timedelta(minutes=10)).isoformat().replace("+00:00", ".000Z"),
            "created_at": now.isoformat().replace("+00:00", ".000Z"),
        }
        _record(db, "live", request, answer, timedelta(days=3))  # a deployment with a three-day TTL
        _record(db, "gone", request, answer, -timedelta(seconds=1))

        assert migrations.migrate(db).migrations[0] == "051"
        assert db.run("SELECT key FROM idempotency_keys ORDER BY key") == [["live"]]
        db.run("UPDATE idempotency_keys SET created_at = :at WHERE key = 'live'", at=now)  # as create wrote it
        replay = create_edge.create_verification(db, CreateConfig(), Keyring.parse(TEST_TOKEN_KEYS), request, "live")
        assert (replay.status, replay.headers) == (201, {"Idempotent-Replayed": "true"})
        assert replay.body == answer
        assert db.run("SELECT count(*)::int FROM verifications") == [[0]]  # replayed, not created again
    finally:
        db.close()
