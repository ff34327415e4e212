"""Email links name their verification: the id, then the token. Found by primary key, the token's
digest compared there. The token alone (the links' shape before the id) is no link any more, and
the migration that retired that shape waits until no such link can still be used."""

from __future__ import annotations

import base64
import importlib.resources
import shutil
import uuid
from pathlib import Path

import pytest

from signup_verification.api.create import create_verification
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.platform import migrations
from signup_verification.platform.migrations import MigrationError
from signup_verification.verifications import confirm as c
from signup_verification.verifications.tokens import split_link
from support.dispatch import KEYRING, provider_settings, run_dispatch
from support.fakes.smtp import FakeSmtpServer
from support.policy import token_in

SETTINGS = provider_settings(rate_limit_per_hour=1000)


@pytest.fixture
def smtp():
    with FakeSmtpServer() as server:
        yield server


def _create(db, account: str) -> uuid.UUID:
    request = CreateVerificationRequest(account_id=account, channel="email", destination=f"{account}@example.com")
    return uuid.UUID(create_verification(db, SETTINGS.create, KEYRING, request, account).body["verification_id"])


def _link(db, vid: uuid.UUID) -> str:
    nonce = bytes(db.one("SELECT token_nonce FROM verifications WHERE id = :id", id=vid)["token_nonce"])
    return KEYRING.primary.link(vid, nonce)


def test_a_link_names_its_verification_and_confirms_it_once(db):
    vid = _create(db, "ada")
    link = _link(db, vid)
    assert len(link) == 65 and split_link(link)[0] == vid
    assert c.preview_link(db, KEYRING, link).result == c.PENDING
    assert c.confirm_link(db, KEYRING, link).result == c.VERIFIED
    assert c.confirm_link(db, KEYRING, link).result == c.ALREADY_VERIFIED


def test_a_token_under_another_verifications_id_or_a_second_spelling_of_an_id_is_refused(db):
    mine, other = _create(db, "ada"), _create(db, "bob")
    token = split_link(_link(db, mine))[1]
    foreign = base64.urlsafe_b64encode(other.bytes).rstrip(b"=").decode() + token
    assert c.confirm_link(db, KEYRING, foreign).result == c.INVALID
    head = _link(db, mine)[:22]
    # the last of the 22 characters carries 2 bits of the id and 4 of padding: another spelling of it
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    respelled = head[:21] + alphabet[alphabet.index(head[21]) ^ 1] + token
    assert split_link(respelled) == (None, "") and c.confirm_link(db, KEYRING, respelled).result == c.INVALID
    assert db.run("SELECT count(*)::int FROM verifications WHERE status = 'pending'") == [[2]]


def test_the_token_alone_is_not_a_link(db, smtp):
    settings = provider_settings(smtp, rate_limit_per_hour=1000)
    vid = _create(db, "ada")
    assert run_dispatch(db, settings).accepted == 1
    assert token_in(smtp.received[0].message.get_body(("plain",)).get_content()) == _link(db, vid)
    token = split_link(_link(db, vid))[1]
    assert c.preview_link(db, KEYRING, token).result == c.INVALID
    assert c.confirm_link(db, KEYRING, token).result == c.INVALID
    assert db.one("SELECT status FROM verifications WHERE id = :id", id=vid) == {"status": "pending"}


def _migrations_before(tmp_path: Path, version: str) -> Path:
    folder = tmp_path / "release"
    folder.mkdir()
    for file in importlib.resources.files("signup_verification.sql").iterdir():
        if file.name[:3].isdigit() and file.name < version:
            shutil.copyfile(str(file), folder / file.name)
    return folder


def test_the_old_link_shape_is_retired_only_once_no_such_link_can_be_used(new_database, tmp_path):
    """A database that upgrades from before the id-first links in one step has pending verifications
    whose emails carry the token alone: the migration that retires that shape waits for them."""
    db = new_database()
    migrations.migrate(db, _migrations_before(tmp_path, "016"))
    db.run(
        "INSERT INTO verifications (id, account_id, channel, destination, purpose, locale, key_id, token_nonce,"
        " token_digest, expires_at) VALUES (:id, 'acct', 'email', 'ada@example.com', 'signup', 'en', 'k1',"
        " :nonce, :digest, now() + interval '10 minutes')",
        id=uuid.uuid4(),
        nonce=b"n" * 16,
        digest=b"d" * 32,
    )
    with pytest.raises(MigrationError, match="050_digest_links_retired.sql failed: old-style email links .* until"):
        migrations.migrate(db)  # in the grace day the id-first migration gives an upgrade
    # 016 and 017 ran (018 builds an index outside a transaction); 050's transaction rolled back whole
    assert db.run("SELECT to_regclass('link_format') IS NOT NULL, max(version) FROM schema_migrations") == [
        [True, "018"]
    ]
    db.run("UPDATE link_format SET digest_links_until = now() - interval '1 second'")  # the day has passed
    with pytest.raises(MigrationError, match="old-style email links"):
        migrations.migrate(db)  # the verification is still pending: its email's link still works
    db.run("UPDATE verifications SET status = 'expired'")
    assert "050" in migrations.migrate(db).migrations
    assert db.run("SELECT to_regclass('link_format'), to_regclass('verifications_digest_links')") == [[None, None]]
