// `make lint`'s check of the test tree's layout (tools/test-layout/rules.ts): prints each problem and fails
// when there is one.
import { join } from "node:path";
import { testLayoutProblems } from "./rules.js";

const repoRoot = join(import.meta.dirname, "..", "..");

testLayoutProblems(repoRoot).then(
  (problems) => {
    for (const problem of problems) process.stderr.write(`${problem}\n`);
    if (problems.length > 0) {
      process.stderr.write(`test layout: ${problems.length} problem(s)\n`);
      process.exitCode = 1;
    }
  },
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
