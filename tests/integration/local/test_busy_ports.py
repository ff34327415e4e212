"""A busy port is one line, naming the port, what wanted it and the options that move it, also when
another program takes the port between `verifyctl dev`'s check and the bind (werkzeug's and
aiosmtpd's own bind failures would print their lines, or exit)."""

from __future__ import annotations

import socket

import pytest

from signup_verification.local import ports
from signup_verification.local.demo_site import DemoSiteServer
from signup_verification.local.mailbox import MailboxServer


@pytest.fixture
def taken():
    """A port some other program listens on."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield busy.getsockname()[1]


def _free() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _one_line(error: BaseException, port: int, what: str) -> None:
    text = str(error)
    assert "\n" not in text and f"port {port} ({what}) is in use" in text
    for option in ("--base-port", "--smtp-port", "--mailbox-port", "--site-port"):
        assert option in text


def test_the_mailbox_smtp_port_taken_meanwhile(taken, capsys):
    with pytest.raises(ports.PortInUse) as found:
        MailboxServer("127.0.0.1", taken, _free()).start()
    _one_line(found.value, taken, "mailbox SMTP")
    assert capsys.readouterr().err == ""


def test_the_mailbox_web_port_taken_meanwhile(taken, capsys):
    with pytest.raises(ports.PortInUse) as found:
        MailboxServer("127.0.0.1", _free(), taken).start()
    _one_line(found.value, taken, "mailbox web")
    assert capsys.readouterr().err == ""  # not werkzeug's two lines and its exit


def test_the_demo_site_port_taken_meanwhile(taken, capsys):
    import flask

    with pytest.raises(ports.PortInUse) as found:
        DemoSiteServer("127.0.0.1", taken, flask.Flask("x"))
    _one_line(found.value, taken, "demo site")
    assert capsys.readouterr().err == ""


def test_a_listener_is_ours_only_when_the_process_holds_it(taken):
    import os

    assert ports.listens(os.getpid(), taken) is True  # this test process holds `taken`
    assert ports.listens(os.getpid(), _free()) is False
    assert ports.listens(1, taken) in (False, None)  # another process: not ours (None where /proc cannot tell)
