// promtool (build.sh here) from TypeScript: build or reuse it, then run one of its commands.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { buildGoHarness } from "../go-harness.js";

const BUILD = fileURLToPath(new URL("./build.sh", import.meta.url));

/** Builds promtool unless the cache holds this version of it; the path of the binary. */
export function buildPromtool(): Promise<string> {
  return buildGoHarness(BUILD);
}

export interface PromtoolResult {
  code: number;
  /** stdout and stderr together: promtool writes its verdicts to both. */
  output: string;
}

/** Runs `promtool <args>` in `cwd`; a non-zero exit is a result (promtool's verdict), not an error. */
export function promtool(binary: string, args: readonly string[], cwd: string): Promise<PromtoolResult> {
  return new Promise((resolve, reject) => {
    execFile(binary, [...args], { cwd, maxBuffer: 16 << 20, timeout: 120_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === "number" ? error.code : -1) : 0;
      if (code === -1) reject(new Error(`${binary} ${args.join(" ")}: ${error?.message}\n${stderr}`));
      else resolve({ code, output: stdout + stderr });
    });
  });
}
