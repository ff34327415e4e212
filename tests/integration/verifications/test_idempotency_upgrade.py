"""Idempotency records written before sql/005 (HTTP status + body) still replay after the upgrade.

A key has a 24 h TTL, so a deploy meets records the old create_verification wrote: 005 converts
them into outcomes, and the replay is the very answer the first request got.
"""

from __future__ import annotations

import importlib.resources
import shutil
import uuid
from pathlib import Path

from signup_verification.api import create as create_edge
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.platform import migrations
from signup_verification.verifications.config import CreateConfig
from signup_verification.verifications.create import IDEMPOTENCY_SCOPE
from signup_verification.verifications.tokens import Keyring
from support.paths import TEST_TOKEN_KEYS

BEFORE = Path(__file__).with_name("create_verification_before_005.sql")  # the definition as it was
OLD_CALL = """SELECT outcome, status_code, body FROM create_verification(
    :scope, :key, :fingerprint, interval '1 day', :id, :account_id, :channel, :destination, :purpose, :locale,
    :template_version, 'test-k1', :nonce, :digest, interval '10 minutes', 5, 5,
    5, interval '1 hour', interval '60 seconds')"""


def _folder(tmp_path: Path, upgraded: bool) -> Path:
    package = Path(str(importlib.resources.files("signup_verification.sql")))
    folder = tmp_path / "sql"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "definitions").mkdir(parents=True)
    for path in package.glob("[0-9]*.sql"):
        if upgraded or path.name < "005":
            shutil.copy(path, folder / path.name)
    for path in (package / "definitions").glob("*.sql"):
        if upgraded or path.name < "05":  # the definitions that existed before 005
            shutil.copy(path, folder / "definitions" / path.name)
    if not upgraded:
        shutil.copy(BEFORE, folder / "definitions" / "04_create_verification.sql")
    return folder


def test_a_key_stored_by_the_old_function_replays_the_same_answer(new_database, tmp_path: Path):
    db = new_database()
    try:
        migrations.migrate(db, _folder(tmp_path, upgraded=False))
        request = CreateVerificationRequest(account_id="acct-1", channel="email", destination="ada@example.com")
        new = create_edge.new_verification(request)
        outcome, status, first_body = db.run(
            OLD_CALL,
            scope=IDEMPOTENCY_SCOPE,
            key="k-old",
            fingerprint=new.fingerprint,
            id=uuid.uuid4(),
            account_id=new.account_id,
            channel=new.channel,
            destination=new.destination,
            purpose=new.purpose,
            locale=new.locale,
            template_version=new.template_version,
            nonce=b"n" * 16,
            digest=b"d" * 32,
        )[0]
        assert (outcome, status) == ("created", 201)

        assert migrations.migrate(db, _folder(tmp_path, upgraded=True)).migrations[0] == "005"
        replay = create_edge.create_verification(db, CreateConfig(), Keyring.parse(TEST_TOKEN_KEYS), request, "k-old")
        assert (replay.status, replay.headers) == (201, {"Idempotent-Replayed": "true"})
        assert replay.body == first_body and list(replay.body) == list(first_body)  # same fields, same order
        assert db.run("SELECT count(*) FROM verifications")[0][0] == 1  # replayed, not created again
    finally:
        db.close()
