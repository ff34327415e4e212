"""The chaos run's workers (tools/chaos.py mixes them into its Run): N supervised `verifyctl dispatch`
slots, relaunched after each invocation and each kill as Cloud Scheduler would, some launches
carrying a crash point (tools/fault_dispatch.py), and `verifyctl reconcile` on a short schedule."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

from chaos_state import RunState

ROOT = Path(__file__).resolve().parents[1]
# What the reconciler's Twilio lookup settled, per channel: ambiguous SMS, WhatsApp messages and calls
# found sent (accepted with their sid) or proven absent (retried once) by Twilio's list APIs.
_LOOKED_UP = (
    "SELECT channel, error_class, count(*)::int FROM delivery_attempts"
    " WHERE error_class IN ('provider_lookup_found', 'provider_lookup_absent') GROUP BY 1, 2"
)


def lookups_by_channel(db) -> dict[str, dict[str, int]]:
    """{channel: {"found": n, "absent": n}} of the attempts the lookup settled."""
    settled: dict[str, dict[str, int]] = {}
    for channel, error_class, n in db.run(_LOOKED_UP):
        settled.setdefault(channel, {})[error_class.removeprefix("provider_lookup_")] = n
    return settled


class Workers(RunState):
    """The processes the chaos phase runs, and what their exits say."""

    def _slot(self, n: int) -> None:
        slot, rng = self.slots[n], random.Random(self.config.seed + 100 + n)
        log = open(self.workdir / f"worker{n}.log", "a")
        try:
            while not self.stopping.is_set():
                env = dict(self.env)
                fault = None
                if self.chaos_on.is_set() and self._elapsed() > 2.0:
                    with self.lock:
                        if self.fault_queue:
                            fault = self.fault_queue.popleft()
                        elif rng.random() < self.config.fault_launch_share:
                            fault = rng.choice(["after_send", "after_send", "after_begin", "after_claim"])
                command = (
                    [sys.executable, str(ROOT / "tools" / "fault_dispatch.py"), fault]
                    if fault
                    else [sys.executable, "-m", "signup_verification.cli", "dispatch", "--json"]
                )
                with self.lock:
                    if self.stopping.is_set():
                        break
                    proc = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
                    slot["proc"], slot["fault"] = proc, fault
                out, _ = proc.communicate()
                with self.lock:
                    slot["proc"] = None
                    killed_by_us = slot.pop("killed", False)
                    was_frozen = slot.pop("frozen", False)
                claimed = self._record_exit(proc.returncode, out, fault, killed_by_us)
                if proc.returncode == 0:
                    self.check_budget(out, frozen=was_frozen)
                if was_frozen:
                    self.figures["frozen_worker_exit"] = proc.returncode
                    self.figures["frozen_worker_stale_writes"] = (
                        json.loads(out.strip().splitlines()[-1])["stale_writes"]
                        if proc.returncode == 0 and out.strip()
                        else None
                    )
                self.stopping.wait(0.2 if claimed else 1.0)
        finally:
            log.close()

    def _record_exit(self, code: int, out: str, fault: str | None, killed_by_us: bool) -> int:
        f = self.figures
        if fault and (code != -signal.SIGKILL or killed_by_us):
            with self.lock:
                self.fault_queue.append(fault)  # it never reached its crash point: the next launch takes it
        if code == 0:
            report = json.loads(out.strip().splitlines()[-1])
            f["dispatch_invocations"] += 1
            f["stale_writes_refused"] += report["stale_writes"]
            return report["claimed"]
        if code == -signal.SIGKILL:
            f["killed_sigkill" if killed_by_us else f"killed_by_fault_{fault}"] += 1
        elif code == -signal.SIGTERM:
            f["dispatch_terminated_at_end"] += 1  # SIGTERM before its handler was installed
        elif code == 1:
            f["dispatch_exits_database_unavailable"] += 1  # verifyctl's one-line error (the server was down)
        else:
            f[f"dispatch_exit_{code}"] += 1
        return 0

    def _terminate_workers(self) -> None:
        with self.lock:
            for slot in self.slots:
                proc = slot["proc"]
                if proc is not None and proc.poll() is None:
                    if slot["paused"]:
                        os.kill(proc.pid, signal.SIGCONT)
                    proc.send_signal(signal.SIGTERM)  # graceful: in-flight sends finish, claims are released

    def _reconciler(self) -> None:
        while not self.stopping.wait(self.config.reconcile_every):
            done = subprocess.run(
                [sys.executable, "-m", "signup_verification.cli", "reconcile", "--json"],
                env=self.env,
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=60,
            )
            if done.returncode != 0:
                self.figures["reconcile_runs_failed"] += 1
                continue
            report = json.loads(done.stdout.strip().splitlines()[-1])
            self.figures["reconcile_runs"] += 1
            for move in ("claims_expired", "leases_lost", "ambiguous_to_retryable", "ambiguous_to_failed"):
                self.figures[f"reconcile_{move}"] += report.get("moves", {}).get(move, 0)
