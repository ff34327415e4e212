"""SIGTERM -> a process-wide `threading.Event` the dispatch loop watches (graceful shutdown).

Cloud Run sends SIGTERM and allows a short grace period before SIGKILL. Python runs signal
handlers only in the main thread, while functions-framework serves a request in a worker thread,
so the handler just sets an event. Two hosts are covered: a plain process (the Flask debug
server, `verifyctl dispatch`), where a chained handler is installed at import of main.py, and
gunicorn (functions-framework's server), whose worker installs its own SIGTERM handler after
our import: there the worker's handle_exit is wrapped to set the event too.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

STOP = threading.Event()
_installed = False


_before_exit: list[Any] = []


def before_exit(callback: Any) -> None:
    """Run `callback` before the grace timer ends the process: os._exit skips atexit, and log
    records a deferred handler still holds (platform/log_handoff.py) would be lost with it."""
    _before_exit.append(callback)


def _exit(code: int) -> None:
    for callback in list(_before_exit):
        try:
            callback()
        except Exception:  # nosec B110 - the process is ending; one failing callback must not keep it alive
            pass
    for stream in (sys.stdout, sys.stderr):  # log lines still in Python's buffers (stdout is a pipe)
        try:
            stream.flush()
        except Exception:  # nosec B110 - a closed stream: nothing left to save
            pass
    os._exit(code)


def _chain(previous: Any, exit_after: float | None):
    armed = threading.Event()

    def handler(signum, frame):
        STOP.set()
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL and exit_after is not None and not armed.is_set():
            # The default action would end the process now; end it after the grace period instead.
            armed.set()
            timer = threading.Timer(exit_after, _exit, args=(128 + signum,))
            timer.daemon = True
            timer.start()

    return handler


def install(exit_after: float | None = None) -> None:
    """Idempotent; safe to call from any thread (does only what that thread may do).

    exit_after: where SIGTERM would otherwise kill the process at once (no handler of its own),
    exit this many seconds after it instead (None: never; the caller ends the process itself)."""
    global _installed
    if _installed:
        return
    _installed = True
    if threading.current_thread() is threading.main_thread():
        try:
            signal.signal(signal.SIGTERM, _chain(signal.getsignal(signal.SIGTERM), exit_after))
        except ValueError:  # not the main interpreter
            pass
    _wrap_gunicorn()


def _wrap_gunicorn() -> None:
    try:
        from gunicorn.workers.base import Worker
    except ImportError:
        return
    classes = [Worker]
    try:
        from gunicorn.workers.gthread import ThreadWorker

        classes.append(ThreadWorker)
    except ImportError:
        pass
    for cls in classes:
        original = cls.__dict__.get("handle_exit")
        if original is None or getattr(original, "_sets_stop", False):
            continue

        def handle_exit(self, sig, frame, _original=original):
            STOP.set()
            return _original(self, sig, frame)

        handle_exit._sets_stop = True  # type: ignore[attr-defined]
        cls.handle_exit = handle_exit
