// verifyWebhook: events signed by the standardwebhooks library verify, with any of several secrets
// (rotation); tampered, stale, malformed or foreign ones are InvalidWebhook.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";

import { Webhook } from "standardwebhooks";

import { InvalidWebhook, verifyWebhook } from "../src/index.js";
import { offline } from "./support.js";

const OLD = "whsec_" + randomBytes(24).toString("base64");
const NEW = "whsec_" + randomBytes(24).toString("base64");
const EVENT = JSON.stringify({
  type: "verification.verified",
  timestamp: "2026-12-01T12:00:00.000Z",
  data: { verification_id: "0193a6a4-3c1e-7b4e-9f1a-2d3c4b5a6f70", status: "verified", verified_channel: "sms", verified_via: "code" },
});

function signed(secrets: string[], body: string, at = new Date(), id = "msg_1"): Record<string, string> {
  const signatures = secrets.map((s) => new Webhook(s).sign(id, at, body)).join(" ");
  return { "Webhook-Id": id, "Webhook-Timestamp": String(Math.floor(at.getTime() / 1000)), "Webhook-Signature": signatures };
}

test("an event signed by the reference library verifies and is typed by its type", offline, () => {
  const event = verifyWebhook(Buffer.from(EVENT), signed([NEW], EVENT), NEW);
  assert.equal(event.id, "msg_1");
  assert.equal(event.type, "verification.verified");
  if (event.type === "verification.verified") assert.equal(event.data.verified_channel, "sms"); // narrowed by type
});

test("rotation: any configured secret, any of the signatures", offline, () => {
  assert.equal(verifyWebhook(EVENT, signed([OLD, NEW], EVENT), NEW).id, "msg_1");
  assert.equal(verifyWebhook(EVENT, signed([OLD], EVENT), `${NEW},${OLD}`).type, "verification.verified");
  assert.equal(verifyWebhook(EVENT, signed([OLD], EVENT), [NEW, OLD]).type, "verification.verified");
  const asFetchHeaders = new Headers(signed([NEW], EVENT));
  assert.equal(verifyWebhook(new TextEncoder().encode(EVENT), asFetchHeaders, [OLD, NEW]).id, "msg_1");
});

const tampered: Array<[string, (h: Record<string, string>, b: string) => [Record<string, string>, string]]> = [
  ["a changed body", (h, b) => [h, b.replace("sms", "email")]],
  ["another webhook-id", (h, b) => [{ ...h, "Webhook-Id": "msg_2" }, b]],
  ["no signature", (h, b) => [Object.fromEntries(Object.entries(h).filter(([k]) => k !== "Webhook-Signature")), b]],
  ["a malformed signature", (h, b) => [{ ...h, "Webhook-Signature": "v1,%%%" }, b]],
  ["a garbage signature", (h, b) => [{ ...h, "Webhook-Signature": "garbage" }, b]],
];
for (const [name, spoil] of tampered) {
  test(`${name} is refused`, offline, () => {
    const [headers, body] = spoil(signed([NEW], EVENT), EVENT);
    assert.throws(() => verifyWebhook(body, headers, NEW), InvalidWebhook);
  });
}

test("a stale event, a foreign secret, no secret or a body that is not an event is refused", offline, () => {
  const old = new Date(Date.now() - 10 * 60 * 1000);
  assert.throws(() => verifyWebhook(EVENT, signed([NEW], EVENT, old), NEW), InvalidWebhook);
  assert.throws(() => verifyWebhook(EVENT, signed([OLD], EVENT), NEW), InvalidWebhook);
  assert.throws(() => verifyWebhook(EVENT, signed([NEW], EVENT), ""), InvalidWebhook);
  const list = "[1,2,3]";
  assert.throws(() => verifyWebhook(list, signed([NEW], list), NEW), /not a webhook event/);
});
