"""Plans of the web targets at history scale: cached once per session, index probes only.

A database with history and statistics, as a deployment's: 20,000 finished verifications, ANALYZE.
In PostgreSQL's auto plan mode confirm's link statement was planned anew on every call there (its
array parameter makes the generic plan look dearer), and its consume was planned as a walk over the
pending index. The create and confirm targets run generic plans (runtime.py; every deployed target's
session settings are checked here) of statements shaped so the generic plan is the index probe."""

from __future__ import annotations

import uuid

import pytest

from signup_verification.api.create import create_verification
from signup_verification.api.models import CreateVerificationRequest
from signup_verification.config import load
from signup_verification.platform.catalogue import catalogue
from signup_verification.platform.config import Target
from signup_verification.runtime import Runtime, session_settings
from signup_verification.verifications import confirm as confirmations
from support.paths import TEST_TOKEN_KEYS
from support.terraform_model import load_infra

VERIFICATIONS = catalogue("verifications")

HISTORY = """
WITH v AS (
    INSERT INTO verifications (id, account_id, channel, destination, purpose, locale, key_id, token_nonce,
                               token_digest, expires_at, created_at, status, verified_at)
    SELECT gen_random_uuid(), 'h' || g, 'email', 'h' || g || '@example.com', 'signup', 'en', 'test-k1',
           substring(sha256(int4send(g)) FOR 16), sha256(int4send(-g)), now() - interval '1 day',
           now() - interval '2 days', 'verified', now() - interval '2 days'
      FROM generate_series(1, 20000) AS g
    RETURNING id
)
INSERT INTO delivery_intents (verification_id, channel, purpose, locale, template_version, status, completed_at)
SELECT id, 'email', 'signup', 'en', 'signup/v1', 'accepted', now() - interval '2 days' FROM v
"""


def _runtime(database_url: str, tmp_path, target: str) -> Runtime:
    env = {
        "DATABASE_URL": database_url,
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "VERIFY_LOCAL_DIR": str(tmp_path),
        "FUNCTION_TARGET": target,
        "RATE_LIMIT_SPACING_SECONDS": "0",
    }
    return Runtime(load(env))


@pytest.fixture
def history(db):
    db.run(HISTORY)
    db.execute_script("ANALYZE")
    return db


# What each target's sessions carry (webhooks off): the web targets plan generically; dispatch (its
# unnest() joins need the real array sizes), the reconciler, status and the reports ingest keep auto.
GENERIC = {"plan_cache_mode": "force_generic_plan"}
INTENDED = {Target.CREATE: GENERIC, Target.CONFIRM: GENERIC}


def test_each_deployed_target_gets_the_session_settings_intended(database_url, tmp_path):
    """Every FUNCTION_TARGET infra deploys (services.tf sets each service's to its entry_point), as an
    instance of it connects: exactly the settings intended, and the plan mode its sessions run."""
    deployed = set(load_infra().entry_points.values())
    assert deployed == set(Target)
    for target in sorted(deployed):
        runtime = _runtime(database_url, tmp_path, target)
        try:
            assert session_settings(runtime.config) == INTENDED.get(target, {}), target
            mode = INTENDED.get(target, {}).get("plan_cache_mode", "auto")
            assert runtime.db.run("SHOW plan_cache_mode") == [[mode]], target
        finally:
            runtime.close()


def test_confirming_links_at_history_scale_plans_once_per_session(history, database_url, tmp_path):
    runtime = _runtime(database_url, tmp_path, Target.CONFIRM)
    try:
        db, keyring = runtime.db, runtime.keyring
        tokens = []
        for i in range(8):
            request = CreateVerificationRequest(account_id=f"p{i}", channel="email", destination=f"p{i}@example.com")
            created = create_verification(db, runtime.config.create, keyring, request, f"plan-{i}")
            row = db.one(
                "SELECT id, key_id, token_nonce FROM verifications WHERE id = :id",
                id=uuid.UUID(created.body["verification_id"]),
            )
            tokens.append(keyring.get(row["key_id"]).link(row["id"], bytes(row["token_nonce"])))
        assert [confirmations.confirm_link(db, keyring, t).result for t in tokens] == [confirmations.VERIFIED] * 8
        [[generic, custom]] = db.run(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '-- confirm a link:%'"
        )
        assert (generic, custom) == (8, 0)
    finally:
        runtime.close()


def test_the_generic_plans_of_confirming_are_index_probes(history):
    """No walk of the pending set (the statistics here saw none pending: the plan a pending partial
    index would get) nor of the table: a link's and a code's row by primary key."""
    link = VERIFICATIONS["confirm_link"].replace(":key_ids", "$2").replace(":digests", "$3").replace(":id", "$1")
    consume = VERIFICATIONS["confirm_consume"].replace(":id", "$1").replace(":digest", "$2").replace(":channel", "$3")
    history.run("SET plan_cache_mode = force_generic_plan")
    history.execute_script(f"PREPARE link(uuid, text[], bytea[]) AS {link}")
    history.execute_script(f"PREPARE code(uuid, bytea, text) AS {consume}")
    for execute, index in (
        (f"link('{uuid.uuid4()}', ARRAY['test-k1'], ARRAY['\\x00'::bytea])", "verifications_pkey"),
        (f"code('{uuid.uuid4()}', '\\x00'::bytea, 'whatsapp')", "verifications_pkey"),
    ):
        plan = "\n".join(r[0] for r in history.run(f"EXPLAIN EXECUTE {execute}"))
        assert "Seq Scan" not in plan and "pending" not in plan, plan
        assert index in plan, plan
    for name in ("confirm_wrong_code", "confirm_lock_destination"):
        sql = VERIFICATIONS[name].replace(":id", "$1").replace(":code_channels", "ARRAY['sms', 'whatsapp', 'voice']")
        history.execute_script(f"PREPARE p_{name}(uuid) AS {sql}")
        plan = "\n".join(r[0] for r in history.run(f"EXPLAIN EXECUTE p_{name}('{uuid.uuid4()}')"))
        assert "pending" not in plan and "verifications_pkey" in plan, (name, plan)


def test_the_supersede_of_a_create_reads_the_accounts_pending_rows_only(history):
    """The create's supersede names an account: its pending index, never a walk of every pending row."""
    history.run("SET plan_cache_mode = force_generic_plan")
    history.execute_script(
        "PREPARE s(text, uuid, text, text, text) AS UPDATE verifications SET status = 'superseded', superseded_by = $2"
        " WHERE account_id = $1 AND status = 'pending' AND id <> $2"
        " AND (channel IN ($3, $4, $5) OR fallback_channel IN ($3, $4, $5) OR step3_channel IN ($3, $4, $5)) RETURNING id"
    )
    plan = "\n".join(r[0] for r in history.run(f"EXPLAIN EXECUTE s('a', '{uuid.uuid4()}', 'email', NULL, NULL)"))
    assert "verifications_pending_account" in plan and "pending_expiry" not in plan, plan


def test_the_redaction_sweep_reads_its_partial_index(history):
    """verifications_unredacted holds finished verifications only (entered when they leave
    pending, not at insert too); the sweep, which skips pending ones, still reads it."""
    sql = catalogue("operations")["redact"].replace(":redact_after_seconds", "86400").replace(":limit", "100")
    plan = "\n".join(r[0] for r in history.run("EXPLAIN " + sql))
    assert "verifications_unredacted" in plan and "Seq Scan on verifications" not in plan, plan


def test_the_signals_read_no_verification_history(history):
    """The wrong-codes count reads verifications_wrong_codes, not a scan of every verification."""
    sql = catalogue("operations")["signals"]
    channels = "ARRAY['email', 'sms', 'whatsapp', 'voice', 'webhook']"
    for name, value in (
        ("window_seconds", "3600"),
        ("deployment", "'t'"),
        ("sms_max", "NULL"),
        ("voice_max", "NULL"),
        ("channels", channels),
    ):
        sql = sql.replace(f":{name}", value)
    plan = "\n".join(r[0] for r in history.run("EXPLAIN " + sql))
    assert "Seq Scan on verifications" not in plan and "verifications_wrong_codes" in plan, plan
