"""`verifyctl dev`: the whole service on a laptop, in one command.

Starts the embedded PostgreSQL (unless DATABASE_URL is set) and applies migrations, serves every
function target of functions/main.py with functions-framework on its own port, runs the local
mailbox (SMTP + a web page + a fake Twilio API) and emulates Cloud Scheduler by POSTing to
`dispatch` and `reconcile`. Ctrl-C (or SIGTERM) stops everything it started.
"""

from __future__ import annotations

import argparse
import ast
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..platform import migrations
from ..platform.config import Target, source_checkout
from ..platform.database import Database
from ..verifications.tokens import Keyring
from . import banner, demo_site, devenv, embedded, fake_twilio, provider_reports
from . import children as children_
from .ports import check_free
from .wiring import Wiring

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec

    from ..config import Config

# target -> port offset from --base-port; targets not listed here get the next free offsets.
PORT_OFFSETS: dict[str, int] = {
    Target.CREATE: 0,
    Target.CONFIRM: 1,
    Target.DISPATCH: 2,
    Target.RECONCILE: 3,
    Target.STATUS: 4,
}
SCHEDULED = (Target.DISPATCH, Target.RECONCILE)  # what Cloud Scheduler calls in production (infra/)
# Dummy Twilio credentials the dev children send and the mailbox's fake Twilio API checks.
DEV_TWILIO = {
    "TWILIO_ACCOUNT_SID": "AC" + "0" * 32,
    "TWILIO_AUTH_TOKEN": "local-dev-auth-token",  # the local fake's  # nosec B105
    "TWILIO_FROM": "+15005550006",
}


class DevError(RuntimeError):
    """Something the developer can fix (a busy port, a target that fails to start)."""


class _Stop(Exception):
    """SIGTERM: stop like Ctrl-C."""


def schedule_seconds(args: argparse.Namespace) -> float:
    """How often the scheduler emulation ticks: 0 (never) with --no-scheduler, --fast's interval (the
    parser's: verifyctl dev declares it), --schedule-seconds, else VERIFY_DEV_SCHEDULE_SECONDS, else
    Cloud Scheduler's minute."""
    if args.no_scheduler:
        return 0.0
    if args.fast:
        return float(args.fast)
    if args.schedule_seconds is not None:
        return float(args.schedule_seconds)
    return float(os.environ.get("VERIFY_DEV_SCHEDULE_SECONDS") or 60)


def functions_main(explicit: Path | None = None) -> Path:
    """functions/main.py: --source, else the checkout this package runs from (`pip install -e .`), else
    the working directory's. A wheel does not ship it (the deploy bundle carries it)."""
    if explicit is not None:
        if not explicit.is_file():
            raise DevError(f"--source {explicit}: no such file")
        return explicit
    checkout = source_checkout()
    candidates = [checkout / "functions" / "main.py"] if checkout else []
    for candidate in [*candidates, Path.cwd() / "functions" / "main.py"]:
        if candidate.is_file():
            return candidate
    raise DevError(
        "verifyctl dev serves the targets of functions/main.py, which the installed package does not "
        "include: run it in a checkout of the repository, or pass --source path/to/functions/main.py"
    )


def discover_targets(source: Path | None = None) -> list[str]:
    """Names of the module-level functions decorated with @functions_framework.http, in file order."""
    tree = ast.parse(functions_main(source).read_text(encoding="utf-8"))
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(ast.unparse(d) == "functions_framework.http" for d in node.decorator_list)
    ]


def assign_ports(targets: list[str], base_port: int) -> dict[str, int]:
    ports, next_offset = {}, max(PORT_OFFSETS.values()) + 1
    for target in targets:
        if target in PORT_OFFSETS:
            ports[target] = base_port + PORT_OFFSETS[target]
        else:
            ports[target], next_offset = base_port + next_offset, next_offset + 1
    return ports


def _browser_host(host: str) -> str:
    return "localhost" if host in ("127.0.0.1", "0.0.0.0", "localhost", "::") else host  # a comparison  # nosec B104


def child_environment(
    settings_env: dict[str, str], database_url: str, host: str, ports: dict[str, int], smtp_port: int, mailbox_port: int
) -> dict[str, str]:
    """What every function process gets: this database, the mailbox as SMTP server and as Twilio."""
    env = {
        **settings_env,
        "DATABASE_URL": database_url,
        "EMAIL_TRANSPORT": "smtp",
        "SMTP_HOST": host,
        "SMTP_PORT": str(smtp_port),
        "SMTP_SECURITY": "none",
        "SMS_TRANSPORT": "twilio",
        "WHATSAPP_TRANSPORT": "twilio",
        "VOICE_TRANSPORT": "twilio",
        "TWILIO_API_URL": f"http://{host}:{mailbox_port}",
        **DEV_TWILIO,
        # the mailbox's fake knows these approved WhatsApp templates; calls come from TWILIO_FROM
        "TWILIO_WHATSAPP_FROM": "whatsapp:" + DEV_TWILIO["TWILIO_FROM"],
        "TWILIO_WHATSAPP_CONTENT_SIDS": fake_twilio.content_sids_setting(),
        "PYTHONUNBUFFERED": "1",
        # the fan-out's local stand-in (platform/tasks.py) starts more invocations of this dispatch target,
        # and create nudges it through the same stand-in (outbox/nudge.py): a message leaves within about
        # a second, not at the scheduler's next tick
        "DISPATCH_FANOUT_URL": f"http://{host}:{ports[Target.DISPATCH]}/" if Target.DISPATCH in ports else "",
        "DISPATCH_NUDGE_URL": f"http://{host}:{ports[Target.DISPATCH]}/" if Target.DISPATCH in ports else "",
    }
    for name in ("SMTP_USERNAME", "SMTP_PASSWORD"):
        env.pop(name, None)
    if not env.get("VERIFY_LINK_BASE") and Target.CONFIRM in ports:
        env["VERIFY_LINK_BASE"] = f"http://{_browser_host(host)}:{ports[Target.CONFIRM]}/"
    return env


def reports_settings(host: str, port: int, sendgrid_key: ec.EllipticCurvePrivateKey) -> dict[str, str]:
    """The delivery_reports target's settings: its URL (Twilio's StatusCallback) and the development
    SendGrid verification key. Always these: locally the mailbox is the only provider reporting."""
    return {
        "DELIVERY_REPORTS_URL": f"http://{host}:{port}",
        "SENDGRID_WEBHOOK_PUBLIC_KEY": provider_reports.public_key_setting(sendgrid_key),
    }


def _mailbox_reports(
    env: dict[str, str], sendgrid_key: ec.EllipticCurvePrivateKey, delay: float
) -> dict[str, object] | None:
    if not env.get("DELIVERY_REPORTS_URL"):
        return None
    return {"sendgrid_url": env["DELIVERY_REPORTS_URL"] + "/sendgrid", "sendgrid_key": sendgrid_key, "delay": delay}


def run(config: Config, args: argparse.Namespace, out: Callable[[str], None] | None = None) -> int:
    out = out or (lambda line: print(line, flush=True))
    previous_term = signal.signal(signal.SIGTERM, _raise_stop)
    # Explicitly: a process started in the background (`&`, nohup, some CI runners) inherits SIGINT
    # ignored, and Ctrl-C (or `kill -INT`) would then do nothing.
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    children: dict[str, subprocess.Popen] = {}
    try:
        return _serve(config, args, out, children)
    except (KeyboardInterrupt, _Stop):
        out("stopping…")
        return 0
    finally:
        devenv.withdraw(config.local_dir)
        _stop_children(children)
        # Only our own server: an in-process caller (a test) may run another one.
        embedded.stop(config.local_dir / "pg")
        signal.signal(signal.SIGTERM, previous_term)
        signal.signal(signal.SIGINT, previous_int)


def _serve(
    config: Config, args: argparse.Namespace, out: Callable[[str], None], children: dict[str, subprocess.Popen]
) -> int:
    from .mailbox import MailboxServer
    from .scheduler import Job, Scheduler

    host, smtp_port = args.host, args.smtp_port or config.channels.smtp.port
    main = functions_main(getattr(args, "source", None))
    targets = discover_targets(main)
    ports = assign_ports(targets, args.base_port)
    for target, port in ports.items():
        check_free(host, port, target)
    check_free(host, smtp_port, "mailbox SMTP")
    check_free(host, args.mailbox_port, "mailbox web")
    site_port = getattr(args, "site_port", None) if Target.CREATE in ports else None
    demo = Wiring.of(os.environ, host, site_port, _browser_host(host))
    if demo.runs_demo and site_port:
        check_free(host, site_port, "demo site")

    if config.database.url:
        url, where = config.database.url, "DATABASE_URL"
    else:
        server = embedded.start(config.local_dir / "pg", stop_at_exit=True)
        url, where = (
            embedded.ensure_database(server, embedded.DEFAULT_DATABASE).url(),
            "embedded, " + str(config.local_dir / "pg"),
        )
    db = Database.from_url(url, application_name="verifyctl-dev")
    try:
        applied = migrations.migrate(db, config=config.migrations).migrations
    finally:
        db.close()
    Keyring.from_config(config.tokens)  # creates the development key once, before the children race for it
    sendgrid_key = provider_reports.development_sendgrid_key(config.local_dir)  # the mailbox signs with it

    env = child_environment(dict(os.environ), url, host, ports, smtp_port, args.mailbox_port)
    if Target.DELIVERY_REPORTS in ports:  # the mailbox is both providers, so its keys verify
        env.update(reports_settings(host, ports[Target.DELIVERY_REPORTS], sendgrid_key))
    env["VERIFY_LOCAL_DIR"] = str(Path(config.local_dir).resolve())  # the children share this run's key and outbox
    env.update(demo.service_settings(env, config.local_dir))  # webhooks and return URLs: the demo's, or yours
    write = _writer()
    started: list[children_.Target] = []
    for target, port in ports.items():  # all spawned before any thread starts: preexec_fn and threads do not mix
        started.append(children_.spawn(target, port, main, host, env, write))
        children[target] = started[-1].process  # stopped by run() whatever happens next
    for child in started:
        child.forward()
    for child in started:
        child.wait_listening(host)

    interval = schedule_seconds(args)
    # With no schedule (interval 0) the jobs still run once on demand: the mailbox's button.
    jobs = [Job(t, f"http://{host}:{ports[t]}/", interval) for t in SCHEDULED if t in ports]
    scheduler = Scheduler(jobs, report=out)
    mailbox = MailboxServer(
        host,
        smtp_port,
        args.mailbox_port,
        twilio_account_sid=DEV_TWILIO["TWILIO_ACCOUNT_SID"],
        twilio_auth_token=DEV_TWILIO["TWILIO_AUTH_TOKEN"],
        on_run_now=scheduler.run_now if jobs else None,
        reports=_mailbox_reports(env, sendgrid_key, getattr(args, "report_delay", 10.0)),
    ).start()
    site = None
    try:
        site = _demo_site(host, site_port if demo.runs_demo else None, demo.demo_origin, ports, env, out)
        scheduler.start()
        devenv.publish(config.local_dir, env, f"http://{_browser_host(host)}:{args.mailbox_port}")
        browser = _browser_host(host)
        shown = banner.Shown(ports, {j.name for j in jobs}, interval, browser, host, smtp_port, args.mailbox_port)
        for line in banner.lines(shown, applied, where, demo, site is not None, config.local_dir, list(PORT_OFFSETS)):
            out(line)
        while True:
            for child in started:
                status = child.ended()  # a port taken at the same instant raises its one line
                if status is not None:
                    out(f"{child.name} exited with status {status}; stopping everything")
                    return 1
            time.sleep(0.5)
    finally:
        scheduler.stop()
        mailbox.stop()
        if site is not None:
            site.stop()


def _writer() -> Callable[[str], None]:
    """The functions' output, passed on as it comes (their log lines end in a newline)."""

    def write(line: str) -> None:
        sys.stderr.write(line)
        sys.stderr.flush()

    return write


def _demo_site(
    host: str, port: int | None, origin: str, ports: dict[str, int], env: dict[str, str], out: Callable[[str], None]
) -> demo_site.DemoSiteServer | None:
    """The demo signup site, calling create through the client library (clients/python)."""
    if not port or Target.CREATE not in ports:
        return None
    try:
        server = demo_site.build(
            host,
            port,
            origin,
            f"http://{host}:{ports[Target.CREATE]}/",
            env["WEBHOOK_SECRET"],
            demo_site.create_signing_key(env),
        )
    except ImportError:
        out("demo site             (skipped: pip install ./clients/python, the client library it uses)")
        return None
    return server.start()


def _raise_stop(signum: int, frame: object) -> None:
    raise _Stop()


def _stop_children(children: dict[str, subprocess.Popen]) -> None:
    """SIGTERM each child's whole process group (gunicorn's master and worker), SIGKILL what lingers."""
    for child in children.values():
        if child.poll() is None:
            _signal_group(child, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for child in children.values():
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(child, signal.SIGKILL)
            child.wait()
        _signal_group(child, signal.SIGKILL)  # a worker that outlived its master


def _signal_group(child: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(child.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
