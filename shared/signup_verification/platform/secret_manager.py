"""Secret Manager references in settings, resolved once per instance and cached.

Any environment variable whose value is `sm://projects/P/secrets/S/versions/V` (V a number or
`latest`; `sm://projects/P/secrets/S` means latest) is replaced by that secret version's payload
before `config.load` reads the environment. The scheme prefix keeps a real value that merely looks
like a resource name from being fetched. Surrounding whitespace in the payload is dropped
(`echo … | gcloud secrets versions add --data-file=-` adds a newline).

The API is reached through `SecretSource`, a seam that tests fill with a local stand-in.
An error names the variable and the reference, never a value.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Protocol

from .errors import ConfigError

PREFIX = "sm://"
_REFERENCE = re.compile(
    r"^projects/(?P<project>[a-z0-9][a-z0-9-]{0,62}|\d+)/secrets/(?P<secret>[A-Za-z0-9_-]{1,255})"
    r"(?:/versions/(?P<version>latest|[1-9]\d*))?$"
)
ACCESS_TIMEOUT_SECONDS = 10.0


class SecretSource(Protocol):
    def access(self, name: str) -> bytes:
        """The payload of secret version `name` (projects/P/secrets/S/versions/V)."""


class SecretManagerSource:
    """google-cloud-secret-manager, with the client built on first use (it costs ~100 ms)."""

    def __init__(self, client: Any = None):
        self._client = client
        self._lock = threading.Lock()

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                from google.cloud import secretmanager

                self._client = secretmanager.SecretManagerServiceClient()
            return self._client

    def access(self, name: str) -> bytes:
        response = self._get_client().access_secret_version(request={"name": name}, timeout=ACCESS_TIMEOUT_SECONDS)
        return bytes(response.payload.data)


_source: SecretSource | None = None
_cache: dict[str, str] = {}
_lock = threading.Lock()


def use_source(source: SecretSource | None) -> SecretSource | None:
    """Replace the source (tests; None restores Secret Manager) and forget cached values; returns the old one."""
    global _source
    with _lock:
        previous, _source = _source, source
        _cache.clear()
    return previous


def is_reference(value: str | None) -> bool:
    return bool(value) and value.startswith(PREFIX)  # type: ignore[union-attr]


def parse_reference(variable: str, value: str) -> str:
    """`sm://projects/P/secrets/S[/versions/V]` -> the version resource name; ConfigError if malformed."""
    match = _REFERENCE.match(value[len(PREFIX) :])
    if not match:
        raise ConfigError(f"{variable} must look like sm://projects/PROJECT/secrets/NAME/versions/VERSION")
    version = match.group("version") or "latest"
    return f"projects/{match.group('project')}/secrets/{match.group('secret')}/versions/{version}"


def resolve(variable: str, value: str) -> str:
    """The secret's payload for a reference (cached per resource name), or `value` unchanged."""
    if not is_reference(value):
        return value
    name = parse_reference(variable, value)
    with _lock:
        cached = _cache.get(name)
        source = _source
    if cached is not None:
        return cached
    if source is None:
        source = SecretManagerSource()
        use_source(source)
    try:
        payload = source.access(name)
    except Exception as exc:  # NotFound, PermissionDenied, DeadlineExceeded, ...: one clear line
        raise ConfigError(f"{variable}: cannot read secret {name}: {type(exc).__name__}") from exc
    try:
        text = payload.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ConfigError(f"{variable}: secret {name} is not UTF-8 text") from None
    if not text:
        raise ConfigError(f"{variable}: secret {name} is empty")
    with _lock:
        _cache[name] = text
    return text
