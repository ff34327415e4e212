// Typed errors from the service's problem+json answers (RFC 9457): one class per thing a site does
// differently, chosen by the problem's stable `type` slug (and the status when the slug is new).
import type { FieldError } from "./types.js";

export class VerificationError extends Error {
  override readonly name: string = "VerificationError";
  /** The HTTP status (503 when the service could not be reached). */
  readonly status: number;
  /** The end of the problem `type` URI, e.g. `idempotency-key-reused`. */
  readonly slug: string;
  readonly title: string;
  readonly detail: string | undefined;
  /** Per-field errors: `{pointer: "#/destination", detail}`. */
  readonly errors: readonly FieldError[];
  readonly body: Readonly<Record<string, unknown>>;
  /** Seconds from `Retry-After` (429, 503), when the answer had one. */
  readonly retryAfter: number | undefined;
  /**
   * On every error `create` throws: the Idempotency-Key it was sent under. Retry with
   * `create(..., { idempotencyKey: error.idempotencyKey })`: whether or not the service wrote the
   * verification, the retry never sends a second message.
   */
  idempotencyKey: string | undefined;

  constructor(status: number, slug: string, title: string, detail?: string, body?: Record<string, unknown>, retryAfter?: number) {
    super(`${status} ${slug}: ${detail ?? title}`);
    this.status = status;
    this.slug = slug;
    this.title = title;
    this.detail = detail;
    this.body = body ?? {};
    this.errors = Array.isArray(this.body["errors"]) ? (this.body["errors"] as FieldError[]) : [];
    this.retryAfter = retryAfter;
    this.idempotencyKey = undefined;
  }
}

/** 400: a field is invalid (`errors` names each one). Fix the request; do not retry it. */
export class InvalidRequest extends VerificationError {
  override readonly name = "InvalidRequest";
}

/** 401: the caller's identity or request signature was refused. */
export class Unauthenticated extends VerificationError {
  override readonly name = "Unauthenticated";
}

/** 404: no such verification. */
export class NotFound extends VerificationError {
  override readonly name = "NotFound";
}

/** 410: the verification is finished; only a new one helps (`get` says which state). */
export class VerificationGone extends VerificationError {
  override readonly name = "VerificationGone";
  /** `finished` for a code (whatever the state); `expired`, `superseded` or `locked` for a link. */
  get reason(): string {
    return this.slug.replace(/^verification-/, "");
  }
}

/** 422: this Idempotency-Key was used with another request body. */
export class IdempotencyKeyReused extends VerificationError {
  override readonly name = "IdempotencyKeyReused";
}

/** 422 at create: the destination is refused (`destination-suppressed`, a number's country or type: a landline is for voice only), or the channel is not offered here (`channel-not-offered`). */
export class DestinationRefused extends VerificationError {
  override readonly name = "DestinationRefused";
}

/** 422 at confirm: the code is wrong; `remainingAttempts` tries are left. */
export class CodeIncorrect extends VerificationError {
  override readonly name = "CodeIncorrect";
  get remainingAttempts(): number | undefined {
    const value = this.body["remaining_attempts"];
    return typeof value === "number" ? value : undefined;
  }
}

/**
 * 429: too many for this destination, account or network: a message went there moments ago.
 * `retryAfter`: seconds until a new create may be let through (the client never waits for it: a
 * create after the wait sends another message). Tell the user to use the message already sent; do not
 * show the wait or the detail: it tells whether an address asked for a code.
 */
export class RateLimited extends VerificationError {
  override readonly name = "RateLimited";
}

/**
 * 503: nothing was written; or the service unreachable (slug `unreachable`) or its answer unreadable
 * (`invalid-answer`), when it may have been. Retry later with the same Idempotency-Key.
 */
export class Unavailable extends VerificationError {
  override readonly name = "Unavailable";
}

/** A webhook whose signature, timestamp or body did not verify: answer it 400, do not act on it. */
export class InvalidWebhook extends Error {
  override readonly name = "InvalidWebhook";
}

type ErrorClass = new (...args: ConstructorParameters<typeof VerificationError>) => VerificationError;

const BY_SLUG: Record<string, ErrorClass> = {
  "idempotency-key-reused": IdempotencyKeyReused,
  "code-incorrect": CodeIncorrect,
};
const BY_STATUS: Record<number, ErrorClass> = {
  400: InvalidRequest,
  401: Unauthenticated,
  404: NotFound,
  410: VerificationGone,
  422: DestinationRefused,
  429: RateLimited,
  503: Unavailable,
};

/** The typed error of an answer; a body that is not problem+json still gets its status's class. */
export function fromProblem(status: number, body: unknown, retryAfter?: number): VerificationError {
  const problem: Record<string, unknown> = body !== null && typeof body === "object" && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
  const type = typeof problem["type"] === "string" ? problem["type"] : "";
  const slug = type.replace(/\/+$/, "").split("/").pop() || `http-${status}`;
  const title = typeof problem["title"] === "string" ? problem["title"] : `HTTP ${status}`;
  const detail = typeof problem["detail"] === "string" ? problem["detail"] : undefined;
  const Class = BY_SLUG[slug] ?? BY_STATUS[status] ?? VerificationError;
  return new Class(status, slug, title, detail, problem, retryAfter);
}
