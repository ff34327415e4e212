// Signed requests against the real service (REQUEST_SIGNING_KEYS set, create_verification a signed
// target): the v2 signature is accepted for create and get, re-signed on each attempt; an unsigned
// request or one signed with another key is refused; during a rotation any one matching v2= does.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";

import * as svc from "../src/index.js";
import { account, email, env, needs } from "./support.js";

const signed = needs("signed");

function client(auth?: svc.CallerAuth): svc.Client {
  return new svc.Client({ createUrl: env("SVC_CREATE_URL"), ...(auth === undefined ? {} : { auth }) });
}

async function refused(promise: Promise<unknown>): Promise<svc.Unauthenticated> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof svc.Unauthenticated, String(error));
    return error;
  }
  throw new assert.AssertionError({ message: "expected 401, the request was accepted" });
}

test("a signed create and a signed get are accepted", signed, async () => {
  const signer = client(svc.SignedRequests.fromKey(env("SVC_SIGNING_KEY")));
  const created = await signer.create(account(), "email", email());
  assert.equal(created.status, "pending");
  assert.equal((await signer.get(created.verification_id)).status, "pending");
  const replay = await signer.create(created.account_id, "email", email(), { idempotencyKey: created.idempotencyKey }).catch((e: unknown) => e);
  assert.ok(replay instanceof svc.IdempotencyKeyReused, String(replay)); // signed anew, judged by the key
});

const stranger = new svc.SignedRequests([new Uint8Array(randomBytes(32))]);

test("a create unsigned, or signed with another key, is refused with the key kept", signed, async () => {
  const unsigned = await refused(client().create(account(), "email", email(), { idempotencyKey: "signup-unsigned" }));
  assert.equal(unsigned.idempotencyKey, "signup-unsigned");
  await refused(client(stranger).create(account(), "email", email()));
});

test("reading a verification takes the signature too", signed, async () => {
  const created = await client(svc.SignedRequests.fromKey(env("SVC_SIGNING_KEY"))).create(account(), "email", email());
  await refused(client().get(created.verification_id));
  await refused(client(stranger).get(created.verification_id));
});

test("while rotating, a request signed with an unknown key and the configured one is accepted", signed, async () => {
  const unknown = "old:" + randomBytes(32).toString("base64url");
  const rotating = client(svc.SignedRequests.fromKey([unknown, env("SVC_SIGNING_KEY")]));
  const created = await rotating.create(account(), "email", email());
  assert.equal((await rotating.get(created.verification_id)).verification_id, created.verification_id);
});
