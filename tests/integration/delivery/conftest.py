"""Fixtures of every delivery test: the providers' local stand-ins, speaking their real protocols."""

from __future__ import annotations

import pytest

from support.fakes.smtp import FakeSmtpServer
from support.fakes.twilio import FakeTwilio


@pytest.fixture
def smtp():
    with FakeSmtpServer() as fake:
        yield fake


@pytest.fixture
def twilio():
    with FakeTwilio() as fake:
        yield fake
