"""Tokens and codes: derived from nonce + server key, stored only as keyed digests, keys rotate."""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
import uuid
from pathlib import Path

import pytest

from signup_verification.config import ConfigError, load
from signup_verification.platform.channels import CODE_CHANNELS
from signup_verification.verifications.config import TokenConfig
from signup_verification.verifications.tokens import Keyring, TokenKey, new_key_spec, new_nonce

OLD = new_key_spec("k-2025")
NEW = new_key_spec("k-2026")


def secret_of(spec: str) -> str:
    return spec.split(":", 1)[1]


def ring(*specs: str) -> Keyring:
    return Keyring.parse(",".join(specs))


# -- derivation ---------------------------------------------------------------------------------------


def test_link_token_carries_at_least_128_bits_and_is_url_safe():
    key = ring(NEW).primary
    tokens = {key.link_token(uuid.uuid4(), new_nonce()) for _ in range(2000)}
    assert len(tokens) == 2000
    for token in list(tokens)[:50]:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        assert len(raw) * 8 >= 128
        assert token.replace("-", "").replace("_", "").isalnum()  # no '+', '/', '=' to escape in a URL
    assert len(new_nonce()) * 8 >= 128


def test_derivation_is_deterministic_so_the_worker_can_render_later():
    key, vid, nonce = ring(NEW).primary, uuid.uuid4(), new_nonce()
    assert key.link_token(vid, nonce) == ring(NEW).primary.link_token(vid, nonce)
    assert key.link_token(vid, nonce) != key.link_token(vid, new_nonce())
    assert key.link_token(vid, nonce) != key.link_token(uuid.uuid4(), nonce)


@pytest.mark.parametrize("digits", [6, 8, 10])
def test_sms_code_has_n_digits_leading_zeros_included(digits):
    key = ring(NEW).primary
    codes = [key.sms_code(uuid.uuid4(), new_nonce(), digits) for _ in range(3000)]
    assert all(len(c) == digits and c.isdigit() and c.isascii() for c in codes)
    assert any(c.startswith("0") for c in codes)  # zfill keeps them (P(no leading 0 in 3000) ~ 1e-137)
    assert len(set(codes)) > 2900


def test_each_code_channel_has_its_own_code_and_the_sms_code_is_derived_as_it_always_was():
    key, vid, nonce = TokenKey("k", b"\x07" * 32), uuid.UUID(int=7), b"\x01" * 16
    # the SMS derivation is fixed: a code rendered (and its digest stored) before a release still proves
    raw = hmac.new(key.secret, b"sms-code\x00" + vid.bytes + b"\x00" + nonce, hashlib.sha256).digest()
    assert key.sms_code(vid, nonce) == key.code("sms", vid, nonce) == str(int.from_bytes(raw, "big") % 10**6).zfill(6)
    codes = {channel: key.code(channel, vid, nonce, 8) for channel in CODE_CHANNELS}
    assert len(set(codes.values())) == len(CODE_CHANNELS)  # the code that proves names its channel
    alike = sum(
        len({key.code(c, v, n) for c in CODE_CHANNELS}) < len(CODE_CHANNELS)
        for v, n in ((uuid.uuid4(), new_nonce()) for _ in range(2000))
    )
    assert alike < 5  # ~0.006 expected: three 6-digit codes of one verification rarely meet
    with pytest.raises(ValueError, match="carries no code"):
        key.code("email", vid, nonce)


def test_sms_code_digits_are_roughly_uniform():
    key = ring(NEW).primary
    counts = [0] * 10
    for _ in range(3000):
        for ch in key.sms_code(uuid.uuid4(), new_nonce()):
            counts[int(ch)] += 1
    assert all(1500 < c < 2100 for c in counts)  # 1800 expected per digit; 7 sigma either side


def test_digests_differ_per_key_and_per_verification():
    old, new = ring(OLD).primary, ring(NEW).primary
    vid = uuid.uuid4()
    token = new.link_token(vid, new_nonce())
    assert old.link_digest(token) != new.link_digest(token)
    assert len(new.link_digest(token)) == 32
    assert old.code_digest(vid, "123456") != new.code_digest(vid, "123456")
    # A code digest is bound to its verification: one leaked row says nothing about another.
    assert new.code_digest(vid, "123456") != new.code_digest(uuid.uuid4(), "123456")


def test_token_and_digest_are_not_derivable_from_each_other():
    key, vid, nonce = ring(NEW).primary, uuid.uuid4(), new_nonce()
    token = key.link_token(vid, nonce)
    digest = key.link_digest(token)
    assert token.encode() not in digest and digest.hex() not in token
    assert key.link_token(vid, nonce) != base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


# -- rotation -----------------------------------------------------------------------------------------


def test_rotation_signs_with_the_first_key_and_still_verifies_with_the_old():
    before = ring(OLD)
    vid, nonce = uuid.uuid4(), new_nonce()
    stored_key_id = before.primary.key_id
    stored_digest = before.primary.link_digest(before.primary.link_token(vid, nonce))

    after = ring(NEW, OLD)  # the new key is prepended; the old one stays until its verifications expire
    assert after.primary.key_id == "k-2026"
    old_key = after.get(stored_key_id)
    assert old_key.link_digest(old_key.link_token(vid, nonce)) == stored_digest  # the worker re-renders it
    assert after.primary.link_digest(old_key.link_token(vid, nonce)) != stored_digest

    retired = ring(NEW)
    with pytest.raises(ConfigError, match="k-2025"):
        retired.get(stored_key_id)


def test_keyring_parsing_rejects_bad_specs():
    for spec, message in [
        ("", "no key"),
        ("nokeyid", "key_id:"),
        (":" + secret_of(NEW), "key_id:"),
        ("k:" + base64.urlsafe_b64encode(b"short").decode(), "32 bytes"),
        (f"{NEW},{NEW}", "duplicate"),
        ("k:@@@@", "base64url"),
        ("k:" + secret_of(NEW) + '"', "base64url"),
        ("k:" + secret_of(NEW)[:-2] + " x", "base64url"),
    ]:
        with pytest.raises(ConfigError, match=message):
            Keyring.parse(spec)
    assert [k.key_id for k in Keyring.parse(f" {NEW} , {OLD} ,").keys] == ["k-2026", "k-2025"]


# -- configuration ------------------------------------------------------------------------------------


def test_production_requires_token_keys(tmp_path):
    with pytest.raises(ConfigError, match="TOKEN_KEYS is required"):
        Keyring.from_config(load({"ENVIRONMENT": "production", "VERIFY_LOCAL_DIR": str(tmp_path)}).tokens)
    with pytest.raises(ConfigError, match="TOKEN_KEYS is required"):  # a token target fails at start
        load({"ENVIRONMENT": "production", "FUNCTION_TARGET": "dispatch", "VERIFY_LOCAL_DIR": str(tmp_path)})
    load({"ENVIRONMENT": "production", "FUNCTION_TARGET": "reconcile"})  # never touches tokens: needs none
    assert not (tmp_path / "dev-token-key").exists()


def test_production_refuses_a_development_key(tmp_path):
    dev = new_key_spec("dev-laptop")
    with pytest.raises(ConfigError, match="development"):
        load({"ENVIRONMENT": "production", "TOKEN_KEYS": f"{NEW},{dev}"})
    with pytest.raises(ConfigError, match="development"):
        Keyring.from_config(TokenConfig(keys=f"{NEW},{dev}", production=True))
    production = load({"ENVIRONMENT": "production", "TOKEN_KEYS": NEW})
    assert Keyring.from_config(production.tokens).primary.key_id == "k-2026"


def test_local_development_key_is_generated_once_and_reused(tmp_path: Path):
    settings = load({"VERIFY_LOCAL_DIR": str(tmp_path / "local")}).tokens
    first = Keyring.from_config(settings)
    second = Keyring.from_config(settings)
    assert first.primary.key_id.startswith("dev-") and first.primary.is_development
    assert first.primary == second.primary
    path = tmp_path / "local" / "dev-token-key"
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["dev-token-key"]  # no temp file left


@pytest.mark.parametrize("round_", range(20))  # a lost race shows in ~1 round in 4
def test_concurrent_first_runs_agree_on_one_development_key(tmp_path: Path, round_):
    settings = load({"VERIFY_LOCAL_DIR": str(tmp_path / "local")}).tokens
    barrier, keys, errors = threading.Barrier(8), [], []

    def first_run() -> None:
        barrier.wait()
        try:
            keys.append(Keyring.from_config(settings).primary)
        except Exception as exc:  # collected: asserted below
            errors.append(exc)

    threads = [threading.Thread(target=first_run) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(keys) == 8 and len(set(keys)) == 1
    assert [p.name for p in (tmp_path / "local").iterdir()] == ["dev-token-key"]


def test_no_repr_or_str_shows_key_material():
    spec = f"{NEW},{OLD}"
    keyring = Keyring.parse(spec)
    settings = load({"TOKEN_KEYS": spec, "DATABASE_URL": "postgresql://u:db-password@h/d"})
    shown = " ".join(
        [
            repr(keyring),
            str(keyring),
            repr(keyring.primary),
            str(keyring.keys),
            repr(settings),
            repr(TokenKey("k", b"\x01" * 32)),
        ]
    )
    for secret in (secret_of(NEW), secret_of(OLD), "db-password"):
        assert secret not in shown
    assert base64.urlsafe_b64decode(secret_of(NEW) + "=").hex() not in shown
    assert "k-2026" in repr(keyring)  # the key ids are what an operator needs to see


def test_errors_name_the_key_not_the_secret():
    bad = "k-short:" + base64.urlsafe_b64encode(b"s3cr3t-bytes").decode()
    with pytest.raises(ConfigError) as caught:
        Keyring.parse(bad)
    assert "k-short" in str(caught.value) and "czNjcjN0" not in str(caught.value)


# -- the code-entry page's handle ---------------------------------------------------------------------


def test_a_code_entry_handle_locates_its_verification_under_any_key_of_the_ring():
    vid = uuid.uuid4()
    before, after = ring(OLD), ring(NEW, OLD)  # a rotation: NEW signs, OLD still verifies
    handle = before.primary.code_entry_handle(vid)
    assert len(handle) == 44 and handle.replace("-", "").replace("_", "").isalnum()
    assert handle == before.primary.code_entry_handle(vid) != after.primary.code_entry_handle(vid)
    assert after.code_entry_target(handle) == vid == after.code_entry_target(after.primary.code_entry_handle(vid))
    assert ring(NEW).code_entry_target(handle) is None  # its key retired: no page


@pytest.mark.parametrize(
    "mangle",
    [
        lambda h: h[:22],  # the verification id alone: the site and its webhooks know it
        lambda h: h[:22] + "A" * 22,
        lambda h: h[:-1] + ("B" if h[-1] != "B" else "C"),
        lambda h: h + "A",
        lambda h: h[:43],
        lambda h: h[:21] + "!" + h[22:],
        lambda h: h[:40] + "ｱｲｳｴ",
        lambda h: "",
    ],
)
def test_only_the_keys_make_a_handle(mangle):
    keys = ring(NEW)
    handle = keys.primary.code_entry_handle(uuid.uuid4())
    assert keys.code_entry_target(mangle(handle)) is None
    assert keys.code_entry_target(None) is None


def test_handles_of_distinct_verifications_are_distinct_and_say_nothing_of_each_other():
    key = ring(NEW).primary
    handles = {key.code_entry_handle(uuid.uuid4())[22:] for _ in range(2000)}
    assert len(handles) == 2000
