// Google ID tokens against the real service in production mode (Cloud Run verified the token and
// passes it on; the function checks issuer, expiry and ALLOWED_INVOKERS). The token comes through
// google-auth-library itself, from a local metadata server speaking the GCE metadata protocol
// (GCE_METADATA_HOST), as it would on Google Cloud.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";

import * as svc from "../src/index.js";
import { account, email, env, needs } from "./support.js";

const production = needs("production");
const audiences: string[] = [];
const part = (value: object): string => Buffer.from(JSON.stringify(value)).toString("base64url");

const metadata = createServer((request, response) => {
  const url = new URL(request.url ?? "/", "http://metadata");
  if (request.headers["metadata-flavor"] !== "Google" || url.pathname !== "/computeMetadata/v1/instance/service-accounts/default/identity") {
    response.writeHead(404).end();
    return;
  }
  const audience = url.searchParams.get("audience") ?? "";
  audiences.push(audience);
  const now = Math.floor(Date.now() / 1000);
  const claims = { iss: "https://accounts.google.com", aud: audience, email: env("SVC_INVOKER"), email_verified: true, iat: now, exp: now + 3600, sub: "1" };
  response.writeHead(200, { "Metadata-Flavor": "Google", "Content-Type": "application/text" });
  response.end(`${part({ alg: "RS256", typ: "JWT" })}.${part(claims)}.`); // Cloud Run removes the signature
});

before(async () => {
  if (process.env["SVC_MODE"] !== "production") return;
  await new Promise<void>((resolve) => metadata.listen(0, "127.0.0.1", resolve));
  process.env["GCE_METADATA_HOST"] = `127.0.0.1:${(metadata.address() as AddressInfo).port}`;
  process.env["METADATA_SERVER_DETECTION"] = "assume-present";
  delete process.env["GOOGLE_APPLICATION_CREDENTIALS"];
});

after(async () => {
  if (metadata.listening) await new Promise((resolve) => metadata.close(resolve));
});

test("a token from google-auth-library is accepted, fetched once for its audience and cached", production, async () => {
  const createUrl = env("SVC_CREATE_URL");
  const client = new svc.Client({ createUrl, auth: new svc.GoogleIdToken(createUrl) });
  const created = await client.create(account(), "email", email());
  assert.equal((await client.get(created.verification_id)).status, "pending");
  assert.deepEqual(audiences, [createUrl]);
});

test("without an identity, production refuses the caller", production, async () => {
  const refused = await new svc.Client({ createUrl: env("SVC_CREATE_URL") }).create(account(), "email", email()).catch((e: unknown) => e);
  assert.ok(refused instanceof svc.Unauthenticated, String(refused));
  assert.ok(refused.idempotencyKey);
});

test("an IdTokenClient of the caller's own is used as given", production, async () => {
  const { IdTokenClient } = await import("google-auth-library");
  const minted: string[] = [];
  const idTokenProvider = {
    fetchIdToken: async (audience: string): Promise<string> => {
      minted.push(audience);
      const now = Math.floor(Date.now() / 1000);
      return `${part({ alg: "RS256" })}.${part({ iss: "https://accounts.google.com", aud: audience, email: env("SVC_INVOKER"), exp: now + 3600 })}.`;
    },
  };
  const createUrl = env("SVC_CREATE_URL");
  const own = new IdTokenClient({ targetAudience: createUrl, idTokenProvider });
  const client = new svc.Client({ createUrl, auth: new svc.GoogleIdToken(createUrl, own) });
  await client.create(account(), "email", email());
  await client.create(account(), "email", email());
  assert.deepEqual(minted, [createUrl]);
});
