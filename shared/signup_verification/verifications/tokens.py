"""Tokens and codes: derived, never stored.

Choice (docs/tokens.md): the worker must render the message long after the create request, yet
the database must never hold a usable token. We store a random 128-bit nonce and the id of the
server key; the token is HMAC(key, verification id || nonce), re-derived when the message is
rendered. The key lives outside the database (Secret Manager in production), so a database leak
alone yields neither tokens nor codes. Confirmation matches a keyed digest of what the person
typed, under every key of the ring in rotation order, compared in constant time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..platform.channels import CODE_CHANNELS, SMS
from ..platform.errors import ConfigError

NONCE_BYTES = 16
DEV_KEY_PREFIX = "dev-"
TOKEN_CHARS = 43  # a 32-byte HMAC in unpadded base64url
ID_CHARS = 22  # a 16-byte verification id in unpadded base64url
ENTRY_MAC_BYTES = 16  # a code-entry handle's HMAC, truncated: 128 bits, 22 base64url characters
ENTRY_MAC_CHARS = 22
LINK_PARAMETER, ENTRY_PARAMETER = "token", "entry"  # the confirm target's query: an email link, a code-entry page


class KeySettings(Protocol):
    """What a keyring is built from: TOKEN_KEYS, and where a local run keeps its development key
    (config.py's TokenConfig, which parses TOKEN_KEYS with this module)."""

    @property
    def keys(self) -> str | None: ...
    @property
    def production(self) -> bool: ...
    @property
    def local_dir(self) -> Path: ...


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes | None:
    """The bytes of unpadded base64url text in its one canonical spelling, else None."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        return None
    return raw if _b64(raw) == text else None


def page_url(base: str, name: str, value: str) -> str:
    """`base` (VERIFY_LINK_BASE, which may carry a query of its own) with one more query parameter."""
    return f"{base}{'&' if '?' in base else '?'}{name}={value}"


def code_entry_url(base: str, key: TokenKey, verification_id: uuid.UUID) -> str:
    """The hosted code-entry page of a verification with an SMS: `VERIFY_LINK_BASE?entry=<handle>`."""
    return page_url(base, ENTRY_PARAMETER, key.code_entry_handle(verification_id))


def with_verification_id(verification_id: uuid.UUID, token: str) -> str:
    """An email link's token: the verification id first, so a confirmation finds its row by primary
    key (no index of digests to write). The id is no secret; the token is."""
    return _b64(verification_id.bytes) + token


def split_link(link: str) -> tuple[uuid.UUID | None, str]:
    """(verification id, token) of a link token; (None, "") for anything else. The caller has checked
    the characters."""
    if len(link) != ID_CHARS + TOKEN_CHARS:
        return None, ""
    head, token = link[:ID_CHARS], link[ID_CHARS:]
    raw = _unb64(head)
    if raw is None:  # one spelling per id
        return None, ""
    return uuid.UUID(bytes=raw), token


@dataclass(frozen=True)
class TokenKey:
    key_id: str
    secret: bytes = b""

    def __repr__(self) -> str:  # never print key material
        return f"TokenKey({self.key_id!r})"

    @property
    def is_development(self) -> bool:
        return self.key_id.startswith(DEV_KEY_PREFIX)

    def _mac(self, label: bytes, *parts: bytes) -> bytes:
        return hmac.new(self.secret, label + b"\x00" + b"\x00".join(parts), hashlib.sha256).digest()

    # -- derivation (worker, at render time) -----------------------------------------------
    def link_token(self, verification_id: uuid.UUID, nonce: bytes) -> str:
        """256-bit URL-safe token for the email link (43 characters): the secret part of `link`."""
        return _b64(self._mac(b"link-token", verification_id.bytes, nonce))

    def link(self, verification_id: uuid.UUID, nonce: bytes) -> str:
        """What an email link carries: the verification id, then the token."""
        return with_verification_id(verification_id, self.link_token(verification_id, nonce))

    def sms_code(self, verification_id: uuid.UUID, nonce: bytes, digits: int = 6) -> str:
        return self.code(SMS, verification_id, nonce, digits)

    def code(self, channel: str, verification_id: uuid.UUID, nonce: bytes, digits: int = 6) -> str:
        """The code one code channel carries (`<channel>-code` in the derivation): each channel of a
        verification has its own, so a code that proves also tells which channel delivered it."""
        if channel not in CODE_CHANNELS:
            raise ValueError(f"{channel!r} carries no code")
        raw = self._mac(channel.encode() + b"-code", verification_id.bytes, nonce)
        return str(int.from_bytes(raw, "big") % 10**digits).zfill(digits)

    def code_entry_handle(self, verification_id: uuid.UUID) -> str:
        """What the hosted code-entry page's URL carries (`code_entry_url`): the verification id, then
        128 bits of HMAC over it. It locates the verification and proves nothing: only the SMS code
        confirms. Without the key nobody can make one for another verification, so the page cannot be
        enumerated, nor a known verification id turned into a page to spend its tries on."""
        return _b64(verification_id.bytes) + _b64(self._mac(b"code-entry", verification_id.bytes)[:ENTRY_MAC_BYTES])

    # -- digests (create stores one, confirm matches one) -----------------------------------
    def link_digest(self, token: str) -> bytes:
        return self._mac(b"link-digest", token.encode())

    def code_digest(self, verification_id: uuid.UUID, code: str) -> bytes:
        return self._mac(b"code-digest", verification_id.bytes, code.encode())


class Keyring:
    """Ordered keys: the first signs new verifications, all are accepted (rotation)."""

    def __init__(self, keys: list[TokenKey]):
        if not keys:
            raise ConfigError("TOKEN_KEYS holds no key")
        ids = [k.key_id for k in keys]
        if len(set(ids)) != len(ids):
            raise ConfigError("TOKEN_KEYS has duplicate key ids")
        self.keys = tuple(keys)
        self._by_id = {k.key_id: k for k in keys}

    def __repr__(self) -> str:
        return f"Keyring({[k.key_id for k in self.keys]})"

    @property
    def primary(self) -> TokenKey:
        return self.keys[0]

    def get(self, key_id: str) -> TokenKey:
        try:
            return self._by_id[key_id]
        except KeyError:
            raise ConfigError(
                f"token key {key_id!r} is not in TOKEN_KEYS (removed before its verifications expired?)"
            ) from None

    def code_entry_target(self, handle: str | None) -> uuid.UUID | None:
        """The verification a code-entry handle names when a key of the ring made it, else None. Every
        key is compared, without an early exit (a handle made before a rotation still works)."""
        if not handle or len(handle) != ID_CHARS + ENTRY_MAC_CHARS or not handle.isascii():
            return None
        raw_id = _unb64(handle[:ID_CHARS])
        if raw_id is None or len(raw_id) != 16:
            return None
        verification_id = uuid.UUID(bytes=raw_id)
        found = False
        for key in self.keys:
            found |= hmac.compare_digest(key.code_entry_handle(verification_id), handle)
        return verification_id if found else None

    @classmethod
    def parse(cls, spec: str) -> Keyring:
        keys = []
        for item in (part.strip() for part in spec.split(",")):
            if not item:
                continue
            key_id, sep, encoded = item.partition(":")
            if not sep or not key_id:
                raise ConfigError("TOKEN_KEYS entries must look like key_id:base64url-secret")
            try:
                # validate: urlsafe_b64decode would silently drop a stray character and yield another key.
                secret = base64.b64decode(encoded + "=" * (-len(encoded) % 4), altchars=b"-_", validate=True)
            except ValueError:
                raise ConfigError(f"TOKEN_KEYS key {key_id!r} is not valid base64url") from None
            if len(secret) < 32:
                raise ConfigError(f"TOKEN_KEYS key {key_id!r} must hold at least 32 bytes")
            keys.append(TokenKey(key_id, secret))
        return cls(keys)

    @classmethod
    def from_config(cls, config: KeySettings) -> Keyring:
        if config.keys:
            ring = cls.parse(config.keys)
        elif config.production:
            raise ConfigError("TOKEN_KEYS is required in production")
        else:
            ring = cls.parse(_development_key(config.local_dir))
        if config.production and any(k.is_development for k in ring.keys):
            raise ConfigError("refusing to run in production with a development token key")
        return ring


def new_key_spec(key_id: str | None = None) -> str:
    """A fresh `key_id:secret` entry for TOKEN_KEYS (verifyctl new-key)."""
    key_id = key_id or f"k{secrets.token_hex(4)}"
    return f"{key_id}:{base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b'=').decode()}"


def _development_key(local_dir: Path) -> str:
    """Generated once into the git-ignored local folder, so local tokens survive restarts."""
    path = local_dir / "dev-token-key"
    if not path.exists():
        local_dir.mkdir(parents=True, exist_ok=True)
        spec = new_key_spec(DEV_KEY_PREFIX + secrets.token_hex(4))
        # mkstemp: a name of its own per caller (threads share a pid) and mode 0600 from the first byte.
        fd, tmp_name = tempfile.mkstemp(dir=local_dir, prefix=".dev-token-key.")
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(spec)
            os.link(tmp, path)  # atomic: a concurrent first run keeps whichever key landed first
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return path.read_text().strip()


def new_nonce() -> bytes:
    return secrets.token_bytes(NONCE_BYTES)
