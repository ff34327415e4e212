// Fails when src/openapi.ts is not what openapi-typescript makes of docs/openapi.yaml now: the
// committed types must never drift from the document. `npm run generate` rewrites the file.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const cli = join(root, "node_modules", "openapi-typescript", "bin", "cli.js");
const scratch = mkdtempSync(join(tmpdir(), "openapi-ts-"));
try {
  const fresh = join(scratch, "openapi.ts");
  execFileSync(process.execPath, [cli, join(root, "..", "..", "docs", "openapi.yaml"), "-o", fresh], { stdio: "pipe" });
  if (readFileSync(fresh, "utf8") !== readFileSync(join(root, "src", "openapi.ts"), "utf8")) {
    console.error("src/openapi.ts is out of date with docs/openapi.yaml: run `npm run generate` in clients/typescript");
    process.exit(1);
  }
  console.log("src/openapi.ts matches docs/openapi.yaml");
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
