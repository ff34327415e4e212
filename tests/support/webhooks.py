"""Webhook test set-up: a database session with events on (the `edb` fixture), a config that sends them
to a local receiver, the reads the tests assert on, and the events' JSON Schemas from docs/openapi.yaml."""

from __future__ import annotations

import dataclasses
import functools
import uuid
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from signup_verification.delivery.webhook_config import WebhookConfig
from signup_verification.platform.database import ConnectionParams, Database
from support.dispatch import KEYRING, provider_settings
from support.paths import ROOT

OPENAPI = ROOT / "docs" / "openapi.yaml"


def events_database(url: str, max_attempts: int = 12, event_types: tuple[str, ...] | None = None) -> Database:
    """What Runtime builds when WEBHOOK_URL is set: the session setting rides in the start-up packet.
    `event_types`: WEBHOOK_EVENTS (the default types unless given)."""
    config = WebhookConfig(url="http://receiver.invalid/", max_attempts=max_attempts)
    if event_types is not None:
        config = dataclasses.replace(config, events=event_types)
    return Database(ConnectionParams.from_url(url), session_settings=config.session_settings())


@pytest.fixture
def edb(request: pytest.FixtureRequest, database_url: str):
    """The test's database in a session with webhook events on (events_database); a module's or a
    test's `@pytest.mark.webhook_events(max_attempts=..., event_types=...)` chooses its settings."""
    marker = request.node.get_closest_marker("webhook_events")
    database = events_database(database_url, **(marker.kwargs if marker else {}))
    yield database
    database.close()


# For the tests of the channel itself: one event per confirmation (a confirmation also records
# `verification.proved` by default, which the verification's own tests count).
VERIFIED_ONLY = ("verification.verified",)


def webhook_settings(receiver, **overrides):
    return provider_settings(webhook_url=receiver.endpoint, webhook_secret=",".join(receiver.secrets), **overrides)


def events(db: Database, verification_id: uuid.UUID | None = None) -> list[dict]:
    sql = (
        "SELECT id, verification_id, event_type, event_subject, status, attempts, payload, last_error"
        " FROM delivery_intents"
        " WHERE role = 'event'" + (" AND verification_id = :v" if verification_id else "") + " ORDER BY id"
    )
    return db.rows(sql, **({"v": verification_id} if verification_id else {}))


def link_token(db: Database, verification_id: uuid.UUID) -> str:
    row = db.one("SELECT key_id, token_nonce FROM verifications WHERE id = :id", id=verification_id)
    assert row is not None, f"no verification {verification_id}"
    return KEYRING.get(row["key_id"]).link(verification_id, bytes(row["token_nonce"]))


def sms_code(db: Database, verification_id: uuid.UUID) -> str:
    row = db.one("SELECT key_id, token_nonce FROM verifications WHERE id = :id", id=verification_id)
    assert row is not None, f"no verification {verification_id}"
    return KEYRING.get(row["key_id"]).sms_code(verification_id, bytes(row["token_nonce"]), 6)


# -- the events' contract ---------------------------------------------------------------------------
@functools.cache
def event_validators() -> dict[str, Draft202012Validator]:
    """{event type: a JSON Schema 2020-12 validator of its whole body}, from docs/openapi.yaml's
    `webhooks` section (each entry's request body). `format` is checked (date-time, uuid): the
    document's `#/components/...` references resolve because the components ride in each root."""
    document = yaml.safe_load(OPENAPI.read_text())
    validators = {}
    for event_type, item in document["webhooks"].items():
        body = item["post"]["requestBody"]["content"]["application/json"]["schema"]
        root = {"$schema": "https://json-schema.org/draft/2020-12/schema", **body, "components": document["components"]}
        Draft202012Validator.check_schema(root)
        validators[event_type] = Draft202012Validator(root, format_checker=Draft202012Validator.FORMAT_CHECKER)
    return validators


def event_violations(body: Any) -> list[str]:
    """What is wrong with one event body against its type's schema ([] when it conforms)."""
    validators = event_validators()
    event_type = body.get("type") if isinstance(body, dict) else None
    if event_type not in validators:
        return [f"no schema in docs/openapi.yaml's webhooks for type {event_type!r}"]
    errors = sorted(validators[event_type].iter_errors(body), key=lambda e: list(e.absolute_path))
    return [f"{e.json_path}: {e.message}" for e in errors]
