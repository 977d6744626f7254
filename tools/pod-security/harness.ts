// The pod-security harness (main.go here) from TypeScript: build or reuse it, and ask the Pod Security
// Standards checks of k8s.io/pod-security-admission what they make of pod templates.
import { fileURLToPath } from "node:url";
import { buildGoHarness, runTool } from "../go-harness.js";
import type { V1ObjectMeta, V1PodSpec } from "@kubernetes/client-node";

/** The levels the harness can check: `privileged` has no checks. */
export type PodSecurityLevel = "baseline" | "restricted";

/** One check that refused the pod: its ID in the policy package, and what admission would say. */
export interface PodSecurityFailure {
  check: string;
  reason: string;
  detail?: string;
}

export interface PodSecurityVerdict {
  level: PodSecurityLevel;
  /** As asked: `latest`, or `v1.N`. */
  version: string;
  allowed: boolean;
  /** How many checks ran: zero would mean nothing was checked, not that the pod is clean. */
  checks: number;
  failures: PodSecurityFailure[];
}

/** The harness's line for one pod: a verdict per level and version, levels first. */
export interface PodSecurityResult {
  name: string;
  verdicts: PodSecurityVerdict[];
}

/** A pod, or a workload's pod template, named for the report. */
export interface PodSecurityInput {
  name: string;
  metadata?: V1ObjectMeta;
  spec: V1PodSpec;
}

const BUILD = fileURLToPath(new URL("./build.sh", import.meta.url));

/** Builds the harness unless the cache holds this version of it; the path of the binary. */
export function buildPodSecurity(): Promise<string> {
  return buildGoHarness(BUILD);
}

/** The verdicts on each pod, in order, at every level and policy version asked for. */
export async function podSecurity(
  binary: string,
  pods: readonly PodSecurityInput[],
  options: { levels?: readonly PodSecurityLevel[]; versions?: readonly string[] } = {},
): Promise<PodSecurityResult[]> {
  const args = [
    "--levels",
    (options.levels ?? ["baseline", "restricted"]).join(","),
    "--versions",
    (options.versions ?? ["latest"]).join(","),
  ];
  const input = pods.map((p) => JSON.stringify({ name: p.name, metadata: p.metadata ?? {}, spec: p.spec }));
  const stdout = await runTool(binary, args, input.join("\n"));
  const lines = stdout
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as PodSecurityResult);
  if (lines.length !== pods.length) {
    throw new Error(`pod-security answered ${lines.length} lines for ${pods.length} pods:\n${stdout}`);
  }
  return lines;
}
