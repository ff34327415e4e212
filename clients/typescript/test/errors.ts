// Problem+json answers become typed errors by their slug, then their status.
import assert from "node:assert/strict";
import { test } from "node:test";

import * as svc from "../src/index.js";
import { offline } from "./support.js";

const problem = (slug: string, status: number, extra: object = {}) => ({
  type: `/problems/${slug}`,
  title: "t",
  status,
  ...extra,
});

test("each status and slug has its class; the fields come from the body", offline, () => {
  const cases: Array<[number, unknown, new (...a: never[]) => svc.VerificationError]> = [
    [400, problem("invalid-request", 400, { errors: [{ pointer: "#/destination", detail: "d" }] }), svc.InvalidRequest],
    [401, problem("unauthenticated", 401), svc.Unauthenticated],
    [404, problem("verification-not-found", 404), svc.NotFound],
    [410, problem("verification-finished", 410), svc.VerificationGone],
    [422, problem("idempotency-key-reused", 422), svc.IdempotencyKeyReused],
    [422, problem("code-incorrect", 422, { remaining_attempts: 2 }), svc.CodeIncorrect],
    [422, problem("destination-suppressed", 422), svc.DestinationRefused],
    [429, problem("rate-limited", 429), svc.RateLimited],
    [503, problem("database-unavailable", 503), svc.Unavailable],
    [500, "<html>oops</html>", svc.VerificationError],
  ];
  for (const [status, body, Class] of cases) {
    const error = svc.fromProblem(status, body, 7);
    assert.ok(error instanceof Class && error instanceof svc.VerificationError, `${status} ${String(error)}`);
    assert.equal(error.status, status);
    assert.equal(error.retryAfter, 7);
  }
  const gone = svc.fromProblem(410, problem("verification-finished", 410));
  assert.ok(gone instanceof svc.VerificationGone && gone.reason === "finished");
  const wrong = svc.fromProblem(422, problem("code-incorrect", 422, { remaining_attempts: 2 }));
  assert.ok(wrong instanceof svc.CodeIncorrect && wrong.remainingAttempts === 2);
  const invalid = svc.fromProblem(400, problem("invalid-request", 400, { errors: [{ pointer: "#/destination", detail: "d" }] }));
  assert.deepEqual(invalid.errors, [{ pointer: "#/destination", detail: "d" }]);
  assert.equal(svc.fromProblem(502, null).slug, "http-502");
});
