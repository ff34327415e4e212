"""How every target is served: functions-framework's gunicorn, with limits on a request's head and
a deadline on reading a request.

functions-framework serves a target with gunicorn (`functions-framework --target …`: the web process
Google's buildpack gives the deployed image, and each child of `verifyctl dev`). It builds gunicorn's
configuration in code from its own options only (GunicornApplication is a gunicorn BaseApplication:
neither GUNICORN_CMD_ARGS nor a gunicorn.conf.py is read), with no request-line limit
(`limit_request_line=0`) and no deadline on a request's head: a 2 MB request line was accepted, and
a client sending its headers a byte at a time held a thread for as long as it liked. Its CLI imports
the target's source (functions/main.py) before it builds the server, so main.py calls install():
the server class functions-framework looks up when it builds the server (HTTPServer) is replaced by
one whose gunicorn application adds these settings (platform/gunicorn_worker.py, imported only then,
so nothing here costs a cold start anything):

    request line        at most 8,190 bytes (gunicorn's most)     414 problem+json
    header fields       at most 100, each at most 8,190 bytes     431 problem+json
    the whole head      at most 64 KiB                            431 problem+json
    reading the head    whole within HTTP_READ_TIMEOUT_SECONDS of its first byte   408 problem+json
    reading the body    within HTTP_READ_TIMEOUT_SECONDS again    400 (the body cannot be read)

Every answer is refused before any target code runs, writes nothing, and logs one WARNING record
(`event="request_refused"`) that never holds the request itself.

No control socket either. gunicorn (25.1 and later) opens one in every master for its `gunicornc`
tool, at one path per user by default (`$XDG_RUNTIME_DIR/gunicorn.ctl`, else
`~/.gunicorn/gunicorn.ctl`). Where several functions run on one machine (`verifyctl dev`, the
tests) every master binds that same path: the later ones log `Control server error: [Errno 98]
Address already in use`, and the first one to stop unlinks the socket of the others. On Cloud Run
each instance would carry a management interface nothing uses.
"""

from __future__ import annotations

from typing import Any


def install(read_timeout_seconds: float) -> None:
    """From functions/main.py at import: the server functions-framework builds next gets the limits,
    and no control socket."""
    _without_control_socket()
    try:
        from functions_framework import _http
    except ImportError:  # a functions-framework without its server module: nothing to configure
        return
    if getattr(_http.HTTPServer, "limited", False):
        return

    class LimitedServer(_http.HTTPServer):
        """functions-framework's server choice, with gunicorn's application given the limits."""

        limited = True

        def __init__(self, app: Any, debug: bool, **options: Any) -> None:
            super().__init__(app, debug, **options)
            if getattr(self.server_class, "__name__", "") == "GunicornApplication":
                from . import gunicorn_worker

                self.server_class = gunicorn_worker.limited(self.server_class, read_timeout_seconds)  # type: ignore[assignment]

    _http.HTTPServer = LimitedServer  # type: ignore[misc]


def _without_control_socket() -> None:
    """Turn gunicorn's control socket off for every server this process builds from now on."""
    try:
        from gunicorn.config import ControlSocketDisable
    except ImportError:  # no gunicorn here, or one without a control socket (before 25.1)
        return
    ControlSocketDisable.default = True
