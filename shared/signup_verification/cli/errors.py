"""The database errors verifyctl explains in one line: the cause and the next step (`run verifyctl
migrate`, `is PostgreSQL running there?`, `database "x" does not exist`, ...)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..platform.database import ConnectionParams, DatabaseError, InterfaceError, UnavailableError

if TYPE_CHECKING:
    from ..runtime import Runtime

_MIGRATE = "run `verifyctl migrate` first"


def _sqlstate(exc: BaseException) -> str:
    fields = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
    return str(fields.get("C", ""))


def _server_message(exc: BaseException) -> str:
    fields = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
    return str(fields.get("M", "")) or type(exc).__name__


def explain_database_error(exc: DatabaseError) -> str:
    """A statement failed: a missing table or function means an unmigrated (or older) schema."""
    code, message = _sqlstate(exc), _server_message(exc)
    if code in ("42P01", "42883", "42703", "42704"):  # undefined table / function / column / object
        return f"the database schema is missing or older than this version ({message}): {_MIGRATE}"
    if code == "42501":
        return f"permission denied ({message}): run `verifyctl grant` as the owner, or connect as another user"
    return f"database error {code or '?'}: {message}"


def explain_unavailable(exc: UnavailableError, runtime: Runtime | None) -> str:
    """Which connection failure it was (refused, missing database, unknown role, bad password)."""
    where = _where(runtime)
    # The server's refusal may sit under pg8000's own failure to say goodbye on the closed socket
    # (a BrokenPipeError raised while handling it): look down the whole chain.
    chain = _chain(exc.__cause__)
    cause = next((e for e in chain if isinstance(e, DatabaseError) and _sqlstate(e)), chain[0] if chain else None)
    if isinstance(cause, DatabaseError) and _sqlstate(cause):
        code, message = _sqlstate(cause), _server_message(cause)
        if code == "3D000":
            return f"{message} on {where}: create it (createdb), or point DATABASE_URL at another database"
        if code == "28000":
            return f"{message} on {where}: create the role, or set the user in DATABASE_URL"
        if code == "28P01":
            return f"{message} on {where}: check the password in DATABASE_URL"
        if code.startswith("57P0") or code == "53300":
            return f"the database at {where} is not accepting connections ({message}): try again shortly"
        return f"cannot connect to the database at {where}: {message}"
    if isinstance(cause, (InterfaceError, OSError)):
        detail = cause.__cause__ or cause.__context__ or cause
        if isinstance(detail, (ConnectionRefusedError, FileNotFoundError)) or "connection" in str(cause).lower():
            return f"cannot connect to the database at {where}: is PostgreSQL running there? (check DATABASE_URL)"
        return f"cannot connect to the database at {where}: {type(detail).__name__}: {detail}"
    return str(exc)


def _chain(exc: BaseException | None) -> list[BaseException]:
    found: list[BaseException] = []
    while exc is not None and exc not in found:
        found.append(exc)
        exc = exc.__cause__ or exc.__context__
    return found


def _where(runtime: Runtime | None) -> str:
    params: ConnectionParams | None = getattr(runtime, "_params", None) if runtime is not None else None
    if params is None:
        return "the configured server"
    return params.unix_sock or f"{params.host}:{params.port}"
