"""The composition root: one Config, and what each instance builds from it once.

Cloud Functions reuse an instance across requests, so the connection, the keyring and the channel
adapters (their pooled connections) live here for the life of the instance. functions/main.py and
verifyctl both go through a Runtime; each entry point hands the domain code only its own config.
Tests call `reset()` after changing the environment.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from . import config as configuration
from .config import Config
from .platform.config import DatabaseConfig, Target
from .platform.database import ConnectionParams, Database
from .verifications.config import TOKEN_TARGETS
from .verifications.tokens import Keyring

if TYPE_CHECKING:  # imported where used: an instance serving create never loads the dispatch side
    from .delivery.channels import Channel

_log = logging.getLogger("signup_verification.runtime")

# The web targets' statements are lookups by key whose generic plans are index probes (tested at
# history scale). In PostgreSQL's auto mode an array parameter (the token ring's digests) makes the
# generic plan's estimate look dearer than a custom plan's, so confirm's link statement was re-planned
# on every call (~250 µs, a third of its CPU). dispatch sets the opposite for its own session (its
# unnest() joins need the real array sizes); the reconciler and the reports ingest keep auto.
_GENERIC_PLANS = {"plan_cache_mode": "force_generic_plan"}
_GENERIC_PLAN_TARGETS = frozenset({Target.CREATE, Target.CONFIRM})


def session_settings(config: Config) -> dict[str, str]:
    """What every connection of this instance sends in its start-up packet (no extra round trip)."""
    settings = config.channels.webhook.session_settings()  # are events written, and which
    if config.function_target in _GENERIC_PLAN_TARGETS:
        settings = {**settings, **_GENERIC_PLANS}
    return settings


class Runtime:
    def __init__(self, config: Config, application_name: str | None = None):
        self.config = config
        self.application_name = application_name or f"signup-verification:{config.deployment}"
        self._lock = threading.Lock()
        self._keyring: Keyring | None = None
        self._channels: Mapping[str, Channel] | None = None
        self._params: ConnectionParams | None = None
        self._local = threading.local()
        self._databases: list[Database] = []

    @property
    def keyring(self) -> Keyring:
        """Built on first use: reconcile and status never touch tokens, so they need no key secret."""
        with self._lock:
            if self._keyring is None:
                self._keyring = Keyring.from_config(self.config.tokens)
            return self._keyring

    @property
    def channels(self) -> Mapping[str, Channel]:
        """Built on first use (dispatch only); a transport's missing credentials raise ConfigError here."""
        with self._lock:
            if self._channels is None:
                from .delivery.channels import build_channels

                self._channels = build_channels(self.config.channels)
            return self._channels

    @property
    def db(self) -> Database:
        """One connection per thread (functions-framework may serve with threads locally), with the
        statement timeout."""
        db = getattr(self._local, "db", None)
        if db is None:
            from .platform import cloudsql

            cfg = self.config.database
            settings = session_settings(self.config)
            db = Database(
                self._connection_params(),
                application_name=self.application_name,
                statement_timeout_ms=cfg.statement_timeout_ms,
                connector=cloudsql.connector_for(cfg, self.application_name, settings),
                session_settings=settings,
            )
            self._local.db = db
            with self._lock:
                self._databases.append(db)
        return db

    def _connection_params(self) -> ConnectionParams:
        with self._lock:
            if self._params is None:
                self._params = database_params(self.config.database)
            return self._params

    def close_channels(self) -> None:
        """Close the adapters (SMTP QUIT on its pooled connections, HTTP pools) and forget them."""
        with self._lock:
            channels, self._channels = self._channels, None
        for channel in (channels or {}).values():
            try:
                channel.close()
            except Exception as exc:  # closing is best effort: the process is leaving anyway
                _log.warning(
                    "closing the %s adapter failed: %s", getattr(channel, "transport", "?"), type(exc).__name__
                )

    def close(self) -> None:
        """The connections every thread opened, and the channel adapters."""
        with self._lock:
            databases, self._databases = self._databases, []
        for db in databases:
            db.close()
        self.close_channels()
        self._local = threading.local()


def database_params(config: DatabaseConfig) -> ConnectionParams:
    if config.instance_connection_name:  # Cloud SQL connector (cloudsql.connector_for) dials
        from .platform import cloudsql

        return cloudsql.connection_params(config)
    if config.url:
        return ConnectionParams.from_url(config.url)
    if config.production:
        raise RuntimeError("DATABASE_URL (or INSTANCE_CONNECTION_NAME) is required in production")
    from .local import embedded  # the laptop's database: never imported on a deployed instance

    server = embedded.start(config.local_dir / "pg", stop_at_exit=False)
    return embedded.ensure_database(server, embedded.DEFAULT_DATABASE)


_runtime: Runtime | None = None
_lock = threading.Lock()


def get_runtime() -> Runtime:
    """The instance's Runtime, built from the environment on first use (sm:// references resolve here)."""
    global _runtime
    with _lock:
        if _runtime is None:
            runtime = Runtime(configuration.load())
            if runtime.config.function_target in TOKEN_TARGETS:
                _ = runtime.keyring  # fail at start, not on the first request, on a missing or dev key
            atexit.register(runtime.close_channels)  # the instance is ending: end its SMTP sessions properly
            _runtime = runtime
        return _runtime


def reset() -> None:
    global _runtime
    with _lock:
        if _runtime is not None:
            _runtime.close()
        _runtime = None
