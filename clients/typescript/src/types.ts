// The service's shapes, named: every type comes from docs/openapi.yaml through the generated
// openapi.ts (`npm run generate`; `npm run check:openapi` fails when the two drift apart).
import type { components } from "./openapi.js";

type Schemas = components["schemas"];

export type Channel = Schemas["Channel"];
export type CreateVerificationRequest = Schemas["CreateVerificationRequest"];
/** The other message channel: sent `after_seconds` after create unless confirmed first; 0 = both at once. */
export type Fallback = Schemas["Fallback"];
export type Step = Schemas["Step"];
/** A create's answer as the service sends it. */
export type CreatedVerification = Schemas["Verification"];
/** GET /<verification_id>. `channel` is the primary channel requested; `proofs` is what was proved. */
export type VerificationState = Schemas["VerificationState"];
/** What one secret proved: the email's link the address (`email`, `link`), a code the number (`sms`, `whatsapp` or `voice`: the channel that delivered it, `code`). */
export type Proof = Schemas["Proof"];
export type Delivery = Schemas["Delivery"];
export type DeliveryStatus = Schemas["DeliveryStatus"];
export type DeliveryReason = Schemas["DeliveryReason"];
export type ReasonCategory = Schemas["ReasonCategory"];
export type Confirmed = Schemas["Confirmed"];
export type Problem = Schemas["Problem"];
export type FieldError = NonNullable<Problem["errors"]>[number];

/** Any webhook event, discriminated by `type` (docs/openapi.yaml's `webhooks` section). */
export type WebhookEvent = Schemas["WebhookEvent"];
export type WebhookEventType = WebhookEvent["type"];
export type VerificationVerifiedEvent = Schemas["VerificationVerifiedEvent"];
export type VerificationProvedEvent = Schemas["VerificationProvedEvent"];
export type VerificationExpiredEvent = Schemas["VerificationExpiredEvent"];
export type VerificationLockedEvent = Schemas["VerificationLockedEvent"];
export type DeliveryFailedEvent = Schemas["DeliveryFailedEvent"];
export type DeliveryDeliveredEvent = Schemas["DeliveryDeliveredEvent"];
export type DeliveryBouncedEvent = Schemas["DeliveryBouncedEvent"];
export type WebhookTestEvent = Schemas["WebhookTestEvent"];

/** A create's answer with what the client adds: the key it was sent under, and whether it was a replay. */
export type Created = CreatedVerification & {
  /** Keep it with your signup row: a later create with it never sends a second message. */
  readonly idempotencyKey: string;
  /** True when the service answered with the stored answer of an earlier request with this key. */
  readonly replayed: boolean;
};
