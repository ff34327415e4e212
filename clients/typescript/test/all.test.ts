// The one entry of `node --test`: every test module in one process, so the tests run one after the
// other (a test that makes the service's database unreachable must not overlap another test), on
// every Node version the package supports.
import "./signing.js";
import "./webhooks.js";
import "./errors.js";
import "./service.js";
import "./truth.js";
import "./signed.js";
import "./google.js";
