"""The providers' own OpenAPI specifications, cut down to the operations we call, and the wire
exchanges the fakes capture as openapi-core sees them (tests/unit/test_provider_contracts.py, and the
integration tests that check what the dispatcher really sends).

The specs live in the team's reference folder beside the repository (../shared/specs, see its
README). Absent, a test that needs one skips with the reason, except under CI=true, where it fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from openapi_core import OpenAPI
from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest, WerkzeugOpenAPIResponse
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Response

from support.fakes.http import Exchange

TWILIO_MESSAGES = "/2010-04-01/Accounts/{AccountSid}/Messages.json"
TWILIO_CALLS = "/2010-04-01/Accounts/{AccountSid}/Calls.json"


def _repo_root() -> Path:
    here = Path(__file__).resolve().parent
    return next(p for p in (here, *here.parents) if (p / "pyproject.toml").is_file())


SPECS = _repo_root().parent / "shared" / "specs"


def spec_file(name: str) -> Path:
    path = SPECS / name
    if not path.is_file():
        reason = f"provider spec {path} is absent (the team's shared/specs beside the repository)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}: CI must run the contract tests")
        pytest.skip(reason)
    return path


def operation_spec(spec: dict, path: str, method: str) -> dict:
    """The one operation with every component it references (transitively), as a small spec."""
    components: dict[str, dict] = {}

    def walk(node) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/components/"):
                _, _, kind, name = ref.split("/", 3)
                if name not in components.setdefault(kind, {}):
                    components[kind][name] = spec["components"][kind][name]
                    walk(components[kind][name])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    item = spec["paths"][path]
    operation = {key: value for key, value in item.items() if key in (method, "parameters", "servers")}
    walk(operation)
    components["securitySchemes"] = spec["components"].get("securitySchemes", {})
    return {
        "openapi": spec["openapi"],
        "info": spec["info"],
        "servers": spec.get("servers", []),
        "security": spec.get("security", []),
        "paths": {path: operation},
        "components": components,
    }


class Contract(OpenAPI):
    """openapi-core's validator with the (cut-down) spec document it was built from."""

    @classmethod
    def of(cls, document: dict) -> Contract:
        contract = cls.from_dict(document)
        contract.document = document
        return contract

    def server(self, path: str) -> str:
        return (self.document["paths"][path].get("servers") or self.document["servers"])[0]["url"]

    def statuses(self, path: str, method: str = "post") -> set[int]:
        return {int(s) for s in self.document["paths"][path][method]["responses"] if s.isdigit()}


def twilio_contract(path: str, method: str = "post") -> Contract:
    """Twilio's API v2010 spec cut down to one operation of TWILIO_MESSAGES or TWILIO_CALLS: create
    (post), or the list the reconciler's lookup asks (get)."""
    spec = json.loads(spec_file("twilio_api_v2010.json").read_text(encoding="utf-8"))
    return Contract.of(operation_spec(spec, path, method))


# -- the wire exchange as openapi-core sees it ---------------------------------------------------------
def as_request(exchange: Exchange, server: str, fake_prefix: str = "") -> WerkzeugOpenAPIRequest:
    """The captured request addressed as the real API's (the fake listens on loopback)."""
    base = urlsplit(server)
    path = base.path.rstrip("/") + exchange.path[len(fake_prefix) :]
    headers = {k: v for k, v in exchange.headers.items() if k.lower() not in ("host", "content-length", "content-type")}
    builder = EnvironBuilder(
        method=exchange.method,
        base_url=f"{base.scheme}://{base.netloc}",
        path=path,
        headers=headers,
        data=exchange.body,
        content_type=exchange.headers.get("Content-Type"),
    )
    return WerkzeugOpenAPIRequest(builder.get_request())


def as_response(exchange: Exchange) -> WerkzeugOpenAPIResponse:
    return WerkzeugOpenAPIResponse(Response(exchange.response_body, exchange.status, exchange.response_headers))
