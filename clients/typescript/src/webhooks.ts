// Verifying the service's webhooks (Standard Webhooks: webhook-id, webhook-timestamp,
// webhook-signature) with the `standardwebhooks` reference library, against one or more secrets.
// Verify the raw body exactly as received, before parsing it, and deduplicate on `id` (webhook-id):
// an event whose delivery outcome was ambiguous is sent again, with the same id.
import { Webhook } from "standardwebhooks";

import { InvalidWebhook } from "./errors.js";
import type { WebhookEvent } from "./types.js";

/** A verified event: the body (discriminated by `type`) and its webhook-id, the deduplication key. */
export type VerifiedWebhook = WebhookEvent & { readonly id: string };

/** Node's IncomingHttpHeaders, a fetch Headers, or a plain record. */
export type WebhookHeaders = Headers | Readonly<Record<string, string | readonly string[] | undefined>>;

/** WEBHOOK_SECRET's form (`whsec_a,whsec_b`) or a list of secrets. */
export function secretsOf(setting: string | readonly string[]): string[] {
  const items = typeof setting === "string" ? setting.split(",") : setting;
  return items.map((s) => s.trim()).filter((s) => s !== "");
}

function flatten(headers: WebhookHeaders): Record<string, string> {
  const flat: Record<string, string> = {};
  if (headers instanceof Headers) {
    headers.forEach((value, name) => {
      flat[name.toLowerCase()] = value;
    });
    return flat;
  }
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) flat[name.toLowerCase()] = typeof value === "string" ? value : value.join(", ");
  }
  return flat;
}

/**
 * The verified event, or InvalidWebhook. Any of `secrets` may have signed it (rotation); the
 * timestamp must be within 5 minutes of this machine's clock.
 */
export function verifyWebhook(body: string | Uint8Array, headers: WebhookHeaders, secrets: string | readonly string[]): VerifiedWebhook {
  const flat = flatten(headers);
  const payload = typeof body === "string" ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  for (const secret of secretsOf(secrets)) {
    let document: unknown;
    try {
      document = new Webhook(secret).verify(payload, flat);
    } catch {
      continue; // a bad signature, header, secret or body: all mean "not this secret"
    }
    if (document === null || typeof document !== "object" || typeof (document as { type?: unknown }).type !== "string") {
      throw new InvalidWebhook("the body is not a webhook event");
    }
    return { ...(document as WebhookEvent), id: flat["webhook-id"] ?? "" };
  }
  throw new InvalidWebhook("no valid signature (or the timestamp is outside 5 minutes)");
}
