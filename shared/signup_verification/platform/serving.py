"""The server every function runs under (functions-framework's gunicorn), as this service needs it.

gunicorn (25.1 and later) opens a control socket in every master for its `gunicornc` tool, at one
path per user by default (`$XDG_RUNTIME_DIR/gunicorn.ctl`, else `~/.gunicorn/gunicorn.ctl`). Where
several functions run on one machine (`verifyctl dev`, the tests) every master binds that same path:
the later ones log `Control server error: [Errno 98] Address already in use`, and the first one to
stop unlinks the socket of the others. On Cloud Run each instance would carry a management
interface nothing uses. So there is none: functions-framework builds its server after importing
functions/main.py and reads no GUNICORN_CMD_ARGS, so main.py calls `without_control_socket()` and
the setting's default is off for the server built next.
"""

from __future__ import annotations


def without_control_socket() -> None:
    """Turn gunicorn's control socket off for every server this process builds from now on."""
    try:
        from gunicorn.config import ControlSocketDisable
    except ImportError:  # no gunicorn here, or one without a control socket (before 25.1)
        return
    ControlSocketDisable.default = True
