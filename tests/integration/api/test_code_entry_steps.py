"""The hosted code-entry page of a verification of several steps, through the served create, read and
confirm targets: it asks for a code while any code step can prove (naming the newest message sent),
says the person is confirmed once any step's code proved, and answers a posted code that did not
prove with what its GET shows. The read API offers its URL exactly while it asks for a code."""

from __future__ import annotations

import re
import uuid
from urllib.parse import parse_qs, urlsplit

import pytest

from signup_verification.outbox import transitions as t
from signup_verification.outbox.transitions import Settlement
from support.dispatch import KEYRING
from support.policy import sent
from support.signup_requests import created_json
from support.webhooks import link_token

BASE = "https://verify.example.org/confirm"
SMS_NUMBER, OTHER_NUMBER = "+14155550142", "+14155550199"


@pytest.fixture
def targets(configured_app):
    create = configured_app("create_verification", VERIFY_LINK_BASE=BASE, RATE_LIMIT_SPACING_SECONDS="0")
    return create, configured_app("confirm_verification", VERIFY_LINK_BASE=BASE)


def _created(create, *steps: tuple[str, str, int], account: str = "") -> tuple[uuid.UUID, str]:
    body = {
        "account_id": account or f"acct-{uuid.uuid4().hex[:8]}",
        "steps": [{"channel": c, "destination": d, "after_seconds": after} for c, d, after in steps],
    }
    created = created_json(create, body)
    return uuid.UUID(created["verification_id"]), parse_qs(urlsplit(created["code_entry_url"]).query)["entry"][0]


def _code(db, vid: uuid.UUID, channel: str) -> str:
    nonce = bytes(db.one("SELECT token_nonce FROM verifications WHERE id = :v", v=vid)["token_nonce"])
    return KEYRING.primary.code(channel, vid, nonce, 6)


def _wrong(code: str) -> str:
    return f"{(int(code) + 1) % 1_000_000:06d}"


def _failed_for_good(db, vid: uuid.UUID, channel: str) -> None:
    """The step's send handed over, then refused for good (a blocked number): never taken, never sent."""
    claimed = [i for i in t.claim(db, "w", 10, 30) if i.verification_id == vid and i.channel == channel]
    assert len(claimed) == 1
    t.begin_attempts(db, "w", [claimed[0].fence])
    t.settle(db, "w", [Settlement(claimed[0].id, claimed[0].lease_version, "failed", 0, "rejected", "21610")])


def _title(response) -> str:
    return re.search(r'<h1 id="title">([^<]*)</h1>', response.get_data(as_text=True)).group(1)


def _page(confirm, handle: str):
    return confirm.get("/?entry=" + handle)


def _entry_url(create, vid: uuid.UUID) -> str | None:
    return create.get(f"/{vid}").get_json()["code_entry_url"]


def test_sms_then_voice_the_voice_code_proves_and_the_page_says_so(targets, db):
    create, confirm = targets
    vid, handle = _created(create, ("sms", SMS_NUMBER, 0), ("voice", SMS_NUMBER, 60))
    _failed_for_good(db, vid, "sms")  # brings the call forward
    sent(db, vid, "voice")
    asking = _page(confirm, handle)
    assert asking.status_code == 200 and _title(asking) == "Enter your code" and _entry_url(create, vid)
    proved = confirm.post("/", data={"entry": handle, "code": _code(db, vid, "voice")})
    assert proved.status_code == 200 and "Phone number confirmed" in proved.get_data(as_text=True)
    shown = _page(confirm, handle)
    page = shown.get_data(as_text=True)
    assert shown.status_code == 200 and _title(shown) == "Already confirmed" and "+1******0142" in page
    assert 'name="code"' not in page and _entry_url(create, vid) is None  # nothing more to type
    stale = confirm.post("/", data={"entry": handle, "code": _wrong(_code(db, vid, "sms"))})  # an old tab's form
    assert (stale.status_code, _title(stale)) == (200, "Already confirmed")  # what the GET shows
    state = db.one("SELECT status, verified_channel FROM verifications WHERE id = :v", v=vid)
    assert state == {"status": "verified", "verified_channel": "voice"}


def test_sms_then_whatsapp_the_page_asks_for_the_newest_message_and_its_code_proves(targets, db):
    create, confirm = targets
    vid, handle = _created(create, ("sms", SMS_NUMBER, 0), ("whatsapp", OTHER_NUMBER, 60))
    sent(db, vid, "sms", "whatsapp")  # the SMS never arrived; WhatsApp's message is what the person holds
    asking = _page(confirm, handle)
    assert asking.status_code == 200 and "+1******0199" in asking.get_data(as_text=True)
    wrong = confirm.post("/", data={"entry": handle, "code": _wrong(_code(db, vid, "whatsapp"))})
    page = wrong.get_data(as_text=True)
    assert wrong.status_code == 422 and "+1******0199" in page and "You can try 4 more times" in page
    proved = confirm.post("/", data={"entry": handle, "code": _code(db, vid, "whatsapp")})
    assert proved.status_code == 200 and "+1******0199" in proved.get_data(as_text=True)
    shown = _page(confirm, handle)
    assert (shown.status_code, _title(shown)) == (200, "Already confirmed")
    assert "+1******0199" in shown.get_data(as_text=True) and _entry_url(create, vid) is None
    read = create.get(f"/{vid}").get_json()
    assert [(p["channel"], p["via"]) for p in read["proofs"]] == [("whatsapp", "code")]


def test_email_then_sms_a_link_proof_before_the_sms_was_sent_ends_the_page_and_its_url(targets, db):
    create, confirm = targets
    vid, handle = _created(create, ("email", "ada@example.com", 0), ("sms", SMS_NUMBER, 30))
    assert _entry_url(create, vid) is not None  # the SMS is not due yet: it may still be sent
    assert _title(_page(confirm, handle)) == "Enter your code"
    assert confirm.post("/", json={"token": link_token(db, vid)}).status_code == 200
    assert _entry_url(create, vid) is None  # the proof cancelled the SMS: no code can prove
    shown = _page(confirm, handle)
    assert (shown.status_code, _title(shown)) == (410, "This code has expired")
    posted = confirm.post("/", data={"entry": handle, "code": _code(db, vid, "sms")})
    assert (posted.status_code, _title(posted)) == (410, "This code has expired")


def test_email_then_sms_an_sms_sent_before_the_link_proof_still_asks_for_its_code(targets, db):
    create, confirm = targets
    vid, handle = _created(create, ("email", "ada@example.com", 0), ("sms", SMS_NUMBER, 30))
    sent(db, vid, "sms")
    assert confirm.post("/", json={"token": link_token(db, vid)}).status_code == 200
    assert _entry_url(create, vid) is not None and _title(_page(confirm, handle)) == "Enter your code"
    proved = confirm.post("/", data={"entry": handle, "code": _code(db, vid, "sms")})
    assert proved.status_code == 200 and "Phone number confirmed" in proved.get_data(as_text=True)
    assert _entry_url(create, vid) is None


@pytest.mark.parametrize("ending", ["expired", "locked", "voice proved", "link proved", "superseded"])
def test_a_posted_code_that_does_not_prove_answers_what_the_get_shows(targets, db, ending):
    create, confirm = targets
    steps = (("email", "ada@example.com", 0), ("sms", SMS_NUMBER, 0), ("voice", SMS_NUMBER, 60))
    vid, handle = _created(create, *steps, account="acct-ending")
    sent(db, vid, "sms", "voice")
    if ending == "expired":
        db.run(
            "UPDATE verifications SET created_at = now() - interval '1 hour', expires_at = now() - interval '1 s'"
            " WHERE id = :v",
            v=vid,
        )
    elif ending == "locked":
        db.run("UPDATE verifications SET status = 'locked' WHERE id = :v", v=vid)
    elif ending == "superseded":
        _created(create, *steps, account="acct-ending")  # the site asked again: a newer one replaces it
    elif ending == "voice proved":
        assert confirm.post("/", json={"verification_id": str(vid), "code": _code(db, vid, "voice")}).status_code == 200
    else:
        assert confirm.post("/", json={"token": link_token(db, vid)}).status_code == 200
    shown = _page(confirm, handle)
    posted = confirm.post("/", data={"entry": handle, "code": _wrong(_code(db, vid, "sms"))})
    if ending == "link proved":  # the number is not proved yet: both ask again for the code
        assert (shown.status_code, posted.status_code, _title(posted)) == (200, 422, "Enter your code")
        assert _entry_url(create, vid) is not None
        return
    assert (posted.status_code, _title(posted)) == (shown.status_code, _title(shown))
    assert _title(shown) != "Enter your code" and _entry_url(create, vid) is None
