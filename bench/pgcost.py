"""What a stretch of database work cost the server: WAL (records and full-page images apart, by
record type), rows written, index entries, commits and the backends' CPU.

    meter = Meter(monitor, "dbname")          # a connection of its own (reads only: writes no WAL)
    before = meter.snapshot(pids)             # pids: the backends doing the work
    ... the work ...
    cost = meter.since(before, pids)          # a Cost; cost.per(n) divides it by n items

WAL by record type comes from pg_waldump over the LSN range (the embedded server's own WAL files;
pg_walinspect is not in the pgserver build). Against BENCH_DATABASE_URL's server only pg_stat_wal's
totals are available (no waldump, no per-type split). Backend CPU is each backend's
se.sum_exec_runtime (/proc/PID/sched, microsecond resolution), else utime+stime (10 ms ticks).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field, fields
from pathlib import Path

from signup_verification.platform.database import Database

# pg_waldump --stats=record: "Type  N (%)  Record size (%)  FPI size (%)  Combined size (%)"
_STAT_LINE = re.compile(r"^(\S+)\s+(\d+)\s+\(\s*[\d.]+\)\s+(\d+)\s+\(\s*[\d.]+\)\s+(\d+)\s+\(\s*[\d.]+\)\s+(\d+)")


@dataclass
class Cost:
    wal_bytes: float = 0  # the LSN distance: every byte of WAL the server wrote in the range
    wal_records: float = 0  # pg_stat_wal (lags by up to a second: the per-type counts are pg_waldump's)
    wal_fpi: float = 0  # full-page images (count)
    fpi_bytes: float = 0  # pg_waldump: bytes of those images
    record_bytes: float = 0  # pg_waldump: bytes of the records without images
    heap_inserts: float = 0  # Heap INSERT (+INIT) and MULTI_INSERT rows
    heap_updates: float = 0  # Heap UPDATE (non-HOT: new index entries)
    hot_updates: float = 0  # Heap HOT_UPDATE (no index entries)
    heap_deletes: float = 0
    row_locks: float = 0  # Heap LOCK records (FOR UPDATE, foreign-key checks, tuples moving)
    index_entries: float = 0  # Btree INSERT_LEAF/INSERT_UPPER/INSERT_POST/SPLIT/NEWROOT records
    commit_records: float = 0  # Transaction COMMIT records: durable commits (a WAL flush each)
    transactions: float = 0  # pg_stat_database xact_commit: every transaction, read-only ones too
    rows_inserted: float = 0  # pg_stat_user_tables, all tables of the database
    rows_updated: float = 0
    rows_hot_updated: float = 0
    rows_deleted: float = 0
    cpu_us: float = 0  # the listed backends' CPU
    by_type: dict[str, tuple[float, float, float]] = field(default_factory=dict)  # type -> (n, record, fpi bytes)

    def per(self, n: int) -> Cost:
        scalar = {f.name: getattr(self, f.name) / n for f in fields(self) if f.name != "by_type"}
        return Cost(**scalar, by_type={k: tuple(x / n for x in v) for k, v in self.by_type.items()})

    def __add__(self, other: Cost) -> Cost:
        scalar = {f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self) if f.name != "by_type"}
        types = dict(self.by_type)
        for k, v in other.by_type.items():
            types[k] = tuple(a + b for a, b in zip(types.get(k, (0, 0, 0)), v, strict=True))
        return Cost(**scalar, by_type=types)


@dataclass(frozen=True)
class Snapshot:
    lsn: str
    wal: tuple[int, int, int]  # records, fpi, bytes
    xact_commit: int
    tuples: tuple[int, int, int, int]  # ins, upd, hot_upd, del
    cpu_us: float


def backend_cpu_us(pid: int) -> float:
    """CPU of one process so far, in microseconds (processes on this machine only)."""
    try:
        for line in Path(f"/proc/{pid}/sched").read_text().splitlines():
            if line.startswith("se.sum_exec_runtime"):
                return float(line.split(":")[1]) * 1000.0
    except (OSError, ValueError, IndexError):
        pass
    try:
        parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) * 1_000_000 / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def waldump_binary() -> Path | None:
    explicit = os.environ.get("BENCH_PG_WALDUMP")
    if explicit:
        return Path(explicit)
    try:
        import pgserver
    except ImportError:
        return None
    path = Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_waldump"
    return path if path.exists() else None


class Meter:
    def __init__(self, monitor: Database, database: str, waldump: bool = True):
        self.db = monitor
        self.database = database
        self.binary = waldump_binary() if waldump and not os.environ.get("BENCH_DATABASE_URL") else None
        self.wal_dir = Path(self.db.run("SHOW data_directory")[0][0]) / "pg_wal" if self.binary else None

    def backends(self) -> list[int]:
        """The client backends connected to the measured database (not this monitor)."""
        rows = self.db.run(
            "SELECT pid FROM pg_stat_activity WHERE datname = :d AND backend_type = 'client backend'"
            " AND pid <> pg_backend_pid()",
            d=self.database,
        )
        return [r[0] for r in rows]

    def snapshot(self, pids: list[int]) -> Snapshot:
        self.db.run("SELECT pg_stat_clear_snapshot()")
        lsn = self.db.run("SELECT pg_current_wal_insert_lsn()::text")[0][0]
        wal = self.db.run("SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal")[0]
        xact = self.db.run("SELECT xact_commit FROM pg_stat_database WHERE datname = :d", d=self.database)[0][0]
        return Snapshot(lsn, tuple(int(x) for x in wal), int(xact), self._tuples(), sum(map(backend_cpu_us, pids)))

    def _tuples(self) -> tuple[int, int, int, int]:
        # pg_stat_user_tables only shows the connected database: read it through a fresh connection there
        con = self.db.params.with_database(self.database).connect("bench-meter")  # type: ignore[attr-defined]
        try:
            row = con.run(
                "SELECT coalesce(sum(n_tup_ins),0), coalesce(sum(n_tup_upd),0), coalesce(sum(n_tup_hot_upd),0),"
                " coalesce(sum(n_tup_del),0) FROM pg_stat_user_tables"
            )[0]
        finally:
            con.close()
        return tuple(int(x) for x in row)

    def since(self, before: Snapshot, pids: list[int]) -> Cost:
        """The cost from `before` to now. The working connections must have flushed their statistics
        (flush_stats on each) so the row and transaction counters are current."""
        after = self.snapshot(pids)
        cost = Cost(
            wal_records=after.wal[0] - before.wal[0],
            wal_fpi=after.wal[1] - before.wal[1],
            wal_bytes=after.wal[2] - before.wal[2],
            transactions=after.xact_commit - before.xact_commit,
            rows_inserted=after.tuples[0] - before.tuples[0],
            rows_updated=after.tuples[1] - before.tuples[1],
            rows_hot_updated=after.tuples[2] - before.tuples[2],
            rows_deleted=after.tuples[3] - before.tuples[3],
            cpu_us=after.cpu_us - before.cpu_us,
        )
        if self.binary is not None:
            self._waldump(cost, before.lsn, after.lsn)
        # The WAL written in the range: pg_stat_wal lags (a backend publishes its counters at most
        # once a second), the LSN does not.
        cost.wal_bytes = float(self.db.run("SELECT pg_wal_lsn_diff(:a, :b)", a=after.lsn, b=before.lsn)[0][0])
        return cost

    def _waldump(self, cost: Cost, start: str, end: str) -> None:
        if start == end:
            return
        out = subprocess.run(
            [str(self.binary), "-p", str(self.wal_dir), "-s", start, "-e", end, "--stats=record"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        cost.wal_records = 0  # counted here instead of pg_stat_wal's lagging counter
        for line in out.splitlines():
            m = _STAT_LINE.match(line.strip())
            if not m or m.group(1) == "Total":
                continue
            kind, n, rec, fpi = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
            cost.by_type[kind] = (n, rec, fpi)
            cost.wal_records += n
            cost.record_bytes += rec
            cost.fpi_bytes += fpi
            rmgr, _, op = kind.partition("/")
            op = op.split("+")[0]
            if rmgr == "Heap" and op == "INSERT" or rmgr == "Heap2" and op == "MULTI_INSERT":
                cost.heap_inserts += n
            elif rmgr == "Heap" and op == "UPDATE":
                cost.heap_updates += n
            elif rmgr == "Heap" and op == "HOT_UPDATE":
                cost.hot_updates += n
            elif rmgr == "Heap" and op == "DELETE":
                cost.heap_deletes += n
            elif rmgr in ("Heap", "Heap2") and op in ("LOCK", "LOCK_UPDATED"):
                cost.row_locks += n
            elif rmgr == "Btree" and op.startswith(("INSERT", "SPLIT", "NEWROOT")):
                cost.index_entries += n
            elif rmgr == "Transaction" and op == "COMMIT":
                cost.commit_records += n


def flush_stats(db: Database) -> None:
    """Make this backend publish its pending statistics at the end of its next transaction."""
    db.run("SELECT pg_stat_force_next_flush()")
    db.run("SELECT 1")
