"""The platform's settings: where and as what this process runs, the database, logging, shutdown
and migrations (README "Configuration"; each declared once, platform/settings.py)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from .settings import Env, Setting, plain, resolved_path, setting

ENVIRONMENT = Setting(
    "ENVIRONMENT",
    "local",
    choices=("local", "production"),
    help="`production` refuses development token keys and console transports, and requires what a "
    "deployment must set (`TOKEN_KEYS`, `SMS_ALLOWED_COUNTRIES`, a real `EMAIL_FROM`)",
)
DEPLOYMENT = Setting(
    "DEPLOYMENT",
    "local",
    help="label on every signal and log record; names the heartbeat, the lease owners and the reconciler's watermark",
)


class Target(StrEnum):
    """The function targets: functions/main.py's entry points, one per deployed service (infra's
    `entry_point`, Cloud Run's FUNCTION_TARGET). An instance serves one."""

    CREATE = "create_verification"
    CONFIRM = "confirm_verification"
    DISPATCH = "dispatch"
    RECONCILE = "reconcile"
    STATUS = "status"
    DELIVERY_REPORTS = "delivery_reports"


def _target(raw: str, env: Env) -> Target:
    try:
        return Target(raw)
    except ValueError:
        raise ValueError(f"must be one of {', '.join(Target)}, got {raw!r}") from None


FUNCTION_TARGET = Setting(
    "FUNCTION_TARGET",
    None,
    parse=_target,
    help="set by Cloud Run: the entry point this instance serves, one of "
    + ", ".join(f"`{t}`" for t in Target)
    + " (any other is refused at start); what production requires depends on it",
)
STATE_FOLDER = "signup-verification"  # in the user's state directory: an installed package's local dir


def _absolute(raw: str, env: Any) -> Path | None:
    """The XDG Base Directory spec: a relative path is invalid, and ignored."""
    return Path(raw) if Path(raw).is_absolute() else None


STATE_HOME = Setting(
    "XDG_STATE_HOME",
    None,
    parse=_absolute,
    shown_default="`~/.local/state`",
    help=f"outside a checkout, the local dir (`VERIFY_LOCAL_DIR`) is `{STATE_FOLDER}` in it (the XDG Base "
    "Directory spec's state directory; a relative path is ignored)",
)


def source_checkout() -> Path | None:
    """The repository checkout this package runs from (dev.py's `pip install -e .`), or None when it
    is installed (site-packages) or bundled: shared/signup_verification/platform/config.py."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "dev.py").is_file() and (root / "shared" / "signup_verification").is_dir() else None


def default_local_dir(state_home: Path | None) -> Path:
    """One place per checkout, or per user, whatever the working directory: the checkout's `.local`
    (where dev.py keeps it), else `signup-verification` in the user's state directory. A command
    run from another directory then finds the same database and the same running `verifyctl dev` as
    one run beside them, instead of making a `.local` of its own there."""
    checkout = source_checkout()
    if checkout is not None:
        return checkout / ".local"
    if state_home is None:
        try:
            state_home = Path.home() / ".local" / "state"
        except RuntimeError:  # no HOME and no passwd entry (a container's arbitrary user): nothing per user
            return (Path.cwd() / ".local").resolve()
    return (state_home / STATE_FOLDER).resolve()


LOCAL_DIR = Setting(
    "VERIFY_LOCAL_DIR",
    Path(".local"),
    parse=resolved_path,
    default_for=lambda env: default_local_dir(env(STATE_HOME)),
    shown_default="the checkout's `.local` (from any working directory); installed: "
    "`$XDG_STATE_HOME/signup-verification` (`~/.local/state/signup-verification`)",
    help="outside production: the development token key, the console outbox, the embedded database and the "
    "state of a running `verifyctl dev` (which the other commands read)",
)
K_SERVICE = Setting("K_SERVICE", None, help="set by Cloud Run (the service's name): logs default to JSON there")
FUNCTION_TIMEOUT = Setting(
    "FUNCTION_TIMEOUT_SECONDS", 60, minimum=5, help="the function's timeout; dispatch and reconcile return before it"
)
SHUTDOWN_GRACE = Setting(
    "SHUTDOWN_GRACE_SECONDS",
    8.0,
    above=0,
    help="after SIGTERM: no new claims or sends; in-flight sends may finish within this; claimed, unstarted "
    "intents are released (a number > 0; anything else is an error, never a silent default)",
)
CLOUD_TASKS_API = Setting(
    "CLOUD_TASKS_API_URL",
    "https://cloudtasks.googleapis.com/v2",
    parse=plain(lambda raw: raw.rstrip("/")),
    help="the Cloud Tasks REST API the fan-out's and the nudge's tasks are created at (a stand-in's in the "
    "deployment rehearsal)",
)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "FATAL", "WARN", "NOTSET")


def production_flag() -> Any:
    """A field that is True where ENVIRONMENT=production."""
    return ENVIRONMENT.field(view=lambda environment: environment == "production")


@dataclass(frozen=True)
class DatabaseConfig:
    """Where the database is."""

    url: str | None = setting(
        "DATABASE_URL",
        None,
        secret=True,  # may carry a password
        shown_default="embedded server",
        help="`postgresql://user:pass@host:port/db` (`?host=/socket/dir` for a unix socket)",
    )
    instance_connection_name: str | None = setting(
        "INSTANCE_CONNECTION_NAME",
        None,
        help="`project:region:instance`: connect through the Cloud SQL Python Connector (IAM login, lazy "
        "refresh) instead of `DATABASE_URL`",
    )
    user: str | None = setting(
        "DB_USER",
        None,
        help="with `INSTANCE_CONNECTION_NAME`: the IAM database user, a person's email or a service account's "
        "(with or without `.gserviceaccount.com`); the credentials the connector finds must be that principal's",
    )
    ip_type: str = setting(
        "DB_IP_TYPE",
        "public",
        parse=plain(str.lower),
        choices=("public", "private"),
        help="with `INSTANCE_CONNECTION_NAME`: the instance address the connector dials: `public` (its "
        "connector-only public IP) or `private` (its private IP, through the service's VPC egress; infra's "
        '`db_connectivity = "private_ip"`)',
    )
    name: str = setting("DB_NAME", "verification", help="with `INSTANCE_CONNECTION_NAME`: the database")
    statement_timeout_ms: int = setting(
        "DATABASE_STATEMENT_TIMEOUT_MS",
        15_000,
        minimum=100,
        help="every session's statement timeout: a stuck query cannot hold a lease or a request forever",
    )
    production: bool = production_flag()  # production never falls back to the embedded database
    local_dir: Path = LOCAL_DIR.field()  # the embedded database's data lives in local_dir / "pg"


@dataclass(frozen=True)
class LoggingConfig:
    format: str = setting(
        "LOG_FORMAT",
        "text",
        parse=plain(str.lower),
        choices=("json", "text"),
        default_for=lambda env: "json" if env(K_SERVICE) else "text",
        shown_default="`json` on Cloud Run (`K_SERVICE` set), else `text`",
        help="`json`: Cloud Logging structured lines (severity, labels, trace ids); `text`: a readable line",
    )
    level: str = setting(
        "LOG_LEVEL",
        "INFO",
        parse=plain(str.upper),
        choices=LOG_LEVELS,
        help="`DEBUG`, `INFO`, `WARNING`, `ERROR` or `CRITICAL`; any other value is an error",
    )
    deployment: str = DEPLOYMENT.field()  # the label on every record
    project_id: str | None = setting(
        "GOOGLE_CLOUD_PROJECT",
        None,
        aliases=("GCP_PROJECT",),
        help="project id that prefixes trace ids (`projects/P/traces/T`) so logs link to Cloud Trace",
    )


@dataclass(frozen=True)
class ShutdownConfig:
    grace_seconds: float = SHUTDOWN_GRACE.field()


@dataclass(frozen=True)
class MigrationConfig:
    """`verifyctl migrate`'s settings (README "Migrations")."""

    directory: Path | None = setting(
        "MIGRATIONS_DIR",
        None,
        parse=plain(Path),
        shown_default="the package's `signup_verification.sql`",
        help="another folder of migrations (with its own `functions/` folder)",
    )
    statement_timeout_ms: int = setting(
        "MIGRATION_STATEMENT_TIMEOUT_MS",
        600_000,
        minimum=1,
        help="the migration session's statement timeout: long enough for an index build, short enough "
        "that a stuck deploy ends",
    )
    lock_timeout_ms: int = setting(
        "MIGRATION_LOCK_TIMEOUT_MS",
        5_000,
        minimum=1,
        help="a migration waiting longer for a lock (behind a long transaction) fails with one line instead "
        "of queueing every later query on that table behind it; retry the deploy",
    )
