"""What the composition root hands every HTTP target: functions/main.py calls each target's edge
module as `handle(request, services)`, with the instance's Runtime as `services`.

The edge needs the instance's database connection, its keyring and channel adapters (built once,
on first use) and the configs of its own concern. `Services` names exactly that, as a protocol the
Runtime satisfies, so the edge depends on no layer above it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import flask

from ..platform.config import Target
from . import auth
from .http import Incoming, read_request

if TYPE_CHECKING:
    from ..delivery.channels.base import Channel
    from ..operations.config import DispatchConfig, ReconcilerConfig, SignalsConfig
    from ..platform.database import Database
    from ..verifications.config import ConfirmConfig, CreateConfig
    from ..verifications.tokens import Keyring
    from .config import AuthConfig, DeliveryReportsConfig, HttpConfig, ReturnUrlConfig


class EdgeConfig(Protocol):
    """The configuration the targets read (the composition root's Config has these and more)."""

    @property
    def deployment(self) -> str: ...
    @property
    def http(self) -> HttpConfig: ...
    @property
    def auth(self) -> AuthConfig: ...
    @property
    def create(self) -> CreateConfig: ...
    @property
    def confirm(self) -> ConfirmConfig: ...
    @property
    def return_url(self) -> ReturnUrlConfig: ...
    @property
    def reports(self) -> DeliveryReportsConfig: ...
    @property
    def dispatch(self) -> DispatchConfig: ...
    @property
    def reconciler(self) -> ReconcilerConfig: ...
    @property
    def signals(self) -> SignalsConfig: ...


class Services(Protocol):
    @property
    def config(self) -> EdgeConfig: ...
    @property
    def db(self) -> Database: ...
    @property
    def keyring(self) -> Keyring: ...
    @property
    def channels(self) -> Mapping[str, Channel]: ...
    def close_channels(self) -> None: ...


def accept(request: flask.Request, services: Services, target: Target) -> Incoming:
    """The request read once (its body within the limit), its caller checked: in production every
    target but confirm needs a platform identity or a signed request (docs/security.md)."""
    incoming = read_request(request, services.config.http.max_body_bytes)
    auth.authorize(services.config.auth, target, incoming, auth.first_use(services.db))
    return incoming
