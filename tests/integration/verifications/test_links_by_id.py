"""Email links name their verification (sql/016): the id, then the token. Found by primary key, the
token's digest compared there; old-style links (the token alone) still work for the rows that take
them (link_by_digest: those of before the upgrade and of its grace day), and only for those."""

from __future__ import annotations

import base64
import uuid

import pytest

from signup_verification.api.create import create_verification
from signup_verification.api.models import CreateVerificationRequest
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


def test_an_old_style_link_works_only_for_rows_that_take_old_style_links(db):
    vid = _create(db, "ada")
    token = split_link(_link(db, vid))[1]  # the 43-character token alone, as links were before sql/016
    assert c.preview_link(db, KEYRING, token).result == c.INVALID  # a new row: found by its id only
    assert c.confirm_link(db, KEYRING, token).result == c.INVALID
    db.run("UPDATE verifications SET link_by_digest = true WHERE id = :id", id=vid)  # a row of before
    assert c.preview_link(db, KEYRING, token).result == c.PENDING
    assert c.confirm_link(db, KEYRING, token).result == c.VERIFIED
    assert c.confirm_link(db, KEYRING, _link(db, vid)).result == c.ALREADY_VERIFIED  # the new shape too


def test_the_dispatcher_sends_old_style_links_only_to_rows_that_take_them(db, smtp):
    settings = provider_settings(smtp, rate_limit_per_hour=1000)
    new, old = _create(db, "ada"), _create(db, "bob")
    db.run("UPDATE verifications SET link_by_digest = true WHERE id = :id", id=old)
    assert run_dispatch(db, settings).accepted == 2
    carried = {}
    for received in smtp.received:
        text = received.message.get_body(("plain",)).get_content()
        carried[received.rcpt_tos[0]] = token_in(text)
    assert carried["ada@example.com"] == _link(db, new)
    assert carried["bob@example.com"] == split_link(_link(db, old))[1]
    assert c.confirm_link(db, KEYRING, carried["ada@example.com"]).result == c.VERIFIED
    assert c.confirm_link(db, KEYRING, carried["bob@example.com"]).result == c.VERIFIED


def test_creates_take_old_style_links_only_in_the_grace_day_after_an_upgrade(db):
    """A fresh database has no grace (no old links exist); an upgraded one marks the rows created in
    the day after the migration, while the previous release's instances may still be running."""
    assert db.one("SELECT digest_links_until = '-infinity' AS fresh FROM link_format") == {"fresh": True}
    assert db.one("SELECT link_by_digest FROM verifications WHERE id = :id", id=_create(db, "ada")) == {
        "link_by_digest": False
    }
    db.run("UPDATE link_format SET digest_links_until = now() + interval '1 day'")  # as an upgrade sets it
    assert db.one("SELECT link_by_digest FROM verifications WHERE id = :id", id=_create(db, "bob")) == {
        "link_by_digest": True
    }
