// The v2 request signature: the worked example of the service's contract, byte for byte, and the
// parts a signer gets wrong (the path as sent, the raw query, one v2= per key, a new t per attempt).
import assert from "node:assert/strict";
import { test } from "node:test";

import { SignedRequests, canonicalRequest, parseSigningKey, signatureHeader } from "../src/index.js";
import type { OutgoingRequest } from "../src/index.js";
import { offline } from "./support.js";

const KEY = "docs-example:ZXhhbXBsZS1zaWduaW5nLWtleS0wMTIzNDU2Nzg5YWJjZGVm";
const T = 1764633600;
const BODY = '{"account_id":"acct_42","channel":"email","destination":"ada@example.com"}';

function request(method: string, url: string, body: string, idempotencyKey?: string): OutgoingRequest {
  return { method, target: "create_verification", url: new URL(url), idempotencyKey, body: new TextEncoder().encode(body) };
}

test("the key as verifyctl new-key prints it decodes to its 36 secret bytes", offline, () => {
  assert.equal(Buffer.from(parseSigningKey(KEY)).toString(), "example-signing-key-0123456789abcdef");
  assert.throws(() => parseSigningKey("short:" + Buffer.from("x".repeat(31)).toString("base64url")), /at least 32 bytes/);
  assert.throws(() => parseSigningKey("bad:not base64!"), /key_id:base64url-secret/);
});

test("the contract's worked example: a POST create", offline, () => {
  const signer = SignedRequests.fromKey(KEY, () => T * 1000 + 999);
  const headers = signer.headers(request("POST", "http://localhost:8081/", BODY, "signup-42"));
  assert.deepEqual(headers, { "Verify-Signature": "t=1764633600,v2=abf7b645e704dc4f22f369f1b52ea7a45f701a22cc2cb5fe892132fc8a574abc" });
});

test("the contract's worked example: a GET of one verification", offline, () => {
  const signer = SignedRequests.fromKey(KEY, () => T * 1000);
  const url = "https://create-xyz.a.run.app/0193a6a4-3c1e-7b4e-9f1a-2d3c4b5a6f70";
  assert.deepEqual(signer.headers(request("GET", url, "")), {
    "Verify-Signature": "t=1764633600,v2=8b76846413b17c15d21cb68c8f0c83c44ea198dbee1e62b081abce327da10e04",
  });
});

test("the canonical request has eight lines: the path as sent and the raw query", offline, () => {
  const lines = canonicalRequest(request("get", "https://x.example/base/%7Eid?b=2&a=1", "", undefined), T).split("\n");
  assert.equal(lines.length, 8);
  assert.deepEqual(lines.slice(0, 7), ["v2", "GET", "create_verification", "/base/%7Eid", "b=2&a=1", "", String(T)]);
  assert.equal(lines[7], "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"); // SHA-256 of ""
});

test("while rotating, one v2= per key, in the order given", offline, () => {
  const other = Buffer.from("another-signing-key-for-rotation-000").toString("base64url");
  const both = SignedRequests.fromKey([KEY, `site2:${other}`], () => T * 1000);
  const value = both.headers(request("POST", "http://localhost:8081/", BODY, "signup-42"))["Verify-Signature"] ?? "";
  const parts = value.split(",");
  assert.equal(parts.length, 3);
  assert.equal(parts[1], "v2=abf7b645e704dc4f22f369f1b52ea7a45f701a22cc2cb5fe892132fc8a574abc");
  assert.match(parts[2] ?? "", /^v2=[0-9a-f]{64}$/);
  assert.equal(SignedRequests.fromKey(`${KEY}, site2:${other}`, () => T * 1000).headers(request("POST", "http://localhost:8081/", BODY, "signup-42"))["Verify-Signature"], value);
});

test("each attempt signs with its own time; the key material never prints", offline, () => {
  let now = T * 1000;
  const signer = SignedRequests.fromKey(KEY, () => now);
  const first = signer.headers(request("POST", "http://localhost:8081/", BODY, "k"))["Verify-Signature"];
  now += 1000;
  const second = signer.headers(request("POST", "http://localhost:8081/", BODY, "k"))["Verify-Signature"];
  assert.notEqual(first, second);
  assert.equal(String(signer), "SignedRequests(1 key(s))");
  assert.equal(signatureHeader([parseSigningKey(KEY)], request("POST", "http://localhost:8081/", BODY, "k"), T + 1), second);
});
