// The gitops-health harness (main.go here) from TypeScript: build or reuse it, and ask it what kstatus and
// Argo CD's health check make of DevicePluginConfig objects.
import { fileURLToPath } from "node:url";
import { buildGoHarness, runTool } from "../go-harness.js";

/** One engine's answer; `error` when the engine failed on the object (Argo CD then shows Unknown). */
export interface EngineVerdict {
  status: string;
  message: string;
  error?: string;
}

/** The harness's line for one object. */
export interface GitopsHealth {
  name: string;
  kstatus: EngineVerdict;
  argocd: EngineVerdict;
}

const BUILD = fileURLToPath(new URL("./build.sh", import.meta.url));
export const ARGOCD_HEALTH_LUA = fileURLToPath(new URL("../../config/argocd/health.lua", import.meta.url));

/** Builds the harness unless the cache holds this version of it; the path of the binary. */
export function buildGitopsHealth(): Promise<string> {
  return buildGoHarness(BUILD);
}

/** What each engine says about each object, in order, with the health check in `healthLua`. */
export async function gitopsHealth(
  binary: string,
  objects: readonly object[],
  options: { healthLua?: string; useOpenLibs?: boolean } = {},
): Promise<GitopsHealth[]> {
  const args = ["--argocd-health", options.healthLua ?? ARGOCD_HEALTH_LUA];
  if (options.useOpenLibs) args.push("--use-open-libs");
  const stdout = await runTool(binary, args, objects.map((o) => JSON.stringify(o)).join("\n"));
  const lines = stdout
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as GitopsHealth);
  if (lines.length !== objects.length) {
    throw new Error(`gitops-health answered ${lines.length} lines for ${objects.length} objects:\n${stdout}`);
  }
  return lines;
}
