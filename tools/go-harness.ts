// What the Go harnesses under tools/ (gitops-health, promlint, pod-security, olm-validate) share on the
// TypeScript side: build once through their build.sh (which prints the cached binary's path last), then run the
// binary with a JSON document on stdin.
import { execFile } from "node:child_process";

/** Runs `file` with `input` on stdin; rejects with its stderr when it fails. */
export function runTool(file: string, args: readonly string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      [...args],
      { maxBuffer: 16 << 20, timeout: 600_000 },
      (error, stdout, stderr) => {
        if (error)
          reject(new Error(`${file} ${args.join(" ")}: ${error.message}\n${stderr}`, { cause: error }));
        else resolve(stdout);
      },
    );
    child.stdin?.on("error", () => undefined);
    child.stdin?.end(input ?? "");
  });
}

/** Builds a harness unless the cache holds this version of it (its build.sh decides); the binary's path. */
export async function buildGoHarness(buildScript: string): Promise<string> {
  const binary = (await runTool(buildScript, [])).trim().split("\n").at(-1);
  if (!binary) throw new Error(`${buildScript} printed no binary path`);
  return binary;
}
