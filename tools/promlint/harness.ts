// The promlint harness (main.go here) from TypeScript: build or reuse it, and ask Prometheus' own linter
// what it makes of a /metrics exposition.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";

export interface PromlintProblem {
  metric: string;
  text: string;
}

/** The linter's verdict on one exposition. */
export interface PromlintResult {
  source: string;
  /** Metric families parsed: an empty exposition has no problems either. */
  families: number;
  problems: PromlintProblem[];
  error?: string;
}

const BUILD = fileURLToPath(new URL("./build.sh", import.meta.url));

function run(file: string, args: string[], input?: string): Promise<{ stdout: string; code: number }> {
  return new Promise((resolve, reject) => {
    const child = execFile(file, args, { maxBuffer: 16 << 20, timeout: 600_000 }, (error, stdout, stderr) => {
      // Exit status 1 is the harness's own answer (an input it could not parse), in stdout.
      if (error && (error.code !== 1 || stdout === "")) {
        reject(new Error(`${file} ${args.join(" ")}: ${error.message}\n${stderr}`, { cause: error }));
      } else {
        resolve({ stdout, code: error ? 1 : 0 });
      }
    });
    child.stdin?.on("error", () => undefined);
    child.stdin?.end(input ?? "");
  });
}

/** Builds the harness unless the cache holds this version of it; the path of the binary. */
export async function buildPromlint(): Promise<string> {
  const binary = (await run(BUILD, [])).stdout.trim().split("\n").at(-1);
  if (!binary) throw new Error(`${BUILD} printed no binary path`);
  return binary;
}

/** What promlint says about one exposition (the text a /metrics endpoint served), named `source`. */
export async function promlint(binary: string, source: string, exposition: string): Promise<PromlintResult> {
  const { stdout } = await run(binary, ["-"], exposition);
  const result = JSON.parse(stdout.trim()) as PromlintResult;
  return { ...result, source };
}

/**
 * Problems promlint finds in prom-client's default process metrics, which dpo serves as they are:
 * these three gauges end in `_total`, a known and still open issue of prom-client
 * (prometheus/client_js#283). Renaming them here would break every Node.js dashboard that reads them.
 * Nothing of dpo's own may appear here.
 */
export const PROM_CLIENT_DEFAULT_PROBLEMS: readonly PromlintProblem[] = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
].map((metric) => ({ metric, text: 'non-counter metrics should not have "_total" suffix' }));
