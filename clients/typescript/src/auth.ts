// The two caller identities the service accepts (docs/security.md):
// - SignedRequests: outside Google Cloud, `Verify-Signature: t=<unix seconds>,v2=<hex HMAC-SHA256>`
//   over the eight-line canonical request, one `v2=` per key while rotating. The service accepts a
//   request once, so every attempt signs again (with a new `t`).
// - GoogleIdToken: on Google Cloud, a Google-signed ID token whose audience is the function's URL,
//   from google-auth-library (an optional peer dependency), refreshed before it expires.
import { createHash, createHmac } from "node:crypto";

/** What an identity signs or authorizes: the request exactly as it is sent. */
export interface OutgoingRequest {
  readonly method: string;
  /** The service's target name: create_verification, dispatch, reconcile or status. */
  readonly target: string;
  readonly url: URL;
  readonly idempotencyKey: string | undefined;
  readonly body: Uint8Array;
}

export interface CallerAuth {
  headers(request: OutgoingRequest): Promise<Record<string, string>> | Record<string, string>;
}

/** The eight lines the MAC covers, joined by `\n` (no trailing newline). */
export function canonicalRequest(request: OutgoingRequest, timestamp: number): string {
  return [
    "v2",
    request.method.toUpperCase(),
    request.target,
    request.url.pathname,
    request.url.search.replace(/^\?/, ""),
    request.idempotencyKey ?? "",
    String(timestamp),
    createHash("sha256").update(request.body).digest("hex"),
  ].join("\n");
}

/** The `Verify-Signature` value: `t=<t>,v2=<hex>` with one `v2=` per secret. */
export function signatureHeader(secrets: readonly Uint8Array[], request: OutgoingRequest, timestamp: number): string {
  const canonical = canonicalRequest(request, timestamp);
  const macs = secrets.map((secret) => "v2=" + createHmac("sha256", secret).update(canonical).digest("hex"));
  return [`t=${timestamp}`, ...macs].join(",");
}

/** The secret bytes of a key as `verifyctl new-key` prints it (`key_id:base64url-secret`), or the bare base64url. */
export function parseSigningKey(key: string): Uint8Array {
  const encoded = key.slice(key.lastIndexOf(":") + 1).trim();
  if (!/^[A-Za-z0-9_-]+={0,2}$/.test(encoded)) {
    throw new Error("a request signing key is key_id:base64url-secret");
  }
  const secret = Buffer.from(encoded, "base64url");
  if (secret.length < 32) {
    throw new Error("a request signing key is at least 32 bytes (key_id:base64url-secret)");
  }
  return new Uint8Array(secret);
}

export class SignedRequests implements CallerAuth {
  readonly #secrets: readonly Uint8Array[];
  readonly #clock: () => number;

  /** `secrets`: the keys' bytes (several while rotating); `clock`: milliseconds since the epoch. */
  constructor(secrets: readonly Uint8Array[], clock: () => number = Date.now) {
    if (secrets.length === 0) throw new Error("SignedRequests needs at least one key");
    this.#secrets = secrets;
    this.#clock = clock;
  }

  /** From the `key_id:base64url-secret` text(s) of REQUEST_SIGNING_KEYS; several (or comma-separated) while rotating. */
  static fromKey(keys: string | readonly string[], clock?: () => number): SignedRequests {
    const list = typeof keys === "string" ? keys.split(",") : keys;
    const secrets = list.map((k) => k.trim()).filter((k) => k !== "").map(parseSigningKey);
    return new SignedRequests(secrets, clock);
  }

  headers(request: OutgoingRequest): Record<string, string> {
    const timestamp = Math.floor(this.#clock() / 1000);
    return { "Verify-Signature": signatureHeader(this.#secrets, request, timestamp) };
  }

  toString(): string {
    return `SignedRequests(${this.#secrets.length} key(s))`; // never the key material
  }
}

/** What GoogleIdToken needs of google-auth-library's IdTokenClient (v9 answers a record, v10+ a Headers). */
export interface IdTokenClientLike {
  getRequestHeaders(url?: string): Promise<Headers | Record<string, string>>;
}

export class GoogleIdToken implements CallerAuth {
  readonly audience: string;
  #client: Promise<IdTokenClientLike> | undefined;

  /**
   * `audience`: the function's URL. `client`: an IdTokenClient of your own (custom credentials);
   * by default google-auth-library's application default credentials: the metadata server on
   * Google Cloud, or the service account key in GOOGLE_APPLICATION_CREDENTIALS.
   */
  constructor(audience: string, client?: IdTokenClientLike) {
    this.audience = audience;
    this.#client = client === undefined ? undefined : Promise.resolve(client);
  }

  async headers(): Promise<Record<string, string>> {
    this.#client ??= defaultIdTokenClient(this.audience);
    let client: IdTokenClientLike;
    try {
      client = await this.#client;
    } catch (error) {
      this.#client = undefined; // a failed set-up (no credentials yet) is tried again next time
      throw error;
    }
    const headers = await client.getRequestHeaders(this.audience);
    const value = headers instanceof Headers ? headers.get("authorization") : (headers["Authorization"] ?? headers["authorization"]);
    if (!value) throw new Error("google-auth-library returned no Authorization header");
    return { Authorization: value };
  }
}

async function defaultIdTokenClient(audience: string): Promise<IdTokenClientLike> {
  let library: typeof import("google-auth-library");
  try {
    library = await import("google-auth-library");
  } catch {
    throw new Error("GoogleIdToken needs google-auth-library: npm install google-auth-library");
  }
  // The IdTokenClient caches the token and fetches a new one shortly before it expires.
  return new library.GoogleAuth().getIdTokenClient(audience);
}
