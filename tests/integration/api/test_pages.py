"""The confirmation pages through the real endpoint: the verification's locale, the browser's
for unknown links, and a deliberate retry (never a silent form resubmission) when the database is away."""

from __future__ import annotations

import re
import uuid

from signup_verification import runtime
from signup_verification.api.create import create_verification
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.config import load
from signup_verification.verifications.tokens import Keyring
from support.paths import TEST_TOKEN_KEYS

KEYRING = Keyring.parse(TEST_TOKEN_KEYS)


def _link_token(db, locale: str | None) -> str:
    request = CreateVerificationRequest(
        account_id=f"a-{uuid.uuid4().hex[:8]}",
        channel="email",
        destination=f"{uuid.uuid4().hex[:8]}@example.com",
        locale=locale,
    )
    body = create_verification(db, load().create, KEYRING, request, uuid.uuid4().hex).body
    row = db.one("SELECT * FROM verifications WHERE id = :id", id=uuid.UUID(body["verification_id"]))
    return KEYRING.get(row["key_id"]).link(row["id"], bytes(row["token_nonce"]))


def test_pages_follow_the_verifications_locale(app_client, db):
    client = app_client("confirm_verification")
    token = _link_token(db, "ja-JP")
    page = client.get("/?token=" + token, headers={"Accept-Language": "en"}).get_data(as_text=True)
    assert '<html lang="ja">' in page and "メールアドレスを確認する" in page
    done = client.post("/", data={"token": token}, headers={"Accept-Language": "en"})
    assert done.status_code == 200 and '<html lang="ja">' in done.get_data(as_text=True)
    assert "確認が完了しました" in done.get_data(as_text=True)
    english = client.get("/?token=" + _link_token(db, None), headers={"Accept-Language": "ja"}).get_data(as_text=True)
    assert '<html lang="en">' in english and "Confirm email address" in english


def test_an_unknown_link_follows_accept_language(app_client):
    client = app_client("confirm_verification")
    page = client.get("/?token=" + "A" * 43, headers={"Accept-Language": "ja,en;q=0.8"})
    assert page.status_code == 404 and '<html lang="ja">' in page.get_data(as_text=True)
    assert '<html lang="en">' in client.get("/?token=" + "A" * 43).get_data(as_text=True)


def test_database_down_after_the_form_post_offers_a_labelled_re_post(app_client, service_env, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    runtime.reset()
    token = "A" * 22 + "B" * 43  # a link of the right shape: its verification is looked up
    response = app_client("confirm_verification").post("/", data={"token": token})
    html = response.get_data(as_text=True)
    assert response.status_code == 503 and response.headers["Retry-After"]
    form = re.search(r'<form method="(\w+)">(.*?)</form>', html, re.S)
    assert form and form.group(1) == "post"  # a button that posts again on purpose, not "reload this page"
    assert f'name="token" value="{token}"' in form.group(2) and "Try confirming again" in form.group(2)
    assert "reload" not in html.lower()
    looked_up = app_client("confirm_verification").get("/?token=" + token).get_data(as_text=True)
    assert '<form method="get">' in looked_up and "Try again" in looked_up
