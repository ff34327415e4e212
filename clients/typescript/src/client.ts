// The HTTP client: create (idempotent, retried briefly, with an optional fallback or ordered steps), get, confirm a code.
// Each target of the service is its own deployment with its own URL: `createUrl` serves create and
// the read (GET /<verification_id>), `confirmUrl` the code confirmation. Redirects are never followed
// (an answer that moved is an error, not a place to resend a signed body to).
import { randomUUID } from "node:crypto";

import type { CallerAuth } from "./auth.js";
import { Unavailable, VerificationError, fromProblem } from "./errors.js";
import type { Channel, Confirmed, Created, CreatedVerification, Fallback, Step, VerificationState } from "./types.js";

export interface ClientOptions {
  /** The create_verification function's URL (create and read). */
  readonly createUrl: string;
  /** The confirm_verification function's URL (confirmCode). */
  readonly confirmUrl?: string;
  /** A GoogleIdToken, SignedRequests, or none (the local emulation needs no identity). */
  readonly auth?: CallerAuth;
  /** Per request, in milliseconds (10 000). */
  readonly timeoutMs?: number;
  /** Tries of a create answered 503 or not answered at all (3); a 429 is never tried again. */
  readonly maxAttempts?: number;
  /** A wait longer than this many seconds (2) is not waited for: the error is thrown with its retryAfter. */
  readonly maxRetryWaitSeconds?: number;
  /** How the client waits between tries (tests replace it). */
  readonly sleep?: (seconds: number) => Promise<void>;
}

export interface CreateOptions {
  /** The other channel: `{channel, destination, after_seconds}`; after_seconds 0 sends both at once. */
  readonly fallback?: Fallback;
  /** Where the confirmation pages send the person back to; its origin in RETURN_URL_ALLOWED_ORIGINS. */
  readonly returnUrl?: string;
  /** BCP 47 (`en`, `ja-JP`): the template's closest locale is used. */
  readonly locale?: string;
  readonly template?: string;
  /** The end user's IP address as the site saw it (the per-client velocity limit counts on it). */
  readonly clientIp?: string;
  /** Derive it from your signup row and store it before calling; generated when absent. */
  readonly idempotencyKey?: string;
}

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: unknown;
}

const sleepSeconds = (seconds: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, seconds * 1000));

export class Client {
  readonly createUrl: string;
  readonly confirmUrl: string | undefined;
  readonly #auth: CallerAuth | undefined;
  readonly #timeoutMs: number;
  readonly #maxAttempts: number;
  readonly #maxRetryWait: number;
  readonly #sleep: (seconds: number) => Promise<void>;

  constructor(options: ClientOptions) {
    this.createUrl = withSlash(options.createUrl);
    this.confirmUrl = options.confirmUrl === undefined ? undefined : withSlash(options.confirmUrl);
    this.#auth = options.auth;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#maxAttempts = Math.max(1, options.maxAttempts ?? 3);
    this.#maxRetryWait = options.maxRetryWaitSeconds ?? 2;
    this.#sleep = options.sleep ?? sleepSeconds;
  }

  /**
   * Create a verification (its email, SMS, WhatsApp message or call is queued; with a fallback, the other channel's message
   * too, `after_seconds` later). The key is kept for every retry, so a retried create never sends
   * twice; every VerificationError thrown carries it as `idempotencyKey` (an identity that fails
   * to produce its headers, e.g. without Google credentials, throws before anything is sent).
   * Made for a request handler: a 503 is retried only while its wait is short (maxRetryWaitSeconds),
   * and a 429 is thrown at once (RateLimited, with its retryAfter): it means a message went to this
   * destination moments ago, and creating again after the wait would send another. With a code channel
   * (sms, whatsapp, voice) among the channels the answer's `code_entry_url` is the service's page where
   * the person types the code.
   */
  async create(accountId: string, channel: Channel, destination: string, options: CreateOptions = {}): Promise<Created> {
    const payload: Record<string, unknown> = { account_id: accountId, channel, destination };
    if (options.fallback !== undefined) payload["fallback"] = options.fallback;
    return this.#createFrom(payload, options);
  }

  /**
   * Create a verification that tries its steps in order (at most three, each on a channel of its own):
   * the first at once, each later one at its
   * `after_seconds` or when the step before failed for good, none after a proof. Two steps are the
   * same request as `create` with a `fallback` (the same key replays either). Errors and retries as
   * for `create`.
   */
  async createSteps(accountId: string, steps: readonly Step[], options: Omit<CreateOptions, "fallback"> = {}): Promise<Created> {
    return this.#createFrom({ account_id: accountId, steps }, options);
  }

  async #createFrom(payload: Record<string, unknown>, options: Omit<CreateOptions, "fallback">): Promise<Created> {
    const key = options.idempotencyKey ?? randomUUID();
    const optional = { locale: options.locale, template: options.template, return_url: options.returnUrl, client_ip: options.clientIp };
    for (const [name, value] of Object.entries(optional)) {
      if (value !== undefined) payload[name] = value;
    }
    const body = new TextEncoder().encode(JSON.stringify(payload));
    try {
      return await this.#createWithRetries(body, key);
    } catch (error) {
      if (error instanceof VerificationError) error.idempotencyKey = key;
      throw error;
    }
  }

  async #createWithRetries(body: Uint8Array, key: string): Promise<Created> {
    for (let attempt = 1; ; attempt++) {
      try {
        const answer = await this.#send("POST", new URL(this.createUrl), "create_verification", body, key);
        const created = expect<CreatedVerification>(answer, "verification_id");
        return { ...created, idempotencyKey: key, replayed: answer.headers.get("idempotent-replayed") === "true" };
      } catch (error) {
        if (!(error instanceof Unavailable)) throw error; // a 429 included: see create
        const wait = error.retryAfter ?? attempt;
        if (attempt >= this.#maxAttempts || wait > this.#maxRetryWait) throw error;
        await this.#sleep(Math.max(wait, 1)); // >= 1 s: a re-signed retry in the same second would be a replay
      }
    }
  }

  /** The verification's state now; NotFound for an unknown id. */
  async get(verificationId: string): Promise<VerificationState> {
    const url = new URL(encodeURIComponent(verificationId), this.createUrl);
    const answer = await this.#send("GET", url, "create_verification", new Uint8Array(), undefined);
    return expect<VerificationState>(answer, "verification_id");
  }

  /**
   * Confirm a code the person typed into your own form (or send them to `code_entry_url`): the
   * answer's `proof` is what it proved (the number, by the channel that delivered the code), `proofs`
   * every proof so far. CodeIncorrect (tries
   * left), VerificationGone (it can no longer prove: `get` says why), NotFound.
   */
  async confirmCode(verificationId: string, code: string): Promise<Confirmed> {
    if (this.confirmUrl === undefined) {
      throw new Error("confirmCode needs the confirm_verification URL (new Client({confirmUrl}))");
    }
    const body = new TextEncoder().encode(JSON.stringify({ verification_id: verificationId, code }));
    const answer = await this.#send("POST", new URL(this.confirmUrl), undefined, body, undefined);
    return expect<Confirmed>(answer, "verification_id");
  }

  async #send(method: "GET" | "POST", url: URL, target: string | undefined, body: Uint8Array, key: string | undefined): Promise<Answer> {
    const headers: Record<string, string> = { Accept: "application/json" };
    if (method === "POST") headers["Content-Type"] = "application/json";
    if (key !== undefined) headers["Idempotency-Key"] = key;
    if (this.#auth !== undefined && target !== undefined) {
      // confirm is public: no identity is sent there
      Object.assign(headers, await this.#auth.headers({ method, target, url, idempotencyKey: key, body }));
    }
    let response: Response;
    let text: string;
    try {
      response = await fetch(url, {
        method,
        headers,
        redirect: "manual",
        signal: AbortSignal.timeout(this.#timeoutMs),
        ...(method === "POST" ? { body } : {}),
      });
      text = await response.text();
    } catch (error) {
      const reason = error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error);
      throw new Unavailable(503, "unreachable", "The service could not be reached", reason);
    }
    const parsed = parseJson(text);
    if (response.status < 200 || response.status >= 300) {
      throw fromProblem(response.status, parsed, retryAfter(response.headers));
    }
    return { status: response.status, headers: response.headers, body: parsed };
  }
}

function withSlash(url: string): string {
  return url.endsWith("/") ? url : url + "/";
}

function parseJson(text: string): unknown {
  try {
    return text === "" ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Seconds of a numeric Retry-After (the service sends seconds), else undefined. */
function retryAfter(headers: Headers): number | undefined {
  const value = headers.get("retry-after")?.trim() ?? "";
  return /^[0-9]+$/.test(value) ? Number(value) : undefined;
}

/**
 * The answer's JSON as the documented shape; a success whose body is not that is `Unavailable`
 * (`invalid-answer`): what happened is unknown, so the same request may be retried.
 */
function expect<T>(answer: Answer, field: string): T {
  const body = answer.body;
  if (body !== null && typeof body === "object" && typeof (body as Record<string, unknown>)[field] === "string") {
    return body as T;
  }
  throw new Unavailable(502, "invalid-answer", "The service's answer could not be read");
}
