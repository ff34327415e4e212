"""The reconcile target's edge: `POST` (Cloud Scheduler) runs one bounded sweep through the outbox
transitions (operations/reconciler/); it never sends. Answers {moves, overdue, drained, duties,
watermark, elapsed_ms}, or {skipped} when a run is in progress."""

from __future__ import annotations

import flask

from ..operations.reconciler import runner
from ..platform.config import Target
from .http import Response, endpoint, json_response, require_method
from .services import Services, accept


@endpoint
def handle(request: flask.Request, services: Services) -> Response:
    require_method(accept(request, services, Target.RECONCILE), "POST")
    config = services.config
    report = runner.reconcile(services.db, config.reconciler, signals_config=config.signals)
    return json_response(report.as_json())
