// Version information of the dpo build: package version, git commit and supported kubelet API versions.
import { readFileSync } from "node:fs";

export interface BuildInfo {
  version: string;
  gitCommit: string;
}

function readJson(url: URL): Record<string, unknown> | undefined {
  try {
    return JSON.parse(readFileSync(url, "utf8")) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

let cached: BuildInfo | undefined;

/**
 * The package version from package.json and the commit recorded at build time (dist/build-info.json,
 * written by `make build`); DPO_GIT_COMMIT overrides it for images built outside a git checkout.
 */
export function buildInfo(): BuildInfo {
  if (cached) return cached;
  // src/version.ts and dist/version.js both sit one level below the package root.
  const pkg = readJson(new URL("../package.json", import.meta.url));
  const info = readJson(new URL("./build-info.json", import.meta.url));
  const envCommit = process.env["DPO_GIT_COMMIT"];
  cached = {
    version: typeof pkg?.["version"] === "string" ? pkg["version"] : "0.0.0-unknown",
    gitCommit:
      envCommit !== undefined && envCommit !== ""
        ? envCommit
        : typeof info?.["gitCommit"] === "string"
          ? info["gitCommit"]
          : "unknown",
  };
  return cached;
}
