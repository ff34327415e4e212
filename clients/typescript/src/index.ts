// Client for the signup verification service: create, read, confirm codes, verify webhooks.
export { Client } from "./client.js";
export type { ClientOptions, CreateOptions } from "./client.js";
export { GoogleIdToken, SignedRequests, canonicalRequest, parseSigningKey, signatureHeader } from "./auth.js";
export type { CallerAuth, IdTokenClientLike, OutgoingRequest } from "./auth.js";
export {
  CodeIncorrect,
  DestinationRefused,
  IdempotencyKeyReused,
  InvalidRequest,
  InvalidWebhook,
  NotFound,
  RateLimited,
  Unauthenticated,
  Unavailable,
  VerificationError,
  VerificationGone,
  fromProblem,
} from "./errors.js";
export { secretsOf, verifyWebhook } from "./webhooks.js";
export type { VerifiedWebhook, WebhookHeaders } from "./webhooks.js";
export type * from "./types.js";
