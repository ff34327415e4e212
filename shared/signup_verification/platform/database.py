"""PostgreSQL access: one pg8000 connection per process, prepared statements cached per SQL text.

pg8000's unprepared `run` costs three round trips (parse, describe+bind, execute); a cached
prepared statement costs one. Every hot-path query therefore goes through `Database.run`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

import pg8000.converters
import pg8000.native
from pg8000.exceptions import DatabaseError, InterfaceError

__all__ = [
    "Database",
    "DatabaseError",
    "InterfaceError",
    "ConnectionParams",
    "UnavailableError",
]


class UnavailableError(RuntimeError):
    """The database could not be reached or the connection dropped mid-request."""


@dataclass(frozen=True)
class ConnectionParams:
    user: str
    database: str
    host: str | None = None
    port: int = 5432
    password: str | None = field(default=None, repr=False)
    unix_sock: str | None = None

    @classmethod
    def from_url(cls, url: str) -> ConnectionParams:
        parsed = urlparse(url)
        if parsed.scheme not in {"postgres", "postgresql"}:
            raise ValueError("DATABASE_URL must start with postgresql://")
        query = parse_qs(parsed.query)
        host = unquote(parsed.hostname or "") or None
        port = parsed.port or 5432
        socket_dir = query.get("host", [None])[0]
        unix_sock = f"{socket_dir}/.s.PGSQL.{port}" if socket_dir and socket_dir.startswith("/") else None
        return cls(
            user=unquote(parsed.username or "postgres"),
            password=unquote(parsed.password) if parsed.password else None,
            host=None if unix_sock else (host or "localhost"),
            port=port,
            database=(parsed.path or "/postgres").lstrip("/") or "postgres",
            unix_sock=unix_sock,
        )

    def with_database(self, database: str) -> ConnectionParams:
        return ConnectionParams(self.user, database, self.host, self.port, self.password, self.unix_sock)

    def url(self) -> str:
        auth = self.user + (f":{self.password}" if self.password else "")
        if self.unix_sock:
            socket_dir = self.unix_sock.rsplit("/", 1)[0]
            return f"postgresql://{auth}@/{self.database}?host={socket_dir}&port={self.port}"
        return f"postgresql://{auth}@{self.host}:{self.port}/{self.database}"

    def connect(
        self,
        application_name: str = "signup-verification",
        timeout: float = 10.0,
        settings: Mapping[str, str] | None = None,
    ) -> pg8000.native.Connection:
        """`settings`: session settings sent in the start-up packet (no extra round trip)."""
        kwargs: dict[str, Any] = {
            "user": self.user,
            "database": self.database,
            "timeout": timeout,
            "application_name": application_name,
        }
        if settings:
            kwargs["startup_params"] = dict(settings)
        if self.password:
            kwargs["password"] = self.password
        if self.unix_sock:
            kwargs["unix_sock"] = self.unix_sock
            # PostgreSQL never speaks TLS on a unix socket; left to ask, pg8000 first builds a default
            # SSL context (loads the CA store: ~28 ms of the first request) to be told no.
            kwargs["ssl_context"] = False
        else:
            kwargs["host"], kwargs["port"] = self.host, self.port
        return pg8000.native.Connection(**kwargs)


class Database:
    """A lazily opened connection with statement caching, transactions and reconnect-after-failure.

    Not shared across threads: each thread that needs the database gets its own `Database`
    (Cloud Functions run one request per instance by default, so this is one connection per instance).
    """

    # A stuck query must not hold a lease or a request forever.
    SESSION_SETUP = (
        "SET TIME ZONE 'UTC'",
        "SET statement_timeout = '{timeout}ms'",
        "SET idle_in_transaction_session_timeout = '60s'",
    )

    def __init__(
        self,
        params: ConnectionParams,
        *,
        statement_timeout_ms: int = 15_000,
        application_name: str = "signup-verification",
        connector=None,
        session_settings: Mapping[str, str] | None = None,
    ):
        self.params = params
        # Custom settings (e.g. signup_verification.webhooks) sent in the start-up packet of
        # every connection this Database opens: no round trip. A connector is handed them to do the same.
        self.session_settings = dict(session_settings or {})
        self.statement_timeout_ms = statement_timeout_ms
        self.application_name = application_name
        self._connector = connector  # e.g. Cloud SQL Python Connector: () -> pg8000 native connection
        self._con: pg8000.native.Connection | None = None
        self._prepared: dict[str, Any] = {}
        self._in_transaction = False

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> Database:
        return cls(ConnectionParams.from_url(url), **kwargs)

    # -- connection lifecycle -------------------------------------------------------------
    def _connection(self) -> pg8000.native.Connection:
        if self._con is None:
            try:
                con = (
                    self._connector()
                    if self._connector
                    else self.params.connect(self.application_name, settings=self.session_settings)
                )
            except (OSError, InterfaceError, DatabaseError) as exc:
                raise UnavailableError(f"cannot connect to the database: {type(exc).__name__}") from exc
            try:  # a server shutting down may take the connection and end it before its setup
                for statement in self.SESSION_SETUP:
                    con.run(statement.format(timeout=self.statement_timeout_ms))
            except (OSError, InterfaceError, DatabaseError) as exc:
                try:
                    con.close()
                except Exception:  # its socket is gone already: nothing left to close  # nosec B110
                    pass
                raise UnavailableError(f"database connection lost: {type(exc).__name__}") from exc
            con.register_in_adapter(TIMESTAMPTZ_OID, _timestamptz_in)
            self._con = con
            self._prepared = {}
        return self._con

    def close(self) -> None:
        con, self._con, self._prepared = self._con, None, {}
        self._in_transaction = False
        if con is not None:
            try:
                con.close()
            except Exception:  # closing a broken socket may itself fail; nothing left to do  # nosec B110
                pass

    def _broken(self, exc: BaseException) -> UnavailableError:
        self.close()
        return UnavailableError(f"database connection lost: {type(exc).__name__}")

    # -- statements -----------------------------------------------------------------------
    def run(self, sql: str, **params: Any) -> list[list[Any]]:
        """Execute one statement as a cached prepared statement; returns the rows."""
        con = self._connection()
        try:
            statement = self._prepared.get(sql)
            if statement is None:
                statement = con.prepare(sql)
                self._prepared[sql] = statement
            return statement.run(**params)
        except (OSError, InterfaceError) as exc:
            raise self._broken(exc) from exc
        except DatabaseError as exc:
            if _is_connection_failure(exc):
                raise self._broken(exc) from exc
            if _sqlstate(exc) in _BUSY:
                raise UnavailableError(f"database busy: {_BUSY[_sqlstate(exc)]}") from exc
            raise

    def rows(self, sql: str, **params: Any) -> list[dict[str, Any]]:
        """Like `run`, but each row as a dict keyed by column name."""
        result = self.run(sql, **params)
        statement = self._prepared[sql]
        names = [c["name"] for c in statement.columns] if result else []
        return [dict(zip(names, row, strict=True)) for row in result]

    def one(self, sql: str, **params: Any) -> dict[str, Any] | None:
        found = self.rows(sql, **params)
        return found[0] if found else None

    def single(self, sql: str, **params: Any) -> dict[str, Any]:
        """The one row a statement always answers (an aggregate, a SET/SELECT of settings)."""
        [row] = self.rows(sql, **params)
        return row

    def execute_script(self, sql: str) -> None:
        """Simple-query protocol: several statements, no parameters (migrations only)."""
        con = self._connection()
        try:
            con.run(sql)
        except (OSError, InterfaceError) as exc:
            raise self._broken(exc) from exc

    @contextmanager
    def transaction(self) -> Iterator[Database]:
        if self._in_transaction:
            raise RuntimeError("nested transactions are not supported")
        self.execute_script("BEGIN")
        self._in_transaction = True
        try:
            yield self
        except BaseException:
            self._in_transaction = False
            if self._con is not None:
                try:
                    self._con.run("ROLLBACK")
                except Exception:
                    self.close()
            raise
        else:
            self._in_transaction = False
            self.execute_script("COMMIT")


# pg8000 parses timestamptz with strptime (~35 us each); the dispatcher's claim returns four per
# intent, which alone capped it near 7,000 intents/s. fromisoformat reads PostgreSQL's ISO output
# in ~0.5 us; anything it cannot read (infinity, BC dates) falls back to pg8000's parser.
TIMESTAMPTZ_OID = 1184


def _timestamptz_in(data: str) -> Any:
    try:
        return datetime.fromisoformat(data)
    except ValueError:
        return pg8000.converters.timestamptz_in(data)


# Errors that mean "try again shortly" rather than "your request is wrong": answered with 503.
_BUSY = {
    "57014": "statement timeout",
    "55P03": "lock timeout",
    "40001": "serialization failure",
    "40P01": "deadlock",
    "53300": "too many connections",
}


def _sqlstate(exc: DatabaseError) -> str:
    fields = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
    return str(fields.get("C", ""))


def _is_connection_failure(exc: DatabaseError) -> bool:
    """SQLSTATE class 08 (connection exception) and 57P01-57P03 (admin shutdown, crash, cannot connect)."""
    code = _sqlstate(exc)
    return code.startswith("08") or code in {"57P01", "57P02", "57P03"}
