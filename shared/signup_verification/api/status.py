"""The status target's edge: `GET` answers the operator signals per channel, the heartbeats and the
alerts they would raise (operations/signals.py), never cached."""

from __future__ import annotations

import flask

from ..operations import signals
from ..platform.config import Target
from .http import Response, endpoint, json_response, require_method
from .services import Services, accept


@endpoint
def handle(request: flask.Request, services: Services) -> Response:
    require_method(accept(request, services, Target.STATUS), "GET", "HEAD")
    config = services.config
    snapshot = signals.compute(services.db, config.deployment, config.signals, with_workers=True)
    return json_response(snapshot.as_json(), headers={"Cache-Control": "no-store"})
