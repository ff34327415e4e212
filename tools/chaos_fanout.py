"""The chaos run's fan-out (tools/chaos.py mixes it into its Run): the dispatch processes start more
invocations through the fan-out's local stand-in (platform/tasks.py), which POSTs each task here,
as Cloud Tasks would to the dispatch service; each task becomes a `tools/chaos_sibling.py` process
in a slot of its own, so the injections kill (SIGKILL) fan-out invocations mid-batch as they kill
the scheduled ones. Every dispatch report is checked against the budget: no invocation overruns."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from chaos_state import RunState
from signup_verification.delivery.batch_sizing import invocation_seconds

ROOT = Path(__file__).resolve().parents[1]


class Fanout(RunState):
    """The receiver of fan-out tasks and the processes it starts."""

    def start_fanout(self) -> dict[str, str]:
        """Start the receiver; the settings that point the dispatch processes' fan-out at it."""
        run = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                started = run._start_sibling(body)
                self.send_response(200 if started else 503)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.fanout_server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.fanout_server.daemon_threads = True
        threading.Thread(target=self.fanout_server.serve_forever, name="fanout-receiver", daemon=True).start()
        return {
            "DISPATCH_FANOUT_URL": f"http://127.0.0.1:{self.fanout_server.server_address[1]}/",
            "DISPATCH_MAX_PARALLEL": "3",
            # A tiny drain target: every backlog the fast fakes leave calls for more invocations.
            "DISPATCH_FANOUT_DRAIN_SECONDS": "0.02",
        }

    def stop_fanout(self) -> None:
        self.fanout_server.shutdown()
        self.fanout_server.server_close()

    def _start_sibling(self, body: bytes) -> bool:
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
            slot_state = {"proc": proc, "paused": False, "fanout": True}
            self.slots.append(slot_state)
            self.figures["fanout_invocations"] += 1
        threading.Thread(target=self._wait_sibling, args=(slot_state, log), daemon=True).start()
        return True

    def _wait_sibling(self, slot: dict, log) -> None:
        out, _ = slot["proc"].communicate()
        log.close()
        code = slot["proc"].returncode
        with self.lock:
            self.slots.remove(slot)
            killed = slot.pop("killed", False)
        if code == 0:
            self.figures["fanout_completed"] += 1
            self.check_budget(out, frozen=False)
        elif code == -signal.SIGKILL:
            self.figures["fanout_killed_sigkill" if killed else "fanout_exit_sigkill"] += 1
        else:
            self.figures[f"fanout_exit_{code}"] += 1

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
