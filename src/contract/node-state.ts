// The name of the DeviceNodeState a plugin writes for its (config, node, revision): the plugin finds its
// report again by it after a restart, and the operator tells a current report from a superseded one. And how
// its devices count: every replica of an unhealthy physical device is an unhealthy advertised device.
import { createHash } from "node:crypto";
import type { DeviceNodeStateStatus } from "../api/v1beta1/devicenodestate.js";
import { MAX_NAME_LENGTH } from "./names.js";

/**
 * Hex digits of the pair hash in a DeviceNodeState name: 40 bits, so even thousands of long names that
 * share their readable head (one long config on every node) are unlikely ever to meet.
 */
const PAIR_HASH_LENGTH = 10;
/**
 * Joins the two names in the hashed text. No Kubernetes object name may contain '/', so the text tells
 * every (config, node) pair apart: "a-b" + "c" and "a" + "b-c" hash differently.
 */
const PAIR_SEPARATOR = "/";

/**
 * Name of the DeviceNodeState of a config on a node: `<config>-<node>` cut to fit, then `-` and a hash
 * of the pair. `<config>-<node>` alone is ambiguous (config `a-b` on node `c` and config `a` on node
 * `b-c` would share one report), so the hash is always there, not only when the name is cut. At most
 * 63 characters, so it is a valid object name (DNS subdomain) and, for names without dots, a DNS label.
 * With a revision, the hash covers it too: during a surge upgrade two revisions run on one node, and
 * each reports for itself, so the operator can tell which one the kubelet took.
 */
export function deviceNodeStateName(configName: string, nodeName: string, revision?: string): string {
  const hashed =
    revision === undefined || revision === ""
      ? `${configName}${PAIR_SEPARATOR}${nodeName}`
      : `${configName}${PAIR_SEPARATOR}${nodeName}${PAIR_SEPARATOR}${revision}`;
  const hash = createHash("sha256").update(hashed).digest("hex").slice(0, PAIR_HASH_LENGTH);
  // A cut may end on '.' or '-'; before "-<hash>" that would make an empty or '-'-led DNS label.
  const readable = `${configName}-${nodeName}`
    .slice(0, MAX_NAME_LENGTH - PAIR_HASH_LENGTH - 1)
    .replace(/[^a-z0-9]+$/i, "");
  return readable === "" ? hash : `${readable}-${hash}`;
}

/** More than the reports of any one cluster the operator is sized for (5000 nodes, a few configs). */
const MAX_CACHED_NAMES = 50_000;
const currentNames = new Map<string, string>();

/**
 * Whether a report carries the name the current plugin gives its (config, node) pair. Reports written
 * under another name (the plain `<config>-<node>` of earlier versions) are superseded once the current
 * one exists, and the current one is the one to believe.
 */
export function hasCurrentName(report: {
  metadata: { name: string };
  spec: { configName: string; nodeName: string; revision?: string | undefined };
}): boolean {
  const { configName, nodeName, revision } = report.spec;
  // The operator asks this of every report of a config on every reconcile: thousands of SHA-256s that
  // give the same answers each time. The separator keeps the key as unambiguous as the hashed text.
  const key = `${configName}${PAIR_SEPARATOR}${nodeName}${PAIR_SEPARATOR}${revision ?? ""}`;
  let name = currentNames.get(key);
  if (name === undefined) {
    // Bounded without bookkeeping: starting over costs one round of hashing.
    if (currentNames.size >= MAX_CACHED_NAMES) currentNames.clear();
    name = deviceNodeStateName(configName, nodeName, revision);
    currentNames.set(key, name);
  }
  return report.metadata.name === name;
}

/** How many advertised devices are unhealthy: every replica of an unhealthy physical device. */
export function unhealthyAdvertisedCount(report: DeviceNodeStateStatus): number {
  return report.devices.reduce((sum, d) => (d.health === "Unhealthy" ? sum + d.replicas : sum), 0);
}

/**
 * Physical devices the report lists as held by the other publish path and left out here (0 replicas: the
 * DRA path leaves device-plugin pods' devices out of its slices). They are the node's, not unhealthy.
 */
export function heldOutCount(report: DeviceNodeStateStatus): number {
  return report.devices.reduce((sum, d) => (d.heldBy !== undefined && d.replicas === 0 ? sum + 1 : sum), 0);
}
