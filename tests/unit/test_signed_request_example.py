"""docs/security.md's worked example of a signed request, checked against the service's signing
and verification (api/auth.py, api/request_signatures.py) and the Python client's signing: the
same key, request and `t` give the same header everywhere, and the docs print exactly that."""

from __future__ import annotations

import hashlib

import pytest
from signup_verification_client import SignedRequests
from signup_verification_client.auth import canonical as client_canonical
from werkzeug.datastructures import Headers, MultiDict

from signup_verification.api import auth
from signup_verification.api import request_signatures as signatures
from signup_verification.api.config import AuthConfig, parse_signing_keys
from signup_verification.api.http import Incoming
from support.paths import ROOT

KEY = "docs-example:ZXhhbXBsZS1zaWduaW5nLWtleS0wMTIzNDU2Nzg5YWJjZGVm"
T = 1764633600
BODY = b'{"account_id":"acct_42","channel":"email","destination":"ada@example.com"}'
READ_PATH = "/0193a6a4-3c1e-7b4e-9f1a-2d3c4b5a6f70"
CREATE = ("POST", "/", "signup-42", BODY, "abf7b645e704dc4f22f369f1b52ea7a45f701a22cc2cb5fe892132fc8a574abc")
READ = ("GET", READ_PATH, None, b"", "8b76846413b17c15d21cb68c8f0c83c44ea198dbee1e62b081abce327da10e04")
EXAMPLES = pytest.mark.parametrize("method, path, key, body, mac", [CREATE, READ], ids=["create", "read"])
DOC = (ROOT / "docs" / "security.md").read_text()


def test_the_key_is_the_documented_secret():
    [key] = parse_signing_keys(KEY)
    assert key.key_id == "docs-example" and key.secret == b"example-signing-key-0123456789abcdef"
    assert SignedRequests.from_key(KEY).secret == key.secret


def test_the_signed_string_is_the_documented_eight_lines():
    request = signatures.SignedRequest("POST", "create_verification", "/", "", "signup-42", BODY)
    lines = ["v2", "POST", "create_verification", "/", "", "signup-42", str(T), hashlib.sha256(BODY).hexdigest()]
    assert signatures.canonical_v2(request, T) == "\n".join(lines).encode()  # no trailing newline
    assert client_canonical("POST", "create_verification", "/", "", "signup-42", T, BODY) == "\n".join(lines).encode()
    assert "```text\n  " + "\n  ".join(lines).replace("\n  \n", "\n\n") + "\n  ```" in DOC


@EXAMPLES
def test_the_service_signs_and_accepts_the_documented_header(method, path, key, body, mac):
    [signing_key] = parse_signing_keys(KEY)
    header = auth.sign_request(signing_key.secret, method, "create_verification", key, body, T, path=path)
    assert header == f"t={T},v2={mac}"
    assert f"Verify-Signature: t={T},v2={mac}" in DOC
    config = AuthConfig(production=True, signing_keys=(signing_key,))
    headers = Headers({"Verify-Signature": header, **({"Idempotency-Key": key} if key else {})})
    incoming = Incoming(method, "application/json", headers, MultiDict(), body, path, "")
    verified = auth.verify_request(config, "create_verification", incoming, now=T + 10)
    assert verified is not None and verified.scheme == "v2"
    moved = Incoming(method, "application/json", headers, MultiDict(), body, path + "x", "")
    assert auth.verify_request(config, "create_verification", moved, now=T + 10) is None


@EXAMPLES
def test_the_python_client_sends_the_documented_header(method, path, key, body, mac):
    client = SignedRequests(SignedRequests.from_key(KEY).secret, clock=lambda: T + 0.9)
    url = "https://create-verification-abc.a.run.app" + path
    assert client.headers(method, "create_verification", key, body, url) == {"Verify-Signature": f"t={T},v2={mac}"}


def test_the_client_signs_the_path_and_raw_query_it_sends():
    secret = b"k" * 32
    client = SignedRequests(secret, clock=lambda: T)
    sent = client.headers("GET", "status", None, b"", "https://h.example/?window=300&x=%41")
    expected = auth.sign_request(secret, "GET", "status", None, b"", T, path="/", query="window=300&x=%41")
    assert sent == {"Verify-Signature": expected}
    assert sent != client.headers("GET", "status", None, b"", "https://h.example/")
