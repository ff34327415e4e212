"""The benchmark scripts keep working: bench/run.py --quick (tiny sizes) on a private embedded server,
writing its sections to a scratch copy of docs/benchmarks.md. The figures come from full runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = (
    "throughput-bench",
    "dispatch-bench",
    "spike-bench",
    "create-bench",
    "capacity-bench",
    "history-bench",
    "latency-bench",
    "memory-bench",
    "cost-bench",
    "coldstart-bench",
    "webhook-bench",
)


@pytest.mark.slow
def test_bench_runner_quick_writes_every_section(tmp_path):
    pytest.importorskip("pgqueuer", reason="bench extras absent: pip install -e '.[test,bench]'")
    pytest.importorskip("pyinstrument", reason="bench extras absent: pip install -e '.[test,bench]'")
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n")
    env = {**os.environ, "BENCH_DOC": str(doc), "BENCH_PG_DIR": str(tmp_path / "pg")}
    env.pop("BENCH_DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--quick"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    text = doc.read_text()
    for name in SECTIONS:
        assert f"<!-- {name}:start -->" in text and f"<!-- {name}:end -->" in text, name
    assert "pgqueuer defaults" in text and "raw SQL" in text
    assert "**1.00**" in text  # round trips per create, counted in the server
    assert "| read | 8 per instance, pool of 2 |" in text  # per connection and per vCPU, three shapes side by side
    assert "Load average (1 min) while measuring" in text  # every section records the load
    assert "whole verification" in text and "pgqueuer job" in text  # the cost bench, side by side
    assert "OVERRUN" not in text and "| nan" not in text and "error:" not in text
    assert "invocation ÷ client" in text  # one invocation with the defaults beside a plain 64-thread client
    assert "| links expired unsent (target 0) | **0** |" in text  # the spike, through the local emulation
    assert "| duplicates: messages the fake took twice (target 0) | **0** |" in text
