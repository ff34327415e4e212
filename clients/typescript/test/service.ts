// The client against the real service (open mode: the local emulation, no caller identity): create
// with a kept key, its replay, a fallback and its policy, typed errors that carry the key, short
// retries on 503 honouring Retry-After and none on 429, get, and confirming an SMS code.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, test } from "node:test";

import * as svc from "../src/index.js";
import { account, count, email, env, harness, needs } from "./support.js";

const open = needs("open");
const PHONE = "+14155550142";

function client(options: Partial<svc.ClientOptions> = {}): svc.Client {
  const noWait = async (seconds: number): Promise<void> => {
    throw new Error(`unexpected retry wait of ${seconds} s`);
  };
  return new svc.Client({ createUrl: env("SVC_CREATE_URL"), confirmUrl: env("SVC_CONFIRM_URL"), sleep: noWait, ...options });
}

async function rejection<T extends svc.VerificationError>(promise: Promise<unknown>, Class: new (...a: never[]) => T): Promise<T> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof Class, `expected ${Class.name}, got ${String(error)}`);
    return error;
  }
  throw new assert.AssertionError({ message: `expected ${Class.name}, nothing was thrown` });
}

after(async () => {
  if (process.env["SVC_MODE"] === "open") await harness("/database/up", "POST"); // whatever a failed test left
});

test("create, then get reads the verification back", open, async () => {
  const created = await client().create(account(), "email", email(), { locale: "ja" });
  assert.equal(created.status, "pending");
  assert.equal(created.replayed, false);
  assert.match(created.idempotencyKey, /^[0-9a-f-]{36}$/);
  const state = await client().get(created.verification_id);
  assert.equal(state.status, "pending");
  assert.equal(state.channel, "email");
  assert.match(state.destination, /^a\*\*\*@/);
  assert.deepEqual(state.deliveries.map((d) => [d.channel, d.role]), [["email", "primary"]]);
});

test("the kept key replays instead of creating twice", open, async () => {
  const destination = email();
  const acct = account();
  const first = await client().create(acct, "email", destination, { idempotencyKey: `signup-${randomUUID()}` });
  const before = await count("/verifications/count");
  const replay = await client().create(acct, "email", destination, { idempotencyKey: first.idempotencyKey });
  assert.equal(replay.replayed, true);
  assert.equal(replay.verification_id, first.verification_id);
  assert.equal(await count("/verifications/count"), before);
});

test("a fallback and a return_url go with the create; the answer names the policy", open, async () => {
  const created = await client().create(account(), "email", email(), {
    fallback: { channel: "sms", destination: PHONE, after_seconds: 30 },
    returnUrl: env("SVC_RETURN_URL"),
  });
  assert.deepEqual(created.fallback, { channel: "sms", after_seconds: 30, policy: "fallback" });
  const state = await client().get(created.verification_id);
  assert.equal(state.return_url, env("SVC_RETURN_URL"));
  assert.deepEqual(state.deliveries.map((d) => [d.channel, d.role]), [["email", "primary"], ["sms", "fallback"]]);
  const both = await client().create(account(), "sms", "+14155550143", { fallback: { channel: "email", destination: email(), after_seconds: 0 } });
  assert.equal(both.fallback?.policy, "both");
});

test("typed errors from problem+json, each carrying the key to retry with", open, async () => {
  const invalid = await rejection(client().create(account(), "email", "not an address"), svc.InvalidRequest);
  assert.deepEqual(invalid.errors.map((e) => e.pointer), ["#/destination"]);
  assert.match(invalid.idempotencyKey ?? "", /^[0-9a-f-]{36}$/);
  const sameChannel = await rejection(client().create(account(), "email", email(), { fallback: { channel: "email", destination: email(), after_seconds: 5 } }), svc.InvalidRequest);
  assert.deepEqual(sameChannel.errors.map((e) => e.pointer), ["#/fallback"]);
  const evil = await rejection(client().create(account(), "email", email(), { returnUrl: "https://evil.example/" }), svc.InvalidRequest);
  assert.deepEqual(evil.errors.map((e) => e.pointer), ["#/return_url"]);
  const first = await client().create(account(), "email", email());
  const reused = await rejection(client().create(account(), "email", email(), { idempotencyKey: first.idempotencyKey }), svc.IdempotencyKeyReused);
  assert.equal(reused.idempotencyKey, first.idempotencyKey);
  await rejection(client().get(randomUUID()), svc.NotFound);
  const nowhere = new svc.Client({ createUrl: "http://127.0.0.1:9/", maxAttempts: 1 });
  const unreachable = await rejection(nowhere.create(account(), "email", email(), { idempotencyKey: "k-9" }), svc.Unavailable);
  assert.deepEqual([unreachable.slug, unreachable.idempotencyKey], ["unreachable", "k-9"]);
});

test("a 429 is thrown at once with its Retry-After and key, and nothing follows it", open, async () => {
  const destination = email();
  await client().create(account(), "email", destination);
  const before = await count("/verifications/count");
  const limited = await rejection(client({ maxRetryWaitSeconds: 60 }).create(account(), "email", destination), svc.RateLimited);
  assert.equal(limited.retryAfter, 1); // the harness's RATE_LIMIT_SPACING_SECONDS: never waited for (the sleep throws)
  assert.ok(limited.idempotencyKey);
  await new Promise((r) => setTimeout(r, 1200)); // the spacing is over: no second message was created
  assert.equal(await count("/verifications/count"), before);
});

test("a 503 is retried after its Retry-After with the same key", open, async () => {
  await harness("/database/down", "POST");
  const waits: number[] = [];
  const retrying = client({ maxRetryWaitSeconds: 5, sleep: async (s) => void (waits.push(s), await harness("/database/up", "POST")) });
  const created = await retrying.create(account(), "email", email());
  assert.deepEqual(waits, [5]);
  assert.equal(created.status, "pending");
  assert.equal(await count(`/idempotency-keys/${encodeURIComponent(created.idempotencyKey)}/count`), 1);
});

test("retries are bounded; the last error carries the key, which creates once the service is back", open, async () => {
  await harness("/database/down", "POST");
  const waits: number[] = [];
  const destination = email();
  const acct = account();
  let failed: svc.Unavailable;
  try {
    failed = await rejection(client({ maxAttempts: 3, maxRetryWaitSeconds: 5, sleep: async (s) => void waits.push(s) }).create(acct, "email", destination), svc.Unavailable);
  } finally {
    await harness("/database/up", "POST");
  }
  assert.deepEqual(waits, [5, 5]);
  assert.equal(failed.retryAfter, 5);
  const retried = await client().create(acct, "email", destination, { idempotencyKey: failed.idempotencyKey ?? "" });
  assert.equal(retried.idempotencyKey, failed.idempotencyKey);
  assert.equal(await count(`/idempotency-keys/${encodeURIComponent(retried.idempotencyKey)}/count`), 1);
});

test("confirm a code: wrong, then right, then again", open, async () => {
  const created = await client().create(account(), "sms", "+14155550144");
  const { code } = (await harness(`/sms-code/${created.verification_id}`)) as { code: string };
  const wrong = code === "000000" ? "111111" : "000000";
  assert.equal((await client().get(created.verification_id)).code_entry_url, created.code_entry_url); // the page asks for it
  const incorrect = await rejection(client().confirmCode(created.verification_id, wrong), svc.CodeIncorrect);
  assert.equal(incorrect.remainingAttempts, 4);
  const confirmed = await client().confirmCode(created.verification_id, code);
  assert.equal(confirmed.verification_id, created.verification_id);
  assert.equal(confirmed.already_verified, false);
  assert.deepEqual([confirmed.proof.channel, confirmed.proof.via, confirmed.proof.destination], ["sms", "code", "+1******0144"]);
  assert.equal((await client().confirmCode(created.verification_id, code)).already_verified, true);
  const state = await client().get(created.verification_id);
  assert.equal(state.status, "verified");
  assert.deepEqual(state.proofs, confirmed.proofs);
  assert.ok(created.code_entry_url?.includes("?entry=") && state.code_entry_url === null); // nothing left to type
  await rejection(client().confirmCode(randomUUID(), code), svc.NotFound);
});
