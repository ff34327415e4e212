"""The create benchmark's function source: the real `create_verification` target and a trivial
endpoint on the same functions-framework (gunicorn) server, plus a round-trip counter. It is served
under the target's own name, since the service refuses to start as any target it does not have.

    POST /         -> functions/main.py create_verification (unchanged)
    GET  /ping     -> {"ok": true}, no database (the trivial endpoint the create path is compared with)
    GET  /commit   -> one INSERT committed on the function's own pool (one round trip and a durable
                      commit, the floor under any create that keeps what it answered)
    GET  /trips    -> {"round_trips": n}: pg8000 socket flushes since start (each is one round trip)
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "functions"), str(ROOT / "shared")]

import flask  # noqa: E402
import pg8000.core  # noqa: E402

import main  # noqa: E402  (functions/main.py)

_lock = threading.Lock()
_trips = {"n": 0}
_flush = pg8000.core._flush


def _counting_flush(sock):
    with _lock:
        _trips["n"] += 1
    return _flush(sock)


pg8000.core._flush = _counting_flush


_create = main.create_verification


def create_verification(request: flask.Request):
    if request.path == "/ping":
        return flask.jsonify(ok=True)
    if request.path == "/commit":
        main.get_runtime().db.run("INSERT INTO bench_commit_floor DEFAULT VALUES")
        return flask.jsonify(ok=True)
    if request.path == "/trips":
        return flask.jsonify(round_trips=_trips["n"])
    return _create(request)
