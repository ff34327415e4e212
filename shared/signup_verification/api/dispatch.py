"""The dispatch target's edge: `POST` (Cloud Scheduler) drains eligible intents until none is left
or the time budget is spent (operations/dispatch_run.py), and answers its report: {claimed,
accepted, retryable, failed, ambiguous, suppressed, released, stale_writes, batches, elapsed_ms}."""

from __future__ import annotations

import flask

from ..operations import dispatch_run
from ..platform import shutdown
from .http import Response, endpoint, json_response, require_method
from .services import Services, accept


@endpoint
def handle(request: flask.Request, services: Services) -> Response:
    require_method(accept(request, services, "dispatch"), "POST")
    config = services.config
    report = dispatch_run.run(
        services.db,
        config.dispatch,
        config.retry,
        config.signals,
        services.keyring,
        services.channels,
        stop=shutdown.STOP,
        close_channels=services.close_channels,
    )
    return json_response(report.as_dict())
