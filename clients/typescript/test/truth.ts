// What a site acts on, read through the client from the real service (open mode): what each secret
// proved (proofs; verified_channel and verified_via: the first), each delivery's truth (failed_at and its
// reason), the one timestamp shape, and the verified event as a receiver gets it, checked with
// verifyWebhook.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { IncomingHttpHeaders } from "node:http";
import { test } from "node:test";

import * as svc from "../src/index.js";
import { TIMESTAMP, account, email, env, harness, needs } from "./support.js";

const open = needs("open");

function client(): svc.Client {
  return new svc.Client({ createUrl: env("SVC_CREATE_URL"), confirmUrl: env("SVC_CONFIRM_URL") });
}

async function dispatch(): Promise<void> {
  const answer = await fetch(env("SVC_DISPATCH_URL"), { method: "POST" });
  assert.equal(answer.status, 200, await answer.text());
}

test("an email verification confirmed with its SMS fallback's code names the phone as the proof, the link then the address", open, async () => {
  const created = await client().create(account(), "email", email(), { fallback: { channel: "sms", destination: "+14155550151", after_seconds: 0 } });
  const before = await client().get(created.verification_id);
  assert.deepEqual([before.verified_channel, before.verified_via, before.proofs], [null, null, []]);
  const { code } = (await harness(`/sms-code/${created.verification_id}`)) as { code: string };
  const confirmed = await client().confirmCode(created.verification_id, code);
  assert.deepEqual([confirmed.channel, confirmed.verified_channel, confirmed.verified_via], ["email", "sms", "code"]);
  const state = await client().get(created.verification_id);
  assert.deepEqual([state.channel, state.status, state.verified_channel, state.verified_via], ["email", "verified", "sms", "code"]);
  assert.deepEqual(state.proofs.map((p) => p.channel), ["sms"]); // the address is not proved by the code
  const { token } = (await harness(`/link-token/${created.verification_id}`)) as { token: string };
  const answer = await fetch(env("SVC_CONFIRM_URL"), { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ token }) });
  assert.equal(answer.status, 200, await answer.text());
  const later = await client().get(created.verification_id);
  assert.deepEqual(later.proofs.map((p) => [p.channel, p.via]), [["sms", "code"], ["email", "link"]]);
  for (const proof of later.proofs) assert.match(proof.at, TIMESTAMP);
});

test("a verification confirmed by its email link names the email", open, async () => {
  const created = await client().create(account(), "email", email(), { fallback: { channel: "sms", destination: "+14155550152", after_seconds: 0 } });
  const { token } = (await harness(`/link-token/${created.verification_id}`)) as { token: string };
  const answer = await fetch(env("SVC_CONFIRM_URL"), { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ token }) });
  assert.equal(answer.status, 200, await answer.text());
  const state = await client().get(created.verification_id);
  assert.deepEqual([state.status, state.verified_channel, state.verified_via], ["verified", "email", "link"]);
});

test("steps are the fallback in order: the shorthand replays them, each delivery says its step", open, async () => {
  const address = email();
  const key = `steps-${account()}`;
  const created = await client().createSteps(account(), [{ channel: "email", destination: address }, { channel: "sms", destination: "+14155550154", after_seconds: 30 }], { idempotencyKey: key });
  assert.deepEqual(created.fallback, { channel: "sms", after_seconds: 30, policy: "fallback" });
  const state = await client().get(created.verification_id);
  assert.deepEqual(state.deliveries.map((d) => [d.step, d.channel, d.after_seconds]), [[1, "email", 0], [2, "sms", 30]]);
});

test("every timestamp is RFC 3339 UTC with milliseconds", open, async () => {
  const created = await client().create(account(), "email", email());
  const state = await client().get(created.verification_id);
  for (const stamp of [created.created_at, created.expires_at, state.created_at, state.expires_at]) {
    assert.match(stamp, TIMESTAMP);
    assert.equal(new Date(stamp).toISOString(), stamp); // what Date.toISOString() gives
  }
});

test("an email refused for good reads failed, with when and why", open, async () => {
  const created = await client().create(account(), "email", email("bounce")); // the harness's SMTP: 550 5.1.1
  await dispatch();
  const [delivery] = (await client().get(created.verification_id)).deliveries;
  assert.ok(delivery);
  assert.deepEqual([delivery.status, delivery.last_outcome, delivery.accepted_at, delivery.delivered_at], ["failed", "failed", null, null]);
  assert.match(delivery.failed_at ?? "", TIMESTAMP);
  assert.ok(delivery.reason);
  assert.deepEqual([delivery.reason.provider, delivery.reason.code, delivery.reason.fault], ["smtp", "5.1.1", "recipient"]);
  assert.ok(["bounced", "invalid_destination"].includes(delivery.reason.category), delivery.reason.category);
});

test("an accepted email reads accepted with its time and no reason", open, async () => {
  const created = await client().create(account(), "email", email());
  await dispatch();
  const [delivery] = (await client().get(created.verification_id)).deliveries;
  assert.ok(delivery);
  assert.deepEqual([delivery.status, delivery.last_outcome, delivery.reason], ["accepted", "accepted", null]);
  assert.match(delivery.accepted_at ?? "", TIMESTAMP);
});

test("the verified event reaches a receiver, verifies, and names the proof", open, async () => {
  const received: Array<{ body: Buffer; headers: IncomingHttpHeaders }> = [];
  const receiver = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      received.push({ body: Buffer.concat(chunks), headers: request.headers });
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(Number(env("SVC_WEBHOOK_PORT")), "127.0.0.1", resolve));
  try {
    const created = await client().create(account(), "email", email(), { fallback: { channel: "sms", destination: "+14155550153", after_seconds: 0 } });
    const { code } = (await harness(`/sms-code/${created.verification_id}`)) as { code: string };
    await client().confirmCode(created.verification_id, code);
    let event: svc.VerifiedWebhook | undefined;
    for (let round = 0; round < 10 && event === undefined; round++) {
      await dispatch();
      for (const { body, headers } of received) {
        const verified = svc.verifyWebhook(body, headers, env("SVC_WEBHOOK_SECRET"));
        if (verified.type === "verification.verified" && verified.data.verification_id === created.verification_id) event = verified;
      }
      if (event === undefined) await new Promise((r) => setTimeout(r, 200));
    }
    assert.ok(event, `no verification.verified event among ${received.length} received`);
    assert.match(event.id, /^msg_[0-9a-f]{32}$/);
    assert.ok(event.type === "verification.verified");
    assert.deepEqual([event.data.channel, event.data.verified_channel, event.data.verified_via], ["email", "sms", "code"]);
    assert.throws(() => svc.verifyWebhook(received[0]?.body ?? "", received[0]?.headers ?? {}, "whsec_" + Buffer.alloc(24, 1).toString("base64")), svc.InvalidWebhook);
  } finally {
    await new Promise((resolve) => receiver.close(resolve));
  }
});
