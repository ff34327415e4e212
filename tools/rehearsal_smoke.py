"""The documented smoke test (docs/deploy.md, "5. Check it"), through the rehearsal's services, each
called as Cloud Run would pass its caller on: create -> dispatch -> confirm -> status, then the
reconciler; with an SMS beside the email, so that every service does its work (the code confirmed,
Twilio's status callback to delivery_reports), and a WhatsApp and a voice verification, which create
accepts because the plan enables their channels, sent as a WhatsApp template and a call. The
providers are the protocol fakes of tests/support/fakes (SendGrid's mail send, Twilio's Messages and
Calls APIs) at the settings' API URLs.

Who calls: Cloud Run admits a private service's caller by IAM and passes its identity token on
(signature removed) to the in-app check (api/auth.py), which accepts the identities the plan's
ALLOWED_INVOKERS names. Each call carries such a token of the first identity listed there: the
signup site's for create, the scheduler's for dispatch and reconcile, an operator's for status.
"""

from __future__ import annotations

import re
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from rehearsal_plan import Plan  # noqa: E402
from rehearsal_services import ServiceError, Services  # noqa: E402
from signup_verification.api.report_signatures import twilio_signature  # noqa: E402
from support.auth import cloud_run_identity  # noqa: E402
from support.fakes.http import FakeSendGrid  # noqa: E402
from support.fakes.twilio import FakeTwilio  # noqa: E402

EMAIL = "smoke@example.com"  # the docs' smoke test creates for an address of yours
PHONE = "+14155550123"
WHATSAPP = "+14155550124"  # the plan enables WhatsApp and voice (rehearse_deploy.PLAN_VARS)
CALLED = "+14155550125"
_TOKEN = re.compile(r"[?&]token=([A-Za-z0-9_-]+)")
_CODE = re.compile(r"code is ([0-9][0-9 -]*[0-9])")
DELIVERY_WAIT_SECONDS = 60  # generous: CI machines run other work beside it


@dataclass
class Providers:
    sendgrid: FakeSendGrid
    twilio: FakeTwilio

    def stop(self) -> None:
        self.sendgrid.stop()
        self.twilio.stop()


def start_providers(plan: Plan, secrets: dict[str, str]) -> Providers:
    """The fakes, with the credentials the services hold (the stubbed secrets, the planned account SID)."""
    sid = next((s.env["TWILIO_ACCOUNT_SID"] for s in plan.services if s.env.get("TWILIO_ACCOUNT_SID")), "AC" + "0" * 32)
    return Providers(
        FakeSendGrid(api_key=secrets.get("SENDGRID_API_KEY", "SG.unused")).start(),
        FakeTwilio(account_sid=sid, auth_token=secrets.get("TWILIO_AUTH_TOKEN", "unused")).start(),
    )


def provider_settings(providers: Providers) -> dict[str, str]:
    """Where the services reach the providers: the only settings the rehearsal adds to the plan's."""
    return {"SENDGRID_API_URL": providers.sendgrid.send_url, "TWILIO_API_URL": providers.twilio.url}


def caller(plan: Plan, key: str, fallback: str) -> dict[str, str]:
    """The identity header of the first caller the service's ALLOWED_INVOKERS names."""
    allowed = [e for e in plan.service(key).env.get("ALLOWED_INVOKERS", "").split(",") if e]
    return {"Authorization": cloud_run_identity(allowed[0] if allowed else fallback)}


def smoke(plan: Plan, services: Services, providers: Providers, secrets: dict[str, str], log=print) -> dict[str, str]:
    """Every step, in order; the first that fails raises a ServiceError naming its service. Returns the ids."""
    site = caller(plan, "create", "signup-site@example.com")
    scheduler = caller(plan, "dispatch", "scheduler@example.com")
    operator = caller(plan, "status", "operator@example.com")
    run = uuid.uuid4().hex[:8]

    ids = {}
    # WhatsApp and voice: production create offers them only where the plan sets their transport.
    for channel, destination in (("email", EMAIL), ("sms", PHONE), ("whatsapp", WHATSAPP), ("voice", CALLED)):
        _, created = services.call(
            "create",
            "POST",
            "/",
            body={"account_id": f"smoke-{channel}", "channel": channel, "destination": destination},
            headers={**site, "Idempotency-Key": f"smoke-{channel}-{run}"},
            expect=201,
        )
        ids[channel] = created["verification_id"]
    log("create: 201 for an email and an SMS verification")
    log("create: 201 for a WhatsApp and a voice verification")

    first = _dispatch_in_background(services, scheduler)
    email = _delivered(providers.sendgrid, EMAIL, services, "email")
    sms = _delivered(providers.twilio, PHONE, services, "SMS")
    whatsapp = _delivered(providers.twilio, f"whatsapp:{WHATSAPP}", services, "WhatsApp message")
    call = _delivered(providers.twilio, CALLED, services, "call")
    if not re.search(r"[0-9]{6}", whatsapp.body) or "Twiml" not in call.request:
        raise ServiceError(f"{services['dispatch'].container.label()}: the WhatsApp message or the call lacks the code")
    # The relay tick: the waiting invocation hands over to a newer one and answers (outbox/idle.py).
    _dispatch_in_background(services, scheduler)
    first.join(timeout=DELIVERY_WAIT_SECONDS)
    if first.error is not None:
        raise first.error
    if first.is_alive():
        raise ServiceError(
            f"{services['dispatch'].container.label()}: the first invocation did not hand over to the relay"
        )
    log(
        f"dispatch: 200, the email reached SendGrid, the SMS, the WhatsApp message and the call Twilio ({first.answer})"
    )

    link_base = plan.service("dispatch").env.get("VERIFY_LINK_BASE", "")
    token = _TOKEN.search(email.body)
    if token is None or link_base not in email.body:
        raise ServiceError(f"{services['dispatch'].container.label()}: the email has no link under {link_base}")
    services.call("confirm", "GET", f"/?token={token.group(1)}")
    services.call("confirm", "POST", "/", body={"token": token.group(1)})
    code = _CODE.search(sms.body)
    if code is None:
        raise ServiceError(f"{services['dispatch'].container.label()}: the SMS carries no code")
    services.call("confirm", "POST", "/", body={"verification_id": ids["sms"], "code": code.group(1)})
    log("confirm: the link's page, the link, the SMS code")

    _report_sms_delivered(plan, services, providers.twilio, secrets["TWILIO_AUTH_TOKEN"])
    log("delivery_reports: Twilio's signed status callback, delivered")

    for channel, want in (("email", "email"), ("sms", "sms")):
        _, shown = services.call("create", "GET", f"/{ids[channel]}", headers=site)
        if shown["status"] != "verified" or shown.get("verified_channel") != want:
            raise ServiceError(f"{services['create'].container.label()}: {channel} verification reads {shown}")
    _, signals = services.call("status", "GET", "/", headers=operator)
    log(f"status: both verified; the status function answers ({', '.join(sorted(signals))[:80]})")

    services.call("reconcile", "POST", "/", body={}, headers=scheduler)
    log("reconcile: 200")
    return ids


class _Call(threading.Thread):
    def __init__(self, services: Services, headers: dict[str, str]):
        super().__init__(daemon=True)
        self.services, self.headers = services, headers
        self.answer: object = None
        self.error: ServiceError | None = None

    def run(self) -> None:
        try:
            self.answer = self.services.call("dispatch", "POST", "/", body={}, headers=self.headers, timeout=120)[1]
        except ServiceError as exc:
            self.error = exc


def _dispatch_in_background(services: Services, headers: dict[str, str]) -> _Call:
    call = _Call(services, headers)
    call.start()
    return call


def _delivered(provider, destination: str, services: Services, what: str):
    deadline = time.monotonic() + DELIVERY_WAIT_SECONDS
    while time.monotonic() < deadline:
        found = [d for d in provider.deliveries if d.destination == destination]
        if found:
            return found[-1]
        time.sleep(0.1)
    raise services["dispatch"].failure(f"no {what} reached the provider within {DELIVERY_WAIT_SECONDS} s")


def _report_sms_delivered(plan: Plan, services: Services, twilio: FakeTwilio, token: str) -> None:
    """Twilio's status callback for the SMS, signed with the auth token over the configured URL."""
    [delivery] = [d for d in twilio.deliveries if d.destination == PHONE]
    callback = delivery.request.get("StatusCallback") or ""
    base = plan.service("reports").env.get("DELIVERY_REPORTS_URL", "")
    if not callback.startswith(base):
        raise ServiceError(f"{services['dispatch'].container.label()}: StatusCallback {callback!r} is not under {base}")
    form = {
        "MessageSid": twilio.message(delivery)["sid"],
        "MessageStatus": "delivered",
        "AccountSid": twilio.account_sid,
        "To": PHONE,
    }
    headers = {
        "X-Twilio-Signature": twilio_signature(token, callback, list(form.items())),
        "Content-Type": "application/x-www-form-urlencoded",
    }
    path = callback[len(base) :] or "/"
    services.call("reports", "POST", path, form=urlencode(form).encode(), headers=headers)
