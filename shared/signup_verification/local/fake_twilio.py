"""The local mailbox's fake Twilio Messages and Calls APIs (`verifyctl dev`): `POST .../Messages.json`
(form fields To, From, Body, StatusCallback; 201 with a JSON message resource; a `whatsapp:` To
with ContentSid and ContentVariables is a WhatsApp template message, rendered from the approved
templates this fake knows, `content_sids`), `POST .../Calls.json` (To, From, Twiml: the mailbox
keeps what its <Say> speaks), `GET .../Messages/<sid>.json`
and the list APIs `GET .../Messages.json?To=&From=` and `GET .../Calls.json?To=&From=` (newest first,
as the reconciler's lookup of an ambiguous SMS, WhatsApp message or call asks them), keeping every
message and call in the mailbox. Twilio's documented test
numbers answer their documented errors, as Twilio does for its test credentials (MAGIC_NUMBERS for
`To`, MAGIC_SENDERS for `From`); accepted messages get status callbacks (provider_reports.py). The
sandbox's numbers (sandbox.py): SMS_SERVER_ERRORS answer 500 after creating the message, or without
creating it (the ambiguous send the next reconcile settles by looking it up), SMS_SLOW answers late.
"""

from __future__ import annotations

import json
import re
import time
import uuid
import xml.etree.ElementTree as ET  # nosec B405: parses the TwiML our own dispatcher sent
from collections.abc import Callable
from email.utils import format_datetime
from typing import Any

import flask

from ..delivery import templates
from . import sandbox
from .mailstore import Mailbox, Message, sms_segments

_E164 = re.compile(r"^\+[1-9]\d{6,14}$")
# Twilio's test credentials answer these `To` numbers with these errors (twilio.com/docs/iam/test-credentials);
# create accepts exactly these when the sender is Twilio's test sender (abuse.TWILIO_TEST_RECIPIENTS).
MAGIC_NUMBERS = {
    "+15005550001": (21211, "The 'To' number +15005550001 is not a valid phone number."),
    "+15005550002": (21612, "The 'To' phone number is not currently reachable via SMS."),
    "+15005550003": (
        21408,
        "Permission to send an SMS has not been enabled for the region indicated by the 'To' number.",
    ),
    "+15005550004": (21610, "Attempt to send to unsubscribed recipient"),
    "+15005550009": (21614, "'To' number is not a valid mobile number"),
}
# ...and these `From` numbers (+15005550006, verifications/config.py's TWILIO_TEST_SENDER, passes; any other is 21606 there).
MAGIC_SENDERS = {
    "+15005550001": (21212, "The 'From' number +15005550001 is not a valid phone number."),
    "+15005550007": (21606, "The 'From' phone number provided is not a valid message-capable Twilio phone number."),
    "+15005550008": (21611, "This 'From' number has exceeded the maximum number of queued messages."),
}


def content_sids() -> dict[str, str]:
    """The approved WhatsApp authentication templates this fake knows: a content SID per language of
    the signup templates (`verifyctl dev` passes them as TWILIO_WHATSAPP_CONTENT_SIDS)."""
    version = templates.current_version("signup")
    return {locale: "HX" + uuid.uuid5(uuid.NAMESPACE_URL, locale).hex for locale in templates.locales(version)}


def content_sids_setting() -> str:
    return ",".join(f"{locale}:{sid}" for locale, sid in content_sids().items())


def _whatsapp_text(sid: str, variables: str) -> str | None:
    """The template's text as Meta renders it with its one variable, or None (unknown SID or variables)."""
    locale = {v: k for k, v in content_sids().items()}.get(sid)
    try:
        values = json.loads(variables or "{}")
    except ValueError:
        return None
    if locale is None or not isinstance(values, dict) or set(values) != {"1"}:
        return None
    return templates.render(templates.current_version("signup"), locale, "whatsapp", code=str(values["1"])).strip()


def _spoken(twiml: str) -> str | None:
    """What a call's TwiML says (its <Say> texts), or None when it is not TwiML."""
    try:
        root = ET.fromstring(twiml.encode())  # nosec B314: our dispatcher's TwiML, on the laptop
    except ET.ParseError:
        return None
    if root.tag != "Response":
        return None
    return " ".join((say.text or "").strip() for say in root.iter("Say")).strip()


CALL_OVER = frozenset({"ended", "completed", "busy", "no-answer", "failed", "canceled"})  # the mailbox's states


def register(
    app: flask.Flask,
    mailbox: Mailbox,
    account_sid: str | None,
    auth_token: str | None,
    on_accepted: Callable[[Message], None] | None = None,
) -> None:
    """The Twilio routes on the mailbox's app; `on_accepted` hears of each message created."""

    def twilio_error(status: int, code: int, message: str) -> tuple[flask.Response, int]:
        return flask.jsonify(
            {
                "code": code,
                "message": message,
                "status": status,
                "more_info": f"https://www.twilio.com/docs/errors/{code}",
            }
        ), status

    def authorised(requested_sid: str) -> bool:
        auth = flask.request.authorization
        if account_sid is None:
            return True
        return auth is not None and auth.username == account_sid == requested_sid and auth.password == auth_token

    def accepted(message: Message) -> Message:
        if on_accepted is not None:
            on_accepted(message)
        return message

    @app.post("/2010-04-01/Accounts/<requested_sid>/Calls.json")
    def twilio_call(requested_sid: str):
        if not authorised(requested_sid):
            return twilio_error(401, 20003, "Authenticate")
        form = flask.request.form
        to, caller = form.get("To", ""), form.get("From", "")
        if not _E164.match(to):
            return twilio_error(400, 21211, f"Invalid 'To' Phone Number: {to}")
        if not caller:
            return twilio_error(400, 21213, "'From' phone number is required.")
        speech = _spoken(form.get("Twiml", ""))
        if not speech:
            return twilio_error(400, 12100, "Document parse failure")
        call = accepted(mailbox.add_call(to, caller, speech, form.get("StatusCallback") or None))
        return flask.jsonify(call_resource(call, requested_sid)), 201

    @app.post("/2010-04-01/Accounts/<requested_sid>/Calls/<sid>.json")
    def twilio_call_end(requested_sid: str, sid: str):
        """`Status=completed` ends a call in progress (the report path, on a machine's answer); a call
        that is over already answers 21220, as Twilio does."""
        if not authorised(requested_sid):
            return twilio_error(401, 20003, "Authenticate")
        call = next((m for m in mailbox.messages() if m.sid == sid and m.kind == "voice"), None)
        if call is None:
            return twilio_error(404, 20404, f"The requested resource {flask.request.path} was not found")
        if flask.request.form.get("Status") not in ("completed", "canceled"):
            return twilio_error(400, 21200, "Only Status=completed or canceled ends a call here.")
        if call.delivery in CALL_OVER:
            return twilio_error(400, 21220, "Call is not in-progress. Cannot redirect.")
        mailbox.set_delivery(call.id, "ended", "ended through the Calls API: a machine answered")
        return flask.jsonify({**call_resource(call, requested_sid), "status": "completed"})

    @app.post("/2010-04-01/Accounts/<requested_sid>/Messages.json")
    def twilio_create(requested_sid: str):
        if not authorised(requested_sid):
            return twilio_error(401, 20003, "Authenticate")
        form = flask.request.form
        if form.get("To", "").startswith("whatsapp:"):
            return whatsapp_create(requested_sid, form)
        to, sender, body = (
            form.get("To", ""),
            form.get("From") or form.get("MessagingServiceSid", ""),
            form.get("Body", ""),
        )
        if not to:
            return twilio_error(400, 21604, "A 'To' phone number is required.")
        if not sender:
            return twilio_error(400, 21603, "A 'From' phone number is required.")
        if not body:
            return twilio_error(400, 21602, "Message body is required.")
        if len(body) > 1600:
            return twilio_error(400, 21617, "The concatenated message body exceeds the 1600 character limit.")
        if sender in MAGIC_SENDERS:
            return twilio_error(400, *MAGIC_SENDERS[sender])
        if to in MAGIC_NUMBERS:
            return twilio_error(400, *MAGIC_NUMBERS[to])
        if not _E164.match(to):
            return twilio_error(400, 21211, f"The 'To' number {to} is not a valid phone number.")
        if to in sandbox.SMS_SERVER_ERRORS:
            if sandbox.SMS_SERVER_ERRORS[to]:
                accepted(mailbox.add_sms(to, sender, body, form.get("StatusCallback") or None))
            return twilio_error(500, 20500, "Internal Server Error")
        if to in sandbox.SMS_SLOW:
            time.sleep(sandbox.SLOW_SECONDS)  # a slow provider: one request thread of the threaded server
        message = accepted(mailbox.add_sms(to, sender, body, form.get("StatusCallback") or None))
        return flask.jsonify(resource(message, requested_sid)), 201

    def whatsapp_create(requested_sid: str, form: Any):
        to, sender = form["To"].removeprefix("whatsapp:"), form.get("From") or form.get("MessagingServiceSid", "")
        if not _E164.match(to):
            return twilio_error(400, 63024, "Invalid message recipient")
        if not sender:
            return twilio_error(400, 21603, "A 'From' phone number is required.")
        if "ContentSid" not in form:  # a business starts a conversation with an approved template only
            return twilio_error(
                400, 63016, "Failed to send freeform message because you are outside the allowed window."
            )
        text = _whatsapp_text(form["ContentSid"], form.get("ContentVariables", ""))
        if text is None:
            return twilio_error(400, 63027, "Template does not exist for a language and locale")
        message = accepted(mailbox.add_whatsapp(to, sender, text, form.get("StatusCallback") or None))
        return flask.jsonify(resource(message, requested_sid)), 201

    @app.get("/2010-04-01/Accounts/<requested_sid>/Messages.json")
    def twilio_list(requested_sid: str):
        return listing(requested_sid, "messages", ("sms", "whatsapp"), resource)

    @app.get("/2010-04-01/Accounts/<requested_sid>/Calls.json")
    def twilio_call_list(requested_sid: str):
        return listing(requested_sid, "calls", ("voice",), call_resource)

    def listing(requested_sid: str, key: str, kinds: tuple[str, ...], shown: Callable[[Message, str], dict]):
        """A list API filtered by `To` and `From` as Twilio writes them (`whatsapp:+...` for WhatsApp),
        newest first, one page of 50."""
        if not authorised(requested_sid):
            return twilio_error(401, 20003, "Authenticate")
        to, sender = flask.request.args.get("To"), flask.request.args.get("From")
        found = [
            item
            for item in (shown(m, requested_sid) for m in mailbox.messages() if m.kind in kinds)
            if (to is None or item["to"] == to) and (sender is None or item["from"] == sender)
        ][:50]
        uri = f"/2010-04-01/Accounts/{requested_sid}/{key.capitalize()}.json"
        return flask.jsonify({key: found, "page": 0, "page_size": len(found), "uri": uri, "next_page_uri": None})

    @app.get("/2010-04-01/Accounts/<requested_sid>/Messages/<sid>.json")
    def twilio_fetch(requested_sid: str, sid: str):
        if not authorised(requested_sid):
            return twilio_error(401, 20003, "Authenticate")
        message = next((m for m in mailbox.messages() if m.sid == sid), None)
        if message is None:
            return twilio_error(404, 20404, f"The requested resource {flask.request.path} was not found")
        return flask.jsonify(resource(message, requested_sid))


def call_resource(call: Message, account_sid: str) -> dict[str, Any]:
    created = format_datetime(call.received_at, usegmt=True)
    uri = f"/2010-04-01/Accounts/{account_sid}/Calls/{call.sid}"
    return {
        "sid": call.sid,
        "account_sid": account_sid,
        "api_version": "2010-04-01",
        "to": call.recipients[0],
        "from": call.sender,
        "status": "queued",
        "direction": "outbound-api",
        "answered_by": None,
        "date_created": created,
        "date_updated": created,
        "start_time": None,
        "end_time": None,
        "duration": None,
        "price": None,
        "price_unit": "USD",
        "uri": f"{uri}.json",
    }


def resource(message: Message, account_sid: str) -> dict[str, Any]:
    created = format_datetime(message.received_at, usegmt=True)
    return {
        "sid": message.sid,
        "account_sid": account_sid,
        "api_version": "2010-04-01",
        "to": ("whatsapp:" if message.kind == "whatsapp" else "") + message.recipients[0],
        "from": message.sender,
        "body": message.text,
        "status": "queued",
        "direction": "outbound-api",
        "num_segments": str(sms_segments(message.text)),
        "num_media": "0",
        "price": None,
        "price_unit": "USD",
        "error_code": None,
        "error_message": None,
        "date_created": created,
        "date_updated": created,
        "date_sent": None,
        "messaging_service_sid": None,
        "uri": f"/2010-04-01/Accounts/{account_sid}/Messages/{message.sid}.json",
    }
