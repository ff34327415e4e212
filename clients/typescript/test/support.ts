// What the Node tests share. The service-facing tests run against the real service, started by
// tests/integration/clients/test_typescript_client.py (the functions on loopback ports, a real
// PostgreSQL), which passes its URLs and the mode it configured in the environment:
//   SVC_MODE            open | signed | production
//   SVC_CREATE_URL, SVC_CONFIRM_URL, SVC_DISPATCH_URL (open)
//   SVC_HARNESS_URL     test-only reads of the database (an SMS code, a link token, row counts) and
//                       a switch that makes the database unreachable, as the Python tests do in-process
//   SVC_WEBHOOK_PORT, SVC_WEBHOOK_SECRET (open), SVC_SIGNING_KEY (signed), SVC_INVOKER (production)
// Without SVC_MODE (a plain `npm test`) only the tests that need no service run.
import { randomUUID } from "node:crypto";

export type Mode = "open" | "signed" | "production";

const mode = process.env["SVC_MODE"];

/** Options for a test that needs the service in `wanted` mode. */
export function needs(wanted: Mode): { skip: string | false } {
  return { skip: mode === wanted ? false : `needs the service in ${wanted} mode (tests/integration/clients/test_typescript_client.py)` };
}

/** Options for a test that needs no service: it runs once, in a plain `npm test` or the open run. */
export const offline: { skip: string | false } = {
  skip: mode === undefined || mode === "open" ? false : "runs once, with the open service",
};

export function env(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === "") throw new Error(`${name} is not set`);
  return value;
}

export function email(tag = "ts"): string {
  return `ada.${tag}.${randomUUID().slice(0, 8)}@example.com`;
}

export function account(): string {
  return `acct-ts-${randomUUID().slice(0, 8)}`;
}

/** A call of the test harness (SVC_HARNESS_URL): its JSON answer. */
export async function harness(path: string, method: "GET" | "POST" = "GET"): Promise<Record<string, unknown>> {
  const response = await fetch(new URL(path.replace(/^\//, ""), env("SVC_HARNESS_URL")), { method });
  const body = (await response.json()) as Record<string, unknown>;
  if (!response.ok) throw new Error(`harness ${path}: ${response.status} ${JSON.stringify(body)}`);
  return body;
}

export async function count(path: string): Promise<number> {
  return Number((await harness(path))["count"]);
}

/** RFC 3339, UTC, `Z`, milliseconds: the one timestamp shape the service sends. */
export const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
