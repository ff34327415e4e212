"""Secret Manager references in settings: parsed, fetched once per instance, never leaked.

The real google-cloud-secret-manager client is exercised against a local gRPC stand-in of the
Secret Manager service (same wire protocol, no Google endpoint); the rest uses a dict source.
"""

from __future__ import annotations

from concurrent import futures

import grpc
import pytest
from google.cloud import secretmanager
from google.cloud.secretmanager_v1.services.secret_manager_service.transports import SecretManagerServiceGrpcTransport

from signup_verification import runtime
from signup_verification.config import load
from signup_verification.platform import secret_manager as secrets
from signup_verification.platform.errors import ConfigError
from support.auth import cloud_run_identity
from support.paths import TEST_TOKEN_KEYS
from support.secrets import resolve_env

TOKEN_REF = "sm://projects/my-proj/secrets/verify-token-keys/versions/3"
TOKEN_NAME = "projects/my-proj/secrets/verify-token-keys/versions/3"


class DictSource:
    """Local stand-in: resource name -> payload; counts reads."""

    def __init__(self, payloads: dict[str, bytes]):
        self.payloads = payloads
        self.reads: list[str] = []

    def access(self, name: str) -> bytes:
        self.reads.append(name)
        if name not in self.payloads:
            raise LookupError("NotFound")
        return self.payloads[name]


@pytest.fixture
def source():
    stand_in = DictSource(
        {
            TOKEN_NAME: (TEST_TOKEN_KEYS + "\n").encode(),
            "projects/my-proj/secrets/sendgrid/versions/latest": b"SG.example-key",
        }
    )
    previous = secrets.use_source(stand_in)
    yield stand_in
    secrets.use_source(previous)


def test_references_are_replaced_and_other_values_kept(source):
    env = resolve_env(
        {
            "TOKEN_KEYS": TOKEN_REF,
            "SENDGRID_API_KEY": "sm://projects/my-proj/secrets/sendgrid",
            "EMAIL_FROM": "Signup <a@example.com>",
            "PLAIN": "projects/x/secrets/y",
        }
    )
    assert env["TOKEN_KEYS"] == TEST_TOKEN_KEYS  # trailing newline from `echo | gcloud` dropped
    assert env["SENDGRID_API_KEY"] == "SG.example-key"  # no version = latest
    assert env["EMAIL_FROM"] == "Signup <a@example.com>"
    assert env["PLAIN"] == "projects/x/secrets/y"  # only the sm:// scheme is fetched


def test_each_secret_is_read_once_per_instance(source):
    for _ in range(3):
        resolve_env({"TOKEN_KEYS": TOKEN_REF, "OTHER": TOKEN_REF})
    assert source.reads == [TOKEN_NAME]


@pytest.mark.parametrize(
    "reference",
    [
        "sm://my-secret",
        "sm://projects/p/secrets/s/versions/0",
        "sm://projects/p/secrets/s/versions/abc",
        "sm://projects/P_/secrets/s",
        "sm://projects/p/secrets/s/extra",
    ],
)
def test_malformed_reference_is_a_clear_config_error(source, reference):
    with pytest.raises(ConfigError, match="TOKEN_KEYS must look like sm://projects/PROJECT/secrets/NAME"):
        resolve_env({"TOKEN_KEYS": reference})
    assert source.reads == []


def test_unreadable_secret_names_the_variable_and_reference_only(source):
    with pytest.raises(ConfigError) as error:
        resolve_env({"TWILIO_AUTH_TOKEN": "sm://projects/my-proj/secrets/missing/versions/1"})
    assert str(error.value) == (
        "TWILIO_AUTH_TOKEN: cannot read secret projects/my-proj/secrets/missing/versions/1: LookupError"
    )


def test_empty_secret_is_refused(source):
    source.payloads["projects/my-proj/secrets/empty/versions/1"] = b" \n"
    with pytest.raises(ConfigError, match="SMTP_PASSWORD: secret .* is empty"):
        resolve_env({"SMTP_PASSWORD": "sm://projects/my-proj/secrets/empty/versions/1"})


def test_production_runtime_takes_its_token_keys_from_secret_manager(service_env, source, monkeypatch, app_client):
    monkeypatch.setenv("ENVIRONMENT", "production")
    monkeypatch.setenv("SMS_ALLOWED_COUNTRIES", "US")
    monkeypatch.setenv("TOKEN_KEYS", TOKEN_REF)
    runtime.reset()
    assert [k.key_id for k in runtime.get_runtime().keyring.keys] == ["test-k1"]
    assert TEST_TOKEN_KEYS not in repr(runtime.get_runtime().config)
    response = app_client("create_verification").post(
        "/",
        json={"account_id": "acct_sm", "channel": "email", "destination": "sm@example.com"},
        headers={"Idempotency-Key": "sm-1", "Authorization": cloud_run_identity("site@p.iam.gserviceaccount.com")},
    )
    assert response.status_code == 201, response.get_data(as_text=True)
    runtime.reset()
    runtime.get_runtime()
    assert source.reads == [TOKEN_NAME]  # a new Runtime on the same instance reuses the value


# ---- the real client library against a local Secret Manager stand-in ----------------------


class _SecretManagerStandIn:
    def __init__(self, payloads: dict[str, bytes]):
        self.payloads = payloads
        self.requests: list[str] = []

    def access(self, request: secretmanager.AccessSecretVersionRequest, context: grpc.ServicerContext):
        self.requests.append(request.name)
        if request.name not in self.payloads:
            context.abort(grpc.StatusCode.NOT_FOUND, f"Secret [{request.name}] not found")
        return secretmanager.AccessSecretVersionResponse(
            name=request.name, payload=secretmanager.SecretPayload(data=self.payloads[request.name])
        )


@pytest.fixture
def grpc_secret_manager():
    service = _SecretManagerStandIn({TOKEN_NAME: TEST_TOKEN_KEYS.encode()})
    handler = grpc.method_handlers_generic_handler(
        "google.cloud.secretmanager.v1.SecretManagerService",
        {
            "AccessSecretVersion": grpc.unary_unary_rpc_method_handler(
                service.access,
                request_deserializer=secretmanager.AccessSecretVersionRequest.deserialize,
                response_serializer=secretmanager.AccessSecretVersionResponse.serialize,
            ),
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    client = secretmanager.SecretManagerServiceClient(transport=SecretManagerServiceGrpcTransport(channel=channel))
    previous = secrets.use_source(secrets.SecretManagerSource(client))
    yield service
    secrets.use_source(previous)
    channel.close()
    server.stop(None)


def test_secret_manager_client_reads_the_version(grpc_secret_manager):
    assert resolve_env({"TOKEN_KEYS": TOKEN_REF})["TOKEN_KEYS"] == TEST_TOKEN_KEYS
    assert grpc_secret_manager.requests == [TOKEN_NAME]


def test_secret_manager_not_found_is_a_config_error(grpc_secret_manager):
    with pytest.raises(
        ConfigError, match="TOKEN_KEYS: cannot read secret projects/my-proj/secrets/nope/versions/latest: NotFound"
    ):
        resolve_env({"TOKEN_KEYS": "sm://projects/my-proj/secrets/nope"})


# -- through config.load: the one place the environment is read -----------------------------------------------
def test_load_resolves_references_through_the_secret_manager_client(grpc_secret_manager):
    config = load({"TOKEN_KEYS": TOKEN_REF, "EMAIL_FROM": "Signup <a@example.com>"})
    assert config.tokens.keys == TEST_TOKEN_KEYS
    assert config.dispatch.messages.email_from == "Signup <a@example.com>"  # a plain value is kept
    assert grpc_secret_manager.requests == [TOKEN_NAME]
    assert TEST_TOKEN_KEYS not in repr(config)


def test_load_reports_an_unreadable_secret_together_with_the_other_bad_settings(grpc_secret_manager):
    with pytest.raises(ConfigError) as caught:
        load(
            {
                "TOKEN_KEYS": "sm://projects/my-proj/secrets/nope",
                "SMTP_PASSWORD": "sm://not-a-reference",
                "SMTP_PORT": "twenty-five",
            }
        )
    problems = caught.value.problems
    assert len(problems) == 3, problems
    assert any(
        p.startswith("TOKEN_KEYS: cannot read secret projects/my-proj/secrets/nope/versions/latest") for p in problems
    )
    assert any(p.startswith("SMTP_PASSWORD must look like sm://projects/") for p in problems)
    assert "SMTP_PORT must be an integer, got 'twenty-five'" in problems
