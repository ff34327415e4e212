"""Fixtures shared by tests/ and functions/main_test.py (registered by the root conftest.py).

A real PostgreSQL, never a mock: the embedded server (or TEST_DATABASE_URL), one template database
migrated per run of the migrations' content, cloned per test with CREATE DATABASE ... TEMPLATE
(pgqueuer's and procrastinate's set-up). fsync is off on the embedded test server only.
"""

from __future__ import annotations

import functools
import os
import queue
import threading
import uuid
from pathlib import Path

import pytest

from signup_verification import runtime
from signup_verification.local import embedded
from signup_verification.platform import logs as service_logging
from signup_verification.platform import migration_files, migrations
from signup_verification.platform.database import ConnectionParams, Database
from support.dev_process import descendants, kill, process_table, stop_servers_under
from support.logs import log_lines  # noqa: F401  (a fixture, registered with the others)
from support.paths import ROOT, TEST_TOKEN_KEYS
from support.typescript_client import typescript_client_built, typescript_client_tarball  # noqa: F401  (likewise)
from support.webhooks import edb  # noqa: F401  (likewise)


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", help="also run tests marked slow")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject.toml's addopts): two worker processes for a run of whole folders of the fast
    tiers (the fast signal, `pytest tests/unit tests/integration`), whose tests mostly wait on the
    database, loopback servers and short commands; none (this process alone) for a run that reaches
    tests/system (the full suite: its servers, browser, chaos and benchmarks want the cores to
    themselves) and for named files or tests, where starting workers costs more than it saves.
    PYTEST_XDIST_AUTO_NUM_WORKERS, or `-n N` on the command line, chooses otherwise."""
    chosen = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if chosen:
        return int(chosen)
    fast = (ROOT / "tests" / "unit", ROOT / "tests" / "integration")
    paths = [Path(arg.split("::")[0]).resolve() for arg in config.args]
    whole_fast_folders = all(path.is_dir() and any(path.is_relative_to(tier) for tier in fast) for path in paths)
    return 2 if paths and whole_fast_folders else 0


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow") or os.environ.get("RUN_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow (python3 dev.py test does)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _every_server_stopped(tmp_path_factory: pytest.TempPathFactory):
    """The suite stops every server it starts: at the session's end, a process still running that a
    test started (a child of this process, or a server whose command line names a test's temporary
    folder, as an embedded PostgreSQL's data directory does) fails the run, and is stopped. The
    test database (.local/test-pg) is left running on purpose and is neither."""
    yield
    left = {pid: process_table().get(pid, (0, "?"))[1] for pid in descendants(os.getpid())}
    left |= stop_servers_under(tmp_path_factory.getbasetemp())
    kill(descendants(os.getpid()))
    if left:
        shown = "\n".join(f"  {pid}: {cmd[:200]}" for pid, cmd in sorted(left.items()))
        pytest.fail(f"servers the tests started were still running at the session's end (now stopped):\n{shown}")


@pytest.fixture(scope="session")
def pg_server() -> ConnectionParams:
    url = os.environ.get("TEST_DATABASE_URL")
    if url:
        return ConnectionParams.from_url(url)
    # Left running between local runs (concurrent pytest sessions share it, and a restart costs
    # seconds); CI stops it when its single session ends.
    return embedded.start(
        ROOT / ".local" / "test-pg",
        stop_at_exit=os.environ.get("CI") == "true",
        settings={"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"},
    )


def _migrations_digest() -> str:
    """Migrations and definitions: a changed function or view builds a new template too."""
    return migration_files.fingerprint()[:12]


@pytest.fixture(scope="session")
def template_database(pg_server: ConnectionParams) -> str:
    name = f"verify_tmpl_{_migrations_digest()}"
    admin = pg_server.with_database("postgres").connect()
    try:
        admin.run("SELECT pg_advisory_lock(42)")  # xdist workers: one builds, the others wait
        if not admin.run("SELECT 1 FROM pg_database WHERE datname = :n", n=name):
            admin.run(f'CREATE DATABASE "{name}_build"')
            db = Database(pg_server.with_database(f"{name}_build"))
            migrations.migrate(db)
            db.close()
            admin.run(f'ALTER DATABASE "{name}_build" RENAME TO "{name}"')
        admin.run("SELECT pg_advisory_unlock(42)")
    finally:
        admin.close()
    return name


class _ClonePool:
    """Clones the template ahead of the tests that need one, and drops them after, off the tests' path:
    a clone costs ~0.4 s alone but ~75 ms when three are made at once, so a few threads keep a small
    queue of ready databases; a finished test's database is handed back and dropped by another thread."""

    def __init__(self, server: ConnectionParams, template: str, threads: int = 3, ready: int = 4):
        self.server, self.template = server, template
        self.queue: queue.Queue[str] = queue.Queue(maxsize=ready)
        self.finished: queue.Queue[str | None] = queue.Queue()
        self.stopping = threading.Event()
        self.workers = [threading.Thread(target=self._fill, daemon=True) for _ in range(threads)]
        self.dropper = threading.Thread(target=self._drop, daemon=True)
        for worker in [*self.workers, self.dropper]:
            worker.start()

    def _fill(self) -> None:
        admin = self.server.with_database("postgres").connect()
        try:
            while not self.stopping.is_set():
                name = f"t_{uuid.uuid4().hex[:16]}"
                admin.run(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}" STRATEGY FILE_COPY')
                while True:
                    try:
                        self.queue.put(name, timeout=0.2)
                        break
                    except queue.Full:
                        if self.stopping.is_set():
                            admin.run(f'DROP DATABASE IF EXISTS "{name}"')
                            return
        finally:
            admin.close()

    def _drop(self) -> None:
        admin = self.server.with_database("postgres").connect()
        try:
            while (name := self.finished.get()) is not None:
                admin.run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            admin.close()

    def take(self) -> str:
        return self.queue.get(timeout=60)

    def give_back(self, name: str) -> None:
        """The test is done with it: dropped (its sessions ended) by the dropping thread."""
        self.finished.put(name)

    def close(self) -> None:
        self.stopping.set()
        self.finished.put(None)
        for worker in [*self.workers, self.dropper]:
            worker.join(30)
        admin = self.server.with_database("postgres").connect()
        try:
            while not self.queue.empty():
                admin.run(f'DROP DATABASE IF EXISTS "{self.queue.get_nowait()}"')
        finally:
            admin.close()


@pytest.fixture(scope="session")
def clone_pool(pg_server: ConnectionParams, template_database: str):
    pool = _ClonePool(pg_server, template_database)
    yield pool
    pool.close()


@pytest.fixture
def database_url(pg_server: ConnectionParams, clone_pool: _ClonePool) -> str:
    """A fresh database cloned from the migrated template, dropped after the test."""
    name = clone_pool.take()
    try:
        yield pg_server.with_database(name).url()
    finally:
        clone_pool.give_back(name)


@pytest.fixture(scope="module")
def module_database_url(pg_server: ConnectionParams, template_database: str):
    """A copy of the migrated template for a whole module (a long-lived `verifyctl dev` in the
    browser tests), dropped after it."""
    name = f"m_{uuid.uuid4().hex[:12]}"
    admin = pg_server.with_database("postgres").connect()
    admin.run(f'CREATE DATABASE "{name}" TEMPLATE "{template_database}" STRATEGY FILE_COPY')
    try:
        yield pg_server.with_database(name).url()
    finally:
        admin.run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture
def new_database(pg_server: ConnectionParams):
    """Makes new databases with nothing in them (not cloned from the migrated template), each dropped
    after the test: `new_database()` -> a connected Database."""
    admin = pg_server.with_database("postgres").connect()
    made: list[Database] = []

    def make() -> Database:
        name = f"e_{uuid.uuid4().hex[:16]}"
        admin.run(f'CREATE DATABASE "{name}"')
        made.append(Database(pg_server.with_database(name)))
        return made[-1]

    yield make
    for db in made:
        db.close()
        admin.run(f'DROP DATABASE IF EXISTS "{db.params.database}" WITH (FORCE)')
    admin.close()


@pytest.fixture
def empty_url(new_database) -> str:
    """The URL of one new, empty database (dropped after the test)."""
    return new_database().params.url()


@pytest.fixture
def db(database_url: str) -> Database:
    database = Database.from_url(database_url)
    yield database
    database.close()


@pytest.fixture
def service_env(database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Environment of a locally configured service on the per-test database."""
    env = {
        "DATABASE_URL": database_url,
        "TOKEN_KEYS": TEST_TOKEN_KEYS,
        "VERIFY_LOCAL_DIR": str(tmp_path / "local"),
        "DEPLOYMENT": "test",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    runtime.reset()
    yield env
    runtime.reset()


@pytest.fixture
def app_client(service_env):
    """test_client for a functions-framework target: app_client('create_verification')."""
    import functions_framework

    def make(target: str):
        # (create_app exports FUNCTION_TARGET: _function_target_restored puts it back after the test)
        return functions_framework.create_app(target, str(ROOT / "functions" / "main.py")).test_client()

    return make


@pytest.fixture
def configured_app(app_client, service_env, monkeypatch):
    """configured_app(target, **settings): a target's test client with those variables set."""

    def make(target: str, **settings: str):
        for name, value in settings.items():
            monkeypatch.setenv(name, value)
        runtime.reset()
        return app_client(target)

    return make


@pytest.fixture
def create_app(configured_app):
    """create_app(**settings): the create_verification target's test client with those variables set."""
    return functools.partial(configured_app, "create_verification")


@pytest.fixture(autouse=True)
def _function_target_restored():
    """functions_framework.create_app exports FUNCTION_TARGET (app_client, support/served.py, the bundle
    tests): put it back after every test, so a later test's configuration never reads a leaked target
    (verifyctl migrate in production then demanded TOKEN_KEYS, as the create target does)."""

    before = os.environ.get("FUNCTION_TARGET")
    yield
    if before is None:
        os.environ.pop("FUNCTION_TARGET", None)
    else:
        os.environ["FUNCTION_TARGET"] = before


@pytest.fixture(autouse=True)
def _stdout_is_the_tests(request: pytest.FixtureRequest):
    """A test that reads stdout (capsys, capfd) reads what its own code writes: the service's log handler
    an earlier test left on the root logger (an app it loaded configures one, writing to stdout) comes
    off first, as in a fresh verifyctl process. Which test ran before is not fixed: a worker runs
    whichever file it is handed next (pyproject.toml's addopts)."""
    if {"capsys", "capfd"} & set(request.fixturenames):
        service_logging.remove()
    yield
