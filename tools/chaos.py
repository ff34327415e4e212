#!/usr/bin/env python3
"""The chaos run: the whole delivery path under crashes, provider faults and a database restart.

    .venv/bin/python tools/chaos.py            # full: 5,000 intents (a few minutes on 2 cores)
    .venv/bin/python tools/chaos.py --quick    # CI size (tests/system/test_chaos.py): ~400 intents, < 90 s
    options: --intents N --workers N --seed N --json report.json --keep (leave the work dir)

Everything runs on this machine: a private embedded PostgreSQL in a temporary directory (never the
shared test server), local SMTP and Twilio fakes on 127.0.0.1 that time out, reset connections,
answer 429 with Retry-After or 5xx at random, `verifyctl dispatch` processes in N supervised slots
(relaunched after each invocation, as Cloud Scheduler would, and after each kill), and
`verifyctl reconcile` on a short schedule. The dispatch processes fan out: the invocations they
start run as processes of their own (tools/chaos_fanout.py, as Cloud Tasks would start them).
While the chaos phase lasts, workers are SIGKILLed at random moments (fan-out invocations among
them, at least one mid-batch), some launches run tools/fault_dispatch.py (kill after the claim,
after begin, after the provider accepted and before settle), one worker holding attempts is frozen
(SIGSTOP) past its lease and resumed, the PostgreSQL server is stopped and started once, and
verifications are superseded and expire mid-run (tools/chaos_creates.py). No invocation may run
past its budget. Beside the genuine users, an attacker signs up destinations it chose
(tools/chaos_attack.py): French numbers Twilio refuses for this sender (21606) or reports filtered
(30007), addresses at its own domain that our relay refuses quoting that domain's server; none of it
may make a genuine user's message wait.
Then the faults stop, the run drains, and tools/chaos_checks.py checks the invariants. Exit status 0
when every invariant held. docs/reliability.md has the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import chaos_fallback  # noqa: E402  (mixed channel policies)
from chaos_attack import Attack  # noqa: E402  (an attacker's signups to destinations it chose)
from chaos_checks import Findings, Ledger, check  # noqa: E402
from chaos_creates import Creates  # noqa: E402  (the genuine users' creates, supersedes, short-lived ones)
from chaos_database import PrivateServer  # noqa: E402
from chaos_fanout import Fanout  # noqa: E402  (fan-out invocations as processes of their own)
from chaos_faults import ChaosSmtp, ChaosTwilio, Faults  # noqa: E402
from chaos_injections import Injections  # noqa: E402  (kills, the freeze, the restart)
from chaos_reports import Reports  # noqa: E402  (provider reports, duplicated, reordered, late)
from chaos_state import ChaosConfig  # noqa: E402  (the run's sizes, rates and timings)
from chaos_webhooks import Webhooks  # noqa: E402  (the receiver, the confirmer, their checks)
from chaos_workers import Workers, lookups_by_channel  # noqa: E402  (the dispatch slots, the reconciler)
from signup_verification.config import load  # noqa: E402
from signup_verification.delivery.webhook_config import WebhookConfig  # noqa: E402
from signup_verification.local.fake_twilio import content_sids_setting  # noqa: E402
from signup_verification.platform import migrations  # noqa: E402
from signup_verification.platform.database import Database, UnavailableError  # noqa: E402
from signup_verification.verifications.tokens import Keyring, new_key_spec  # noqa: E402


class Run(Workers, Injections, Fanout, Creates):
    def __init__(self, config: ChaosConfig, workdir: Path, log=print):
        self.config = config
        self.workdir = workdir
        self.log = log
        self.rng = random.Random(config.seed)
        self.figures: defaultdict[str, Any] = defaultdict(int)  # counts, plus a few measured figures (floats)
        self.ledger = Ledger()
        self.stopping = threading.Event()
        self.chaos_on = threading.Event()
        self.lock = threading.Lock()
        self.slots: list[dict] = [{"proc": None, "paused": False} for _ in range(config.workers)]
        self.token_keys = new_key_spec("chaos")
        self.keyring = Keyring.parse(self.token_keys)
        self.errors: list[str] = []
        self.overruns: list[str] = []
        # Each crash point fires at least once (then at random): a launch whose point was never reached
        # (nothing to claim, say) hands its fault on to the next launch.
        self.fault_queue = deque(["after_send", "after_claim", "after_begin", "after_send"])

    # -- set-up -------------------------------------------------------------------------------------
    def start(self) -> None:
        self.pg = PrivateServer(self.workdir / "pg")
        self.url = self.pg.params.url()
        db = Database(self.pg.params)
        migrations.migrate(db)
        db.close()
        self.faults = Faults(self.config.rates, self.config.seed, answer_delay=self.config.send_timeout + 1.0)
        self.smtp = ChaosSmtp(self.faults).start()
        self.twilio = ChaosTwilio(self.faults).start()
        share = chaos_fallback.FallbackShare(share=self.config.fallback_share)
        self.fallback = chaos_fallback.Traffic(self.faults, self.keyring, self.config.seed, share)
        self.webhooks = Webhooks(self)
        self.reports = Reports(self)
        self.attack = Attack(self)
        # fallback confirmations go through a connection set up as the confirm API's (webhooks on)
        self.fallback.confirm_db = Database(
            self.pg.params,
            application_name="chaos-fallback-confirmer",
            session_settings=WebhookConfig(url=self.webhooks.receiver.endpoint).session_settings(),
        )
        c = self.config
        self.env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}
        self.env.update(
            {
                "PYTHONUNBUFFERED": "1",
                "DATABASE_URL": self.url,
                "TOKEN_KEYS": self.token_keys,
                "DEPLOYMENT": "chaos",
                "VERIFY_LOCAL_DIR": str(self.workdir / "local"),
                "LOG_FORMAT": "text",
                "LOG_LEVEL": "WARNING",
                "EMAIL_TRANSPORT": "smtp",
                "SMTP_HOST": self.smtp.host,
                "SMTP_PORT": str(self.smtp.port),
                "EMAIL_FROM": "Signup <no-reply@example.org>",
                "VERIFY_LINK_BASE": "https://app.example.org/confirm",
                "SMS_TRANSPORT": "twilio",
                "TWILIO_ACCOUNT_SID": self.twilio.account_sid,
                "TWILIO_AUTH_TOKEN": self.twilio.auth_token,
                "TWILIO_FROM": "+15005550006",
                "TWILIO_API_URL": self.twilio.url,
                "TWILIO_SENDER_MPS": "1000",  # the fake is no long code: its sends are not paced at 1/s
                # WhatsApp and calls through the same chaotic Twilio (its approved templates; calls from TWILIO_FROM)
                "WHATSAPP_TRANSPORT": "twilio",
                "TWILIO_WHATSAPP_FROM": "whatsapp:+15005550006",
                "TWILIO_WHATSAPP_CONTENT_SIDS": content_sids_setting(),
                "VOICE_TRANSPORT": "twilio",
                "VOICE_CALLS_PER_SECOND": "1000",
                "SEND_TIMEOUT_SECONDS": str(c.send_timeout),
                "SEND_CONCURRENCY": "8",
                # The dispatcher claims one batch ahead: a killed worker's two batches wait out their 30 s leases.
                # 25 keeps them from locking most of the quick run's backlog for its whole chaos phase.
                "DISPATCH_MAX_BATCH": "25",
                "DISPATCH_BATCH_SECONDS": "1",
                "FUNCTION_TIMEOUT_SECONDS": "20",
                "DISPATCH_SAFETY_MARGIN_SECONDS": "2",
                "SHUTDOWN_GRACE_SECONDS": "3",
                "RECONCILE_SAFETY_MARGIN_SECONDS": "2",
                "DATABASE_STATEMENT_TIMEOUT_MS": "5000",
                # Short backoff and holds so the run converges in minutes (production: 60,300,900 and 300 s;
                # a channel's or route's hold 1800 s: the attacker's route may be held, each send after
                # the hold lapses holds it again, and its own signups must end before the drain does).
                "RETRY_BACKOFF_SECONDS": "1,2,4",
                "AMBIGUOUS_HOLD_SECONDS_EMAIL": "2",
                "AMBIGUOUS_HOLD_SECONDS_SMS": "2",
                "AMBIGUOUS_HOLD_SECONDS_WHATSAPP": "2",
                "AMBIGUOUS_HOLD_SECONDS_VOICE": "2",
                "CHANNEL_HOLD_SECONDS": "2",
                # The fake lists what it takes at once (production: 120 s): the reconciler's lookup settles
                # ambiguous SMS, WhatsApp messages and calls, found or absent, before their holds do.
                "TWILIO_LOOKUP_SETTLE_SECONDS": "1",
                **self.webhooks.env(),
                **self.start_fanout(),
            }
        )
        self.settings = load(self.env)
        # The velocity limits would refuse the run's own load (its SMS numbers share one prefix): off.
        unlimited = dataclasses.replace(
            self.settings.create.abuse,
            per_account_per_hour=10**6,
            per_prefix_per_hour=10**6,
            per_country_per_hour=10**6,
        )
        self.create_settings = dataclasses.replace(
            self.settings.create, rate_limit_per_hour=10**6, rate_limit_spacing_seconds=0, abuse=unlimited
        )

    # -- the run ----------------------------------------------------------------------------------------
    def run(self) -> Findings:
        c = self.config
        self.started = time.monotonic()
        self.chaos_on.set()
        threads = [threading.Thread(target=self._create_all, name="creator")]
        threads += [threading.Thread(target=self._slot, args=(n,), name=f"slot{n}") for n in range(c.workers)]
        attackers = self.attack.threads()
        threads += [
            threading.Thread(target=self._reconciler, name="reconciler"),
            *self.webhooks.threads(),
            *self.reports.threads(),
            *attackers,
            threading.Thread(target=self._chaos, name="chaos"),
        ]
        for t in threads:
            t.start()
        try:
            threads[-1].join()  # the chaos phase, restart and pause included
            threads[0].join()
            for t in attackers:
                t.join()
            self.faults.enabled = False
            self.chaos_on.clear()
            self.figures["chaos_phase_seconds"] = round(time.monotonic() - self.started, 1)
            self.log(f"chaos phase over after {self.figures['chaos_phase_seconds']} s; draining")
            drained = self._wait_until_settled()
        finally:
            self.stopping.set()
            self._terminate_workers()
            for t in threads:
                t.join(60)
        self.figures["elapsed_seconds"] = round(time.monotonic() - self.started, 1)
        self.stop_fanout()
        self.check_nudged()
        self.smtp.stop()
        self.twilio.stop()
        self.twilio.collect()
        self.webhooks.stop()
        db = Database(self.pg.params)
        try:
            self.reports.finish(db)  # whatever is still held (nothing, when the drain caught up)
            # the fallbacks' messages are checked by chaos_fallback, the rest here
            primary, fallback = chaos_fallback.split(db, self.faults.deliveries, self.keyring)
            findings = check(db, self.ledger, primary, self.keyring, self.settings.retry)
            chaos_fallback.check(db, findings, fallback)
            findings.figures.update(self.fallback.figures)
            self.webhooks.check(db, findings)
            self.reports.check(db, findings)
            self.attack.check(db, findings)
            findings.figures["lookup_settled_by_channel"] = lookups_by_channel(db)
        finally:
            db.close()
        if not drained:
            findings.fail("lost", "the run did not settle before --max-seconds")
        for error in self.errors:
            findings.fail("harness", error)
        for overrun in self.overruns:
            findings.fail("overrun", overrun)
        findings.figures.update(self.figures)
        findings.figures["faults_injected"] = dict(self.faults.injected)
        return findings

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    def _reports_caught_up(self, db: Database) -> bool:
        try:
            return self.reports.caught_up(db)
        except UnavailableError:
            return False

    def _wait_until_settled(self) -> bool:
        held = [ch for ch, p in self.settings.retry.channels.items() if p.ambiguity == "hold"]
        db = Database(self.pg.params)
        try:
            while self._elapsed() < self.config.max_seconds:
                # reports before the outbox (a permanent one can bring a fallback forward)
                caught_up = self._reports_caught_up(db)
                try:
                    left = db.run(
                        "SELECT count(*) FROM delivery_intents WHERE status IN ('ready', 'retryable', 'claimed',"
                        " 'attempting') OR (status = 'ambiguous' AND NOT channel = ANY(:held))",
                        held=held,
                    )[0][0]
                except UnavailableError:
                    left = -1
                if caught_up and left == 0 and not any(s["paused"] for s in self.slots):
                    self.figures["drain_seconds"] = round(self._elapsed() - self.figures["chaos_phase_seconds"], 1)
                    return True
                time.sleep(1.0)
            return False
        finally:
            db.close()


def run(config: ChaosConfig, workdir: Path | None = None, keep: bool = False, log=print) -> Findings:
    own_dir = workdir is None
    workdir = Path(workdir or tempfile.mkdtemp(prefix="chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    runtime_dir = workdir / "runtime"  # pgserver's lock file; platformdirs wants it private (0700)
    runtime_dir.mkdir(mode=0o700, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime_dir))
    chaos = Run(config, workdir, log)
    try:
        chaos.start()
        log(f"chaos run: {config.intents} intents, {config.workers} workers, seed {config.seed}, work dir {workdir}")
        return chaos.run()
    finally:
        if hasattr(chaos, "pg"):
            chaos.pg.stop()
        if own_dir and not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def render(findings: Findings) -> str:
    lines = ["figures:"]
    for name, value in sorted(findings.figures.items()):
        lines.append(f"  {name:44} {json.dumps(value, sort_keys=True)}")
    lines.append("invariants: " + ("all held" if findings.ok else "VIOLATED"))
    for name, found in findings.violations.items():
        for message in found:
            lines.append(f"  {name}: {message}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the CI size (~400 intents, under 90 s)")
    parser.add_argument("--intents", type=int)
    parser.add_argument("--workers", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--max-seconds", type=float)
    parser.add_argument("--json", type=Path, help="also write the figures and violations here")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (worker logs, database)")
    args = parser.parse_args(argv)
    overrides = {
        k: v
        for k, v in (
            ("intents", args.intents),
            ("workers", args.workers),
            ("seed", args.seed),
            ("max_seconds", args.max_seconds),
        )
        if v is not None
    }
    config = ChaosConfig.quick(**overrides) if args.quick else dataclasses.replace(ChaosConfig(), **overrides)
    findings = run(config, keep=args.keep)
    print(render(findings))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "config": dataclasses.asdict(config),
                    "figures": findings.figures,
                    "violations": findings.violations,
                    "ok": findings.ok,
                },
                indent=2,
                default=str,
            )
        )
    return 0 if findings.ok else 1


if __name__ == "__main__":
    sys.exit(main())
