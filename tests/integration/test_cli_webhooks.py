"""`verifyctl webhooks test` and `verifyctl webhooks replay` against a receiver that judges our
signatures with the Standard Webhooks reference library (and every body against its schema in
docs/openapi.yaml), on the real database: a test event is never recorded, and a replayed event
arrives again with the webhook-id it had, whether it was accepted or had failed for good."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from signup_verification import cli
from signup_verification.cli.commands.webhooks import parse_since
from signup_verification.delivery.events import webhook_id
from signup_verification.outbox import replay
from signup_verification.verifications import confirm as confirmations
from support.dispatch import KEYRING, run_dispatch
from support.factories import make_verifications
from support.fakes.http import Answer
from support.fakes.webhooks import FakeWebhookReceiver
from support.webhooks import VERIFIED_ONLY, events, events_database, link_token, webhook_settings

pytestmark = pytest.mark.webhook_events(max_attempts=1, event_types=VERIFIED_ONLY)  # one event per confirmation


def _verifyctl(monkeypatch, capsys, receiver, *argv: str) -> tuple[int, str, str]:
    monkeypatch.setenv("WEBHOOK_URL", receiver.endpoint)
    monkeypatch.setenv("WEBHOOK_SECRET", ",".join(receiver.secrets))
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _verified(edb) -> object:
    [vid] = make_verifications(edb, 1)
    confirmations.confirm_link(edb, KEYRING, link_token(edb, vid))
    return vid


# -- webhooks test ----------------------------------------------------------------------------------------
def test_a_test_event_is_signed_answered_and_never_recorded(service_env, db, monkeypatch, capsys):
    with FakeWebhookReceiver() as receiver:
        code, out, _ = _verifyctl(monkeypatch, capsys, receiver, "webhooks", "test")
        [event] = receiver.events()  # verified with the library, and valid against its schema
        assert event["type"] == "webhook.test" and event["data"]["test"] is True
        assert code == 0 and "HTTP 204" in out and "accepted" in out and receiver.webhook_ids()[0] in out
        code, out, _ = _verifyctl(monkeypatch, capsys, receiver, "--json", "webhooks", "test")
        answer = json.loads(out)
        assert code == 0 and answer["status"] == 204 and answer["outcome"] == "accepted"
        assert answer["sent_at"] == receiver.events()[1]["data"]["sent_at"]
        assert answer["webhook_id"] != receiver.webhook_ids()[0]  # each test is its own event
    assert db.run("SELECT count(*) FROM delivery_intents")[0][0] == 0


def test_a_refusing_or_absent_receiver_is_reported_with_exit_1(service_env, monkeypatch, capsys):
    with FakeWebhookReceiver() as receiver:
        receiver.script(Answer(401, {"error": "bad signature"}))
        code, out, _ = _verifyctl(monkeypatch, capsys, receiver, "webhooks", "test", "--json")
        assert code == 1 and json.loads(out)["status"] == 401 and json.loads(out)["outcome"] == "failed"
        receiver.down()
        code, out, err = _verifyctl(monkeypatch, capsys, receiver, "webhooks", "test")
        assert code == 1 and "no answer" in out and "retryable" in out and err == ""
        receiver.up()


def test_without_a_webhook_url_it_says_so_in_one_line(service_env, monkeypatch, capsys):
    monkeypatch.delenv("WEBHOOK_URL", raising=False)
    assert cli.main(["webhooks", "test"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "WEBHOOK_URL is unset" in err
    assert cli.main(["webhooks", "replay", "--since", "1h"]) == 1
    assert "WEBHOOK_URL is unset" in capsys.readouterr().err


# -- webhooks replay ----------------------------------------------------------------------------------------
def test_an_accepted_event_is_sent_again_with_its_webhook_id(edb, service_env, monkeypatch, capsys):
    vid = _verified(edb)
    with FakeWebhookReceiver() as receiver:
        settings = webhook_settings(receiver)
        run_dispatch(edb, settings)
        assert [e["status"] for e in events(edb, vid)] == ["accepted"]
        code, out, _ = _verifyctl(monkeypatch, capsys, receiver, "webhooks", "replay", "--verification", str(vid))
        assert code == 0 and "replayed 1 event" in out and "was accepted" in out
        assert [e["status"] for e in events(edb, vid)] == ["ready"]
        run_dispatch(edb, settings)
        original = webhook_id(vid, "verification.verified")
        assert receiver.webhook_ids() == [original, original]  # the receiver deduplicates on it
        [event] = events(edb, vid)
        assert event["status"] == "accepted" and event["attempts"] == 2


def test_a_failed_event_gets_a_fresh_budget_and_pending_ones_are_left_alone(edb, service_env, monkeypatch, capsys):
    failed, pending = make_verifications(edb, 2)
    confirmations.confirm_link(edb, KEYRING, link_token(edb, failed))
    with FakeWebhookReceiver() as receiver:
        settings = webhook_settings(receiver, webhook_max_attempts=1)
        receiver.script(Answer(500, {"error": "down"}))
        run_dispatch(edb, settings)
        [event] = events(edb, failed)
        assert event["status"] == "failed" and event["last_error"]
        confirmations.confirm_link(edb, KEYRING, link_token(edb, pending))  # written, not sent yet
        monkeypatch.setenv("WEBHOOK_MAX_ATTEMPTS", "1")  # the replayed event's fresh budget
        code, out, _ = _verifyctl(monkeypatch, capsys, receiver, "--json", "webhooks", "replay", "--since", "1h")
        assert code == 0
        [replayed] = json.loads(out)["replayed"]
        assert replayed == {
            "verification_id": str(failed),
            "type": "verification.verified",
            "subject": None,
            "webhook_id": webhook_id(failed, "verification.verified"),
            "was": "failed",
        }
        row = edb.one("SELECT * FROM delivery_intents WHERE role = 'event' AND verification_id = :v", v=failed)
        assert row["status"] == "ready" and row["completed_at"] is None and row["failed_at"] is None
        assert row["failure_category"] is None and row["last_error"] is None and row["max_attempts"] == 2
        assert [e["status"] for e in events(edb, pending)] == ["ready"]
        run_dispatch(edb, settings)
        assert {e["status"] for e in events(edb)} == {"accepted"}
        # the 500 was never taken: the replayed event is what reached it, under its original id
        assert sorted(receiver.webhook_ids()) == sorted(
            webhook_id(v, "verification.verified") for v in (failed, pending)
        )


def test_a_second_replay_finds_nothing_to_move_and_a_message_is_never_replayed(edb):
    vid = _verified(edb)
    message = "SELECT status, completed_at FROM delivery_intents WHERE verification_id = :v AND role <> 'event'"
    before = edb.one(message, v=vid)
    edb.run("UPDATE delivery_intents SET status = 'accepted', completed_at = now() WHERE role = 'event'")
    assert [e.was for e in replay.replay_events(edb, 12, verification_id=vid)] == ["accepted"]
    assert replay.replay_events(edb, 12, verification_id=vid) == []  # ready now: guarded by its status
    assert edb.one(message, v=vid) == before  # only events: a message is never sent twice by a replay


def test_replay_batches_cover_every_event(edb):
    vids = make_verifications(edb, 5)
    for vid in vids:
        confirmations.confirm_link(edb, KEYRING, link_token(edb, vid))
    edb.run("UPDATE delivery_intents SET status = 'accepted', completed_at = now() WHERE role = 'event'")
    since = datetime.now(UTC) - timedelta(minutes=5)
    replayed = replay.replay_events(edb, 12, since=since, batch=2)
    assert sorted(e.verification_id for e in replayed) == sorted(vids)
    assert replay.replay_events(edb, 12, since=datetime.now(UTC) + timedelta(minutes=1)) == []


def test_replay_needs_a_time_or_a_verification(service_env, capsys, monkeypatch):
    with pytest.raises(SystemExit) as usage:
        cli.main(["webhooks", "replay"])
    assert usage.value.code == 2
    monkeypatch.setenv("WEBHOOK_URL", "http://127.0.0.1:9/hooks")
    monkeypatch.setenv("WEBHOOK_SECRET", "whsec_" + "A" * 40)
    capsys.readouterr()
    assert cli.main(["webhooks", "replay", "--since", "yesterday"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "RFC 3339" in err
    assert cli.main(["webhooks", "replay", "--verification", "nope"]) == 1
    assert "not a verification id" in capsys.readouterr().err


def test_since_reads_rfc_3339_with_an_offset_or_a_duration():
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert parse_since("2026-12-01T10:00:00Z") == datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    assert parse_since("2026-12-01T11:00:00+01:00") == datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    assert parse_since("90m", now) == datetime(2026, 12, 1, 10, 30, tzinfo=UTC)
    assert parse_since("2d", now) == now - timedelta(days=2)
    for bad in ("2026-12-01T10:00:00", "soon", "5w"):  # no offset: which time zone would it be?
        with pytest.raises(ValueError):
            parse_since(bad)


def test_two_replays_at_once_move_each_event_once(edb, database_url):
    import threading

    vids = make_verifications(edb, 12)
    for vid in vids:
        confirmations.confirm_link(edb, KEYRING, link_token(edb, vid))
    edb.run("UPDATE delivery_intents SET status = 'accepted', completed_at = now() WHERE role = 'event'")
    since, found, start = datetime.now(UTC) - timedelta(minutes=5), [], threading.Barrier(2)
    second = events_database(database_url, event_types=VERIFIED_ONLY)

    def replay_from(db):
        start.wait()
        found.extend(replay.replay_events(db, 12, since=since, batch=3))

    try:
        threads = [threading.Thread(target=replay_from, args=(db,)) for db in (edb, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        second.close()
    moved = [e.intent_id for e in found]
    assert len(moved) == len(set(moved)) == len(vids)  # the status guard: each once, none lost
    assert {e["status"] for e in events(edb)} == {"ready"}
