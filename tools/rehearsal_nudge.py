"""The small tier's nudge, rehearsed (tests/system/test_rehearsal.py): the bundle's create service,
planned as the small tier plans it, enqueues its time bucket's named task through the real Cloud
Tasks client to a stand-in of the Tasks API (tests/support/fakes/cloud_tasks.py: CreateTask, one
task per name, the delivery with an OIDC token of the task's service account), which delivers it to
the bundle's dispatch service, whose nudge path sends the message: no scheduler tick, no invocation
kept open. The create service's Google credentials are a service-account key whose token endpoint is
the stand-in's (google-auth's own path, as the metadata server would give a token on Cloud Run).
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402

from rehearsal_plan import Plan  # noqa: E402
from rehearsal_services import ServiceError, Services  # noqa: E402
from rehearsal_smoke import Providers, caller  # noqa: E402
from support.fakes.cloud_tasks import TasksApi  # noqa: E402

WAIT_SECONDS = 30  # generous: the bucket is a second; CI machines run other work beside it


def credentials_file(path: Path, token_uri: str, email: str) -> Path:
    """A service-account key file (a fresh RSA key) whose token endpoint is the stand-in's."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": email.split("@")[1].split(".")[0],
                "private_key_id": uuid.uuid4().hex,
                "private_key": pem.decode(),
                "client_email": email,
                "client_id": "1",
                "token_uri": token_uri,
            }
        )
    )
    return path


def settings(api: TasksApi, key_file: Path) -> dict[str, str]:
    """What the rehearsal adds to the plan's settings for the nudge: where the Tasks API and Google's
    token endpoint are (Cloud Run's metadata server gives the credentials there)."""
    return {"CLOUD_TASKS_API_URL": api.url, "GOOGLE_APPLICATION_CREDENTIALS": str(key_file)}


def nudge_smoke(plan: Plan, services: Services, providers: Providers, api: TasksApi, log=print) -> list[str]:
    """Two creates at once, on two create instances: their bucket's task is created once (the other
    refused as existing, or a task per bucket if they straddle one), delivered to dispatch's nudge
    path, and both messages reach SendGrid. Returns the tasks' names."""
    site = caller(plan, "create", "signup-site@example.com")
    run = uuid.uuid4().hex[:8]
    destinations = [f"nudge-{n}-{run}@example.com" for n in range(2)]
    errors: list[ServiceError] = []

    def create(n: int) -> None:
        body = {"account_id": f"nudge-{n}-{run}", "channel": "email", "destination": destinations[n]}
        try:
            services.call(
                "create", "POST", "/", body=body, headers={**site, "Idempotency-Key": f"nudge-{n}-{run}"}, expect=201
            )
        except ServiceError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=create, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    if errors:
        raise errors[0]
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline and not all(providers.sendgrid.destinations().count(d) for d in destinations):
        time.sleep(0.1)
    names = [task.get("name", "") for task in api.created]
    if not names or not all("/tasks/nudge-" in name for name in names) or len(set(names)) != len(names):
        raise services["create"].failure(f"the nudge made these tasks: {names or 'none'}")
    if len(names) + len(api.refused) < 1 or any(status != 200 for _, status in api.delivered):
        raise services["dispatch"].failure(f"the nudge's task was answered {api.delivered}")
    missing = [d for d in destinations if d not in providers.sendgrid.destinations()]
    if missing:
        raise services["dispatch"].failure(f"no nudged dispatch sent {missing} within {WAIT_SECONDS} s")
    log(
        f"nudge: {len(names)} named task(s) for 2 creates ({len(api.refused)} refused as existing), delivered, both sent"
    )
    return names
