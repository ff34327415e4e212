"""Per-process wiring: settings, the database connection and the token keyring, built once.

Cloud Functions reuse an instance across requests, so the connection and resolved secrets live
here for the life of the instance. Tests call `reset()` after changing the environment.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from .platform import cloudsql, secret_manager as secrets
from .local import embedded
from .platform.database import ConnectionParams, Database
from .delivery.messages import check_sms_budget
from .platform.settings import Settings
from .verifications.tokens import Keyring


@dataclass
class Runtime:
    settings: Settings
    _keyring: Keyring | None = None
    _database_params: ConnectionParams | None = None
    _local: threading.local | None = None

    @property
    def keyring(self) -> Keyring:
        """Built on first use: reconcile and status never touch tokens, so they need no key secret."""
        if self._keyring is None:
            self._keyring = Keyring.from_settings(self.settings)
        return self._keyring

    @property
    def db(self) -> Database:
        """One connection per thread (functions-framework may serve with threads locally)."""
        if self._local is None:
            self._local = threading.local()
        db = getattr(self._local, "db", None)
        if db is None:
            name = f"signup-verification:{self.settings.deployment}"
            db = Database(self._params(), application_name=name,
                          statement_timeout_ms=self.settings.statement_timeout_ms,
                          connector=cloudsql.connector_for(self.settings, name))
            self._local.db = db
        return db

    def _params(self) -> ConnectionParams:
        if self._database_params is None:
            self._database_params = database_params(self.settings)
        return self._database_params


def database_params(settings: Settings) -> ConnectionParams:
    if settings.instance_connection_name:  # Cloud SQL connector (cloudsql.connector_for) dials
        return cloudsql.connection_params(settings)
    if settings.database_url:
        return ConnectionParams.from_url(settings.database_url)
    if settings.is_production:
        raise RuntimeError("DATABASE_URL (or INSTANCE_CONNECTION_NAME) is required in production")
    server = embedded.start(settings.local_dir / "pg", stop_at_exit=False)
    return embedded.ensure_database(server, embedded.DEFAULT_DATABASE)


# The targets that derive or check tokens; Cloud Run sets FUNCTION_TARGET for each deployment.
TOKEN_TARGETS = {"create_verification", "confirm_verification", "dispatch"}
_runtime: Runtime | None = None
_lock = threading.Lock()


def get_runtime() -> Runtime:
    global _runtime
    with _lock:
        if _runtime is None:
            # sm:// references resolve here, once per instance (secrets.py caches them).
            settings = Settings.from_env(secrets.resolve_env(os.environ))
            check_sms_budget(settings)  # a PRODUCT_NAME that breaks an SMS template's budget refuses to start
            _runtime = Runtime(settings=settings)
            if os.environ.get("FUNCTION_TARGET") in TOKEN_TARGETS:
                _runtime.keyring  # fail at start, not on the first request, on a missing or dev key
        return _runtime


def reset() -> None:
    global _runtime
    with _lock:
        if _runtime is not None and _runtime._local is not None:
            db = getattr(_runtime._local, "db", None)
            if db is not None:
                db.close()
        _runtime = None
