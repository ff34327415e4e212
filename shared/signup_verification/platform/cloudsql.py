"""Cloud SQL through the Cloud SQL Python Connector: pg8000, lazy refresh, IAM database auth.

Why the connector: the Terraform provider cannot attach the /cloudsql socket to a gen2 function,
and the connector gives mTLS with ephemeral certificates plus IAM login (no password anywhere).
`refresh_strategy="lazy"` because a serverless instance's CPU is throttled between requests, so
a background refresh would stall. One Connector per process, built on first use.

Used when INSTANCE_CONNECTION_NAME (`project:region:instance`) is set; DB_USER is the IAM database
user (a person's email as it is, an operator's verifyctl; a service account's email with or without
`.gserviceaccount.com`, which the connector trims), DB_NAME the database and DB_IP_TYPE the
instance's address to dial (`public`, or `private` where the instance has no public IP and the
service reaches its VPC). The connector is reached through a seam (`use_factory`) that tests and the
deployment rehearsal fill with a stand-in.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import pg8000.dbapi
import pg8000.native
from pg8000.core import CoreConnection

from .config import DatabaseConfig
from .database import ConnectionParams
from .errors import ConfigError

_INSTANCE = re.compile(r"^[a-z][a-z0-9.:-]*[a-z0-9]:[a-z]+-[a-z]+\d+:[a-z][a-z0-9-]{0,97}$")


class ConnectorLike(Protocol):
    def connect(self, instance_connection_string: str, driver: str, **kwargs: Any) -> Any: ...

    def close(self) -> None: ...


def default_factory() -> ConnectorLike:
    from google.cloud.sql.connector import Connector

    return Connector(refresh_strategy="lazy", enable_iam_auth=True)


_factory: Callable[[], ConnectorLike] = default_factory
_connector: ConnectorLike | None = None
_lock = threading.Lock()


def use_factory(factory: Callable[[], ConnectorLike] | None) -> Callable[[], ConnectorLike]:
    """Replace how the connector is built (tests; None restores the real one); returns the old factory."""
    global _factory
    close()
    with _lock:
        previous, _factory = _factory, factory or default_factory
    return previous


def _shared() -> ConnectorLike:
    global _connector
    with _lock:
        if _connector is None:
            _connector = _factory()
        return _connector


def close() -> None:
    """Stop the connector's refresh thread (end of process, or tests)."""
    global _connector
    with _lock:
        connector, _connector = _connector, None
    if connector is not None:
        connector.close()


def connection_params(config: DatabaseConfig) -> ConnectionParams:
    """What the Database records about its peer; the connector does the actual dialling."""
    name = config.instance_connection_name or ""
    if not _INSTANCE.match(name):
        raise ConfigError(f"INSTANCE_CONNECTION_NAME must look like project:region:instance, got {name!r}")
    if not config.user:
        raise ConfigError(
            "DB_USER (the IAM database user: a person's or a service account's email) is required with INSTANCE_CONNECTION_NAME"
        )
    return ConnectionParams(user=config.user, database=config.name, host=name)


def connector_for(
    config: DatabaseConfig, application_name: str, settings: Mapping[str, str] | None = None
) -> Callable[[], pg8000.native.Connection] | None:
    """A `Database(connector=...)` callable, or None when INSTANCE_CONNECTION_NAME is unset. `settings`:
    session settings for the start-up packet (pg8000's startup_params, passed through by the connector)."""
    instance = config.instance_connection_name
    if not instance:
        return None
    params = connection_params(config)

    def connect() -> pg8000.native.Connection:
        try:
            con = _shared().connect(
                instance,
                "pg8000",
                user=params.user,
                db=params.database,
                enable_iam_auth=True,
                ip_type=config.ip_type,
                application_name=application_name,
                **({"startup_params": dict(settings)} if settings else {}),
            )
        except (OSError, pg8000.dbapi.InterfaceError, pg8000.dbapi.DatabaseError):
            raise
        except Exception as exc:  # auth, Admin API, DNS: all mean "database unreachable" (503)
            raise ConnectionError(f"Cloud SQL connector failed: {type(exc).__name__}") from exc
        return as_native(con)

    return connect


def as_native(con: Any) -> pg8000.native.Connection:
    """The connector returns a pg8000 DB-API connection; Database speaks pg8000's native API.

    Both classes are thin layers over the same authenticated CoreConnection (native adds only
    `_context`), so the open session is re-typed rather than re-dialled.
    """
    if isinstance(con, pg8000.native.Connection):
        return con
    if not isinstance(con, pg8000.dbapi.Connection) or not isinstance(con, CoreConnection):
        raise TypeError(f"expected a pg8000 connection, got {type(con).__name__}")
    con.__class__ = pg8000.native.Connection
    con._context = None
    return con
