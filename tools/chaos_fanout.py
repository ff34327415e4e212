"""The chaos run's fan-out (tools/chaos.py mixes it into its Run): the dispatch processes start more
invocations through the fan-out's local stand-in (platform/tasks.py), which POSTs each task here,
as Cloud Tasks would to the dispatch service; each task becomes a `tools/chaos_sibling.py` process
in a slot of its own, so the injections kill (SIGKILL) fan-out invocations mid-batch as they kill
the scheduled ones. Every dispatch report is checked against the budget: no invocation overruns.

Tasks are also delivered as Cloud Tasks may deliver them, and forged: the first task twice at once
(at-least-once delivery), every task whose invocation was killed or met the database down once more
(Cloud Tasks retries an invocation that never answered 2xx after its backoff, up to its
max_attempts), and one made-up slot. A slot runs at most once: of a pair delivered at once one runs;
a redelivery of a slot its killed invocation had claimed runs nothing; a made-up slot runs nothing
(delivery/fanout.py claims each slot in one statement). Those extra deliveries are never the
injections' kill targets, so each one's answer is checked every run.

Creates nudge dispatch here too (outbox/nudge.py through the local Cloud Tasks stand-in, as the small
tier does): each nudge task becomes a nudged invocation (`chaos_sibling.py nudge`), killable like any
other, and the first one is delivered twice at once. A nudged invocation is an ordinary dispatch run
under the same leases, so the run's checks cover what it sends; here its budget is checked, and a run
whose creates started no nudged invocation is an error."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from chaos_state import RunState
from signup_verification.delivery.batch_sizing import invocation_seconds
from signup_verification.platform.database import Database, UnavailableError

ROOT = Path(__file__).resolve().parents[1]
MAX_DELIVERIES = 3  # the dispatch fan-out queue's retry_config.max_attempts (infra/fanout.tf)
MIN_BACKOFF_SECONDS = 1.0  # its retry_config.min_backoff, doubled for each retry up to max_backoff


class Fanout(RunState):
    """The receiver of fan-out tasks and the processes it starts."""

    def start_fanout(self) -> dict[str, str]:
        """Start the receiver; the settings that point the dispatch processes' fan-out at it."""
        run = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if len(body) < length:  # its sender killed mid-request: no task (Cloud Tasks gets none)
                    run.figures["fanout_request_cut_short"] += 1
                    self.close_connection = True
                    return
                if run._is_nudge(body):
                    started = run._start_nudge(body)
                    if started and not run.figures["nudge_duplicate_deliveries"]:
                        run._start_nudge(body, "nudge_duplicate")  # at-least-once: the first nudge twice at once
                    self.send_response(200 if started else 503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                started = run._start_sibling(body)
                if started and not run.figures["fanout_duplicated"]:
                    run.figures["fanout_duplicated"] += 1  # the first task delivered twice at once
                    run._start_sibling(body, "duplicate")
                    run._start_sibling(json.dumps({"fanout": {"slot": "chaos:forged/1"}}).encode(), "forged")
                self.send_response(200 if started else 503)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.slot_runs: Counter[str] = Counter()  # fan-out slot -> its invocations that ran it to the end
        self.deliveries: Counter[str] = Counter()  # fan-out slot -> its deliveries that got no 2xx
        self.fanout_server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.fanout_server.daemon_threads = True
        threading.Thread(target=self.fanout_server.serve_forever, name="fanout-receiver", daemon=True).start()
        return {
            "DISPATCH_FANOUT_URL": f"http://127.0.0.1:{self.fanout_server.server_address[1]}/",
            "DISPATCH_MAX_PARALLEL": "3",
            # A tiny drain target: every backlog the fast fakes leave calls for more invocations.
            "DISPATCH_FANOUT_DRAIN_SECONDS": "0.02",
            "DISPATCH_NUDGE_URL": f"http://127.0.0.1:{self.fanout_server.server_address[1]}/",
            "DISPATCH_NUDGE_SECONDS": "2",  # about ten per run: each nudged invocation is a process start
        }

    def stop_fanout(self) -> None:
        self.fanout_server.shutdown()
        self.fanout_server.server_close()

    @staticmethod
    def _is_nudge(body: bytes) -> bool:
        try:
            return "nudge" in json.loads(body)
        except ValueError:
            return False

    def _start_nudge(self, body: bytes, kind: str = "nudge") -> bool:
        """A nudged invocation for the nudge task `body` (its kill and budget handled as a fan-out one's)."""
        with self.lock:
            if self.stopping.is_set():
                return False
            log = open(self.workdir / "fanout.log", "a")
            proc = subprocess.Popen(
                [sys.executable, str(ROOT / "tools" / "chaos_sibling.py"), "nudge"],
                env=self.env,
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
            # kind "task": the injections may kill it mid-batch, as any invocation a task started
            slot_state = {"proc": proc, "paused": False, "fanout": True, "body": body, "kind": "task", "nudge": kind}
            self.slots.append(slot_state)
            self.figures[f"{kind}_invocations" if kind == "nudge" else f"{kind}_deliveries"] += 1
        threading.Thread(target=self._wait_sibling, args=(slot_state, log), daemon=True).start()
        return True

    def _nudge_ended(self, code: int, out: str, killed: bool) -> None:
        """A nudged invocation exited: its report within budget; killed or the database down, it is the
        next tick's (Cloud Tasks would retry it; the scheduler is the backbone either way)."""
        if code == 0:
            self.figures["nudge_completed"] += 1
            self.check_budget(out, frozen=False)
        else:
            ended = "killed_sigkill" if killed else f"exit_{'sigkill' if code == -signal.SIGKILL else code}"
            self.figures[f"nudge_{ended}"] += 1

    def check_nudged(self) -> None:
        """Creates were made with nudging on: at least one nudged invocation must have run."""
        if self.figures["created"] and not self.figures["nudge_invocations"]:
            self.errors.append("creates nudged dispatch, yet no nudged invocation started")

    def _start_sibling(self, body: bytes, kind: str = "task", expect: str | None = None) -> bool:
        """A process for the task `body`: `kind` task (as enqueued), duplicate, redelivery or forged;
        `expect`: what it must answer (`claimed`: it must run nothing)."""
        try:
            slot = json.loads(body)["fanout"]["slot"]
        except (ValueError, KeyError, TypeError):
            self.errors.append("a fan-out task without a slot reached the receiver")
            return False
        with self.lock:
            if self.stopping.is_set():
                return False
            log = open(self.workdir / "fanout.log", "a")
            proc = subprocess.Popen(
                [sys.executable, str(ROOT / "tools" / "chaos_sibling.py"), slot],
                env=self.env,
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
            slot_state = {"proc": proc, "paused": False, "fanout": True, "body": body, "kind": kind, "expect": expect}
            self.slots.append(slot_state)
            self.figures["fanout_invocations" if kind == "task" else f"fanout_{kind}_deliveries"] += 1
        threading.Thread(target=self._wait_sibling, args=(slot_state, log), daemon=True).start()
        return True

    def _wait_sibling(self, slot: dict, log) -> None:
        out, _ = slot["proc"].communicate()
        log.close()
        code = slot["proc"].returncode
        with self.lock:
            self.slots.remove(slot)
            killed = slot.pop("killed", False)
        if "nudge" in slot:
            self._nudge_ended(code, out, killed)
            return
        if code == 0:
            self._answered(slot, out)
        elif code == -signal.SIGKILL:
            self.figures["fanout_killed_sigkill" if killed else "fanout_exit_sigkill"] += 1
            self._redeliver(slot)
        else:
            self.figures[f"fanout_exit_{code}"] += 1
            if code == 1 and slot["kind"] in ("duplicate", "forged"):
                # the database was down (its restart): the harness's own delivery made again once it
                # may be up, so that its answer is still checked this run
                if not self.stopping.wait(MIN_BACKOFF_SECONDS):
                    self._start_sibling(slot["body"], slot["kind"], slot["expect"])
            elif code == 1:  # the database was down (its restart): answered 503, which Cloud Tasks retries
                self._redeliver(slot)

    def _redeliver(self, slot: dict) -> None:
        """The task of an invocation that never answered 2xx, delivered again (Cloud Tasks' retries:
        at most MAX_DELIVERIES in all); it must run nothing if that invocation had claimed the slot."""
        name = json.loads(slot["body"])["fanout"]["slot"]
        with self.lock:
            self.deliveries[name] += 1
            failures = self.deliveries[name]
            again = slot["kind"] != "forged" and failures < MAX_DELIVERIES
        # after the queue's backoff, as Cloud Tasks retries: a retry at once would meet the same outage
        if again and not self.stopping.wait(MIN_BACKOFF_SECONDS * 2 ** (failures - 1)):
            self._start_sibling(slot["body"], "redelivery", self._slot_state(slot["body"]))

    def _answered(self, slot: dict, out: str) -> None:
        """A sibling that exited: it ran its slot (a report) or ran nothing (`not_claimed`)."""
        last = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        name = json.loads(slot["body"])["fanout"]["slot"]
        if "not_claimed" in last:
            self.figures[f"fanout_{slot['kind']}_not_claimed"] += 1
            return
        self.figures["fanout_completed"] += 1
        self.check_budget(out, frozen=False)
        with self.lock:
            self.slot_runs[name] += 1
            runs = self.slot_runs[name]
        if slot["kind"] == "forged":
            self.errors.append(f"the made-up fan-out slot {name} ran")
        elif slot["expect"] == "claimed":
            self.errors.append(f"a redelivered task ran slot {name}, which its killed invocation had claimed")
        elif runs > 1:
            self.errors.append(f"fan-out slot {name} ran {runs} times")

    def _slot_state(self, body: bytes) -> str | None:
        """`claimed` when the slot's first invocation had claimed it (then a redelivery must run
        nothing); None when it had not yet, or the database cannot tell now (its restart)."""
        try:
            db = Database(self.pg.params, application_name="chaos-fanout")
        except UnavailableError:
            return None
        try:
            rows = db.run(
                "SELECT 1 FROM dispatch_invocations WHERE slot = :slot AND claimed_by IS NOT NULL",
                slot=json.loads(body)["fanout"]["slot"],
            )
        except UnavailableError:
            return None
        finally:
            db.close()
        return "claimed" if rows else None

    def check_budget(self, out: str, frozen: bool) -> None:
        """An invocation's report: within FUNCTION_TIMEOUT_SECONDS minus its margin, or an overrun."""
        if frozen or not out.strip():  # a worker the harness froze past its lease was stopped, not slow
            return
        report = json.loads(out.strip().splitlines()[-1])
        budget_ms = 1000 * invocation_seconds(
            float(self.env["FUNCTION_TIMEOUT_SECONDS"]), float(self.env["DISPATCH_SAFETY_MARGIN_SECONDS"])
        )
        if report["elapsed_ms"] > budget_ms:
            self.overruns.append(f"an invocation ran {report['elapsed_ms']} ms, its budget {budget_ms:.0f} ms")
