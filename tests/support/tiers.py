"""The test tiers' rules, checked on every run (registered by the root conftest.py):

- tests/unit: nothing outside this Python process. No database (a unit test that asks for one fails
  at collection) and no child process (starting one fails the test). Loopback stand-ins served by
  threads of this process (the providers' fakes, the mailbox) are in-process and allowed.
- tests/integration: the real PostgreSQL, and commands that run to completion (verifyctl, a fresh
  interpreter, npm, node). Nothing it starts lives on: a child process still running when a test's
  set-up or body ends fails the test.
- tests/system: processes that live (functions-framework under gunicorn, `verifyctl dev`, an embedded
  PostgreSQL of its own), the browser, the chaos and bench runs, the bundle, infra and deploy.

The checks are cheap: a fixture-name lookup at collection, a patched Popen in the unit tier, and
this process's /proc children list after each set-up and body in the integration tier."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from support.paths import ROOT

UNIT, INTEGRATION = ROOT / "tests" / "unit", ROOT / "tests" / "integration"


def _tier(item: pytest.Item) -> Path | None:
    path = Path(item.path)
    return next((tier for tier in (UNIT, INTEGRATION) if path.is_relative_to(tier)), None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wrong = [item.nodeid for item in items if _tier(item) == UNIT and "pg_server" in getattr(item, "fixturenames", ())]
    if wrong:
        raise pytest.UsageError(
            "tests/unit needs no database, but these ask for one (move them to tests/integration):\n  "
            + "\n  ".join(wrong)
        )


class _NoProcess(subprocess.Popen):
    def __init__(self, args, *_, **__):
        raise AssertionError(
            f"a unit test starts no process (it started {args!r}): move it to tests/integration (support/tiers.py)"
        )


@pytest.fixture(autouse=True)
def _tier_rules(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    if _tier(request.node) == UNIT:
        monkeypatch.setattr(subprocess, "Popen", _NoProcess)
        monkeypatch.setattr(os, "fork", _no_fork)
    yield


def _no_fork() -> int:
    raise AssertionError("a unit test starts no process (it forked): move it to tests/integration (support/tiers.py)")


def _children() -> set[int]:
    """This process's live children (any thread's), from /proc: no scan of the whole process table."""
    found: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            found |= {int(pid) for pid in (task / "children").read_text().split()}
        except (OSError, ValueError):
            continue
    live = set()
    for pid in found:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] != "Z":  # an exited child not yet reaped has ended
            live.add(pid)
    return live


def _left_running(item: pytest.Item, phase: str) -> None:
    before = item.stash.get(_BEFORE, set())
    left = _children() - before
    if left:
        commands = {pid: _command(pid) for pid in sorted(left)}
        shown = "\n  ".join(f"{pid}: {command[:160]}" for pid, command in commands.items())
        raise AssertionError(
            f"an integration test's processes run to completion, but after its {phase} these still run "
            f"(a server belongs in tests/system; support/tiers.py):\n  {shown}"
        )


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"


_BEFORE = pytest.StashKey[set]()
_HAS_CHILDREN_FILE = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    checked = _HAS_CHILDREN_FILE and _tier(item) == INTEGRATION
    if checked:
        item.stash[_BEFORE] = _children()
    result = yield
    if checked:
        _left_running(item, "set-up")
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    result = yield
    if _HAS_CHILDREN_FILE and _tier(item) == INTEGRATION:
        _left_running(item, "body")
    return result
