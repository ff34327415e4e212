"""The chaos run's injections (tools/chaos.py mixes them into its Run): workers SIGKILLed at random
moments (one holding leases when there is one; a fan-out invocation holding leases first, once one
does), one worker frozen (SIGSTOP) past its lease while it holds a batch claimed ahead and resumed
later, and the PostgreSQL server stopped and started once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time

from chaos_state import RunState
from signup_verification.delivery.batch_sizing import MIN_LEASE_SECONDS
from signup_verification.platform.database import Database, UnavailableError

LEASE_SECONDS = MIN_LEASE_SECONDS  # the dispatcher's shortest lease: a frozen worker must outlive it


class Injections(RunState):
    """What the chaos phase does to the workers and the server."""

    def _chaos(self) -> None:
        c = self.config
        rng = random.Random(c.seed + 2)
        restart_at, pause_at = c.chaos_seconds * c.pg_restart_at, c.chaos_seconds * c.pause_at
        restarted = paused = False
        restarted_at = 0.0  # wall clock, as the server's timestamps
        db = Database(self.pg.params, application_name="chaos-monitor")
        next_kill = self._elapsed() + rng.uniform(*c.kill_every)
        try:
            # the freeze may come after the phase, within half of it again: it waits for a worker claiming
            # after the restart
            while not self.stopping.is_set() and (
                self._elapsed() < c.chaos_seconds
                or not restarted
                or (not paused and self._elapsed() < 1.5 * c.chaos_seconds)
            ):
                now = self._elapsed()
                if not restarted and now >= restart_at:
                    try:
                        down = self.pg.restart(c.pg_outage_seconds)
                    except subprocess.CalledProcessError as exc:  # nothing can settle now: end the run, do not wait
                        self.errors.append(f"PostgreSQL did not start again after its restart: {exc}")
                        self.stopping.set()
                        return
                    self.figures["pg_restarts"] += 1
                    self.figures["pg_down_seconds"] = round(down, 1)
                    self.log(f"{now:6.1f}s PostgreSQL restarted ({down:.1f} s down)")
                    restarted, restarted_at = True, time.time()
                elif not paused and now >= pause_at:
                    paused = self._freeze_one(db, restarted_at)  # retried until a worker has sends in flight
                elif now >= next_kill and now < c.chaos_seconds:
                    self._kill_one(rng, db)
                    next_kill = now + rng.uniform(*c.kill_every)
                time.sleep(0.05)
        finally:
            db.close()

    def _lease_holders(
        self,
        db: Database,
        statuses: tuple[str, ...] = ("claimed", "attempting"),
        ahead_only: bool = False,
        claimed_after: float = 0.0,
    ) -> dict[int, int]:
        """{pid: leases held in `statuses`} of the workers holding leases now; {} while the server is down.
        `ahead_only`: only batches claimed ahead, sends not started (claimed, or begun by the fused claim).
        `claimed_after` (wall clock): only leases claimed since then."""
        try:
            owners = db.run(
                "SELECT lease_owner, count(*) FROM delivery_intents WHERE status = ANY(:statuses)"
                " AND lease_owner IS NOT NULL AND (NOT :ahead OR status = 'claimed' OR sending_at IS NULL)"
                " AND (CAST(:after AS float8) = 0 OR last_claimed_at > to_timestamp(CAST(:after AS float8))) GROUP BY 1",
                statuses=list(statuses),
                ahead=ahead_only,
                after=claimed_after,
            )
        except UnavailableError:
            return {}
        return {int(owner.split(":")[2]): count for owner, count in owners}

    def _kill_one(self, rng: random.Random, db: Database) -> None:
        """SIGKILL a worker, one holding leases when there is one: a kill mid-work, rather than of a
        process still starting (each start-up costs a worker CPU time; killed then, it leaves nothing).
        Launches carrying a fault point are left to reach it (killed early, they only hand it on)."""
        holders = self._lease_holders(db)
        with self.lock:
            live = [
                s
                for s in self.slots
                if s["proc"] is not None
                and s["proc"].poll() is None
                and not s["paused"]
                and not s.get("frozen")  # thawed, it must live to try its fenced writes (the figures check them)
                and not s.get("fault")
                and s.get("kind", "task") == "task"  # a replayed or forged fan-out task: its answer is checked
            ]
            working = [s for s in live if s["proc"].pid in holders]
            fanout_working = [s for s in working if s.get("fanout")]
            if fanout_working and not self.figures.get("fanout_killed_mid_batch"):
                working = fanout_working  # a fan-out invocation killed mid-batch, at least once
            if working or live:
                slot = rng.choice(working or live)
                slot["killed"] = True
                os.kill(slot["proc"].pid, signal.SIGKILL)
                if slot.get("fanout") and slot in working:
                    self.figures["fanout_killed_mid_batch"] += 1

    def _freeze_one(self, db: Database, restarted_at: float) -> bool:
        """SIGSTOP a worker that holds claimed leases, for longer than its lease; SIGCONT it later. Whether it
        still holds them is read again once it is stopped (it cannot change them then): if its batch
        settled in between, it is resumed at once and another moment is tried."""
        # One holding a batch claimed ahead: on resume its start is fenced and refused (stale) for sure, where
        # sends still in flight past the deadline would be left to the reconciler without a write.
        # the fused claim's batch is 'attempting' from the claim on, not from its start
        # Claimed since the restart: a worker whose connection the restart ended (its sends were in flight
        # then) would fail its late writes with an error on thaw, not have them refused as stale.
        pids = self._lease_holders(db, ahead_only=True, claimed_after=restarted_at)
        with self.lock:
            slot = next(
                (
                    s
                    for s in self.slots
                    if s["proc"] is not None
                    and s["proc"].pid in pids
                    and s["proc"].poll() is None
                    and not s.get("fault")
                    and not s.get("fanout")  # its exit is recorded by the slot loop of a scheduled one
                ),
                None,
            )  # one that will live to write
            if slot is None:
                return False
            proc = slot["proc"]
            os.kill(proc.pid, signal.SIGSTOP)
            slot["paused"] = True
        time.sleep(0.2)
        try:
            claimed, held = db.run(
                "SELECT count(*) FILTER (WHERE status = 'claimed' OR sending_at IS NULL), count(*) FROM delivery_intents"
                " WHERE status IN ('claimed', 'attempting') AND split_part(lease_owner, ':', 3) = :pid",
                pid=str(proc.pid),
            )[0]
        except UnavailableError:
            claimed = held = 0
        if not claimed:
            self._thaw(slot, proc)
            return False
        slot["frozen"] = True
        self.figures["workers_frozen_past_lease"] += 1
        self.figures["frozen_worker_leases"] = held
        threading.Timer(LEASE_SECONDS + 5, self._thaw, args=(slot, proc)).start()
        self.log(f"{self._elapsed():6.1f}s worker {proc.pid} frozen for {LEASE_SECONDS + 5} s holding {held} leases")
        return True

    def _thaw(self, slot: dict, proc: subprocess.Popen) -> None:
        with self.lock:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
            slot["paused"] = False
