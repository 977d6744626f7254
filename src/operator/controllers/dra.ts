// The operator's DRA side of a config (spec.publish: DRA), as pure decisions: the DeviceClass it owns
// (render, and what to do about the one the cache holds), and which ResourceSlices to delete. The writes
// happen in the reconciler.
import type { V1Node, V1ObjectMeta } from "@kubernetes/client-node";
import type { DevicePluginConfig } from "../../api/v1beta1/config.js";
import { draDeviceClassName, draDriverName } from "../../api/v1beta1/spec.js";
import { configLabelValue, DRA_MANAGED_BY, LABEL_CONFIG, LABEL_MANAGED_BY } from "../../contract/names.js";
import { configOwnerReference } from "../model/names.js";
import type { SlimResourceSlice } from "../status/published-devices.js";
import { pluginMayRunOnNode } from "./stale-reports.js";

/** A DeviceClass (resource.k8s.io/v1) as far as the operator reads and writes it. */
export interface DeviceClass {
  apiVersion?: string;
  kind?: string;
  metadata?: V1ObjectMeta;
  spec?: {
    selectors?: { cel?: { expression: string } }[];
    /** KEP-5004: pods asking for this extended resource are given the class's devices. */
    extendedResourceName?: string;
    [key: string]: unknown;
  };
}

/** The CEL selector that matches the config's driver's devices, and nothing else. */
export function driverSelector(driver: string): string {
  return `device.driver == ${JSON.stringify(driver)}`;
}

/**
 * The DeviceClass of a DRA config: named draDeviceClassName, selecting the driver's devices and then the
 * spec's extra selectors (a device must match all), owned by the config as its controller so garbage
 * collection removes it with the config. `extendedResourceName` (from extendedResourceMapping: only where
 * the API server keeps the field) goes into spec.extendedResourceName.
 */
export function renderDeviceClass(
  config: DevicePluginConfig,
  extendedResourceName?: string,
): DeviceClass & { metadata: V1ObjectMeta } {
  const { spec } = config;
  return {
    apiVersion: "resource.k8s.io/v1",
    kind: "DeviceClass",
    metadata: {
      name: draDeviceClassName(spec),
      labels: {
        [LABEL_MANAGED_BY]: DRA_MANAGED_BY,
        [LABEL_CONFIG]: configLabelValue(config.metadata.name),
      },
      ownerReferences: [configOwnerReference(config)],
    },
    spec: {
      selectors: [
        { cel: { expression: driverSelector(draDriverName(spec)) } },
        ...(spec.dra?.deviceClass.selectors ?? []).map((s) => ({ cel: { expression: s.cel.expression } })),
      ],
      ...(extendedResourceName !== undefined ? { extendedResourceName } : {}),
    },
  };
}

/** Whether `cls` names the config of `uid` as its controller: the only classes the operator ever writes. */
export function ownedByConfig(cls: DeviceClass | undefined, uid: string | undefined): boolean {
  if (cls === undefined || uid === undefined) return false;
  return (cls.metadata?.ownerReferences ?? []).some(
    (o) =>
      o.kind === "DevicePluginConfig" &&
      o.apiVersion.startsWith("dpo.dev/") &&
      o.uid === uid &&
      o.controller === true,
  );
}

export type DeviceClassAction =
  | { kind: "None" }
  | { kind: "Create"; object: DeviceClass }
  /** The owned class drifted: replace it, carrying the resourceVersion it was read at. */
  | { kind: "Update"; object: DeviceClass }
  /** A class of the name exists and is not this config's: never touched; the status says so. */
  | { kind: "Conflict"; message: string };

function sameSelectors(desired: DeviceClass, actual: DeviceClass): boolean {
  const expr = (c: DeviceClass) =>
    JSON.stringify((c.spec?.selectors ?? []).map((s) => s.cel?.expression ?? null));
  return expr(desired) === expr(actual);
}

/**
 * What to do about the config's DeviceClass given the one of that name in the cache. Only the parts the
 * operator sets are compared (selectors, extended resource name, its labels, its owner reference): the
 * API server's defaults and anyone's extra labels or annotations are left as they are. A drifted spec
 * (someone edited the selectors, added a config, added or changed an extended resource name) is replaced
 * by the rendered one. Pass `extendedResourceName` only where the API server keeps the field: where it
 * drops it, every pass would see drift and write again.
 */
export function decideDeviceClass(
  config: DevicePluginConfig,
  existing: DeviceClass | undefined,
  extendedResourceName?: string,
): DeviceClassAction {
  const desired = renderDeviceClass(config, extendedResourceName);
  if (existing === undefined) return { kind: "Create", object: desired };
  if (!ownedByConfig(existing, config.metadata.uid)) {
    const owner = existing.metadata?.ownerReferences?.find((o) => o.controller === true);
    return {
      kind: "Conflict",
      message: `DeviceClass ${desired.metadata.name} already exists and is not owned by this config${
        owner ? ` (its controller is ${owner.kind} ${owner.name})` : ""
      }; dpo leaves it alone and creates none: delete it, or set spec.dra.deviceClass.name to another name`,
    };
  }
  const labelsOk = Object.entries(desired.metadata.labels ?? {}).every(
    ([k, v]) => existing.metadata?.labels?.[k] === v,
  );
  const extraSpec = Object.keys(existing.spec ?? {}).some(
    (k) => k !== "selectors" && !(k === "extendedResourceName" && extendedResourceName !== undefined),
  );
  const sameName = existing.spec?.extendedResourceName === extendedResourceName;
  if (labelsOk && !extraSpec && sameName && sameSelectors(desired, existing)) return { kind: "None" };
  return {
    kind: "Update",
    object: {
      ...desired,
      metadata: {
        ...desired.metadata,
        labels: { ...existing.metadata?.labels, ...desired.metadata.labels },
        ...(existing.metadata?.annotations ? { annotations: existing.metadata.annotations } : {}),
        ...(existing.metadata?.resourceVersion ? { resourceVersion: existing.metadata.resourceVersion } : {}),
      },
    },
  };
}

export type SliceDeleteReason = "NotDRA" | "ConfigGone" | "OtherDriver" | "NodeGone" | "NodeNotTargeted";

export interface SliceCleanupInput {
  /** The config's label value (configLabelValue of its name). */
  configLabel: string;
  /** The config as parsed, or undefined when it no longer exists. */
  config: DevicePluginConfig | undefined;
  /** Slices from the cache (others are ignored by their `dpo.dev/config` label). */
  slices: readonly SlimResourceSlice[];
  node: (name: string) => V1Node | undefined;
  /** Whether the node cache holds a complete list: before that, a missing node proves nothing. */
  nodesSynced: boolean;
  /**
   * Nodes where a DRA plugin pod of the config still runs: a config that left DRA keeps their slices
   * (NotDRA) until the pod is gone, so a publish switch stops each node's DRA path before its slices go.
   */
  draPluginOn?: ReadonlySet<string> | undefined;
  limit: number;
}

/**
 * The config's ResourceSlices (by label) that nobody will remove if the operator does not: the plugin
 * never deletes its pool on shutdown, so that a restart or upgrade never empties it.
 * - ConfigGone: the config was deleted: every slice of it goes; a plugin of the old revision still
 *   running re-creates its slice, which the slice's own event brings back here, until it is gone.
 * - NotDRA: it publishes through the device plugin API now: every slice goes but those on nodes where
 *   a DRA plugin pod of it still runs (draPluginOn), which go once the switch has stopped that pod.
 * - OtherDriver: the config's driver name changed; the old driver's pool has no plugin left.
 * - NodeGone / NodeNotTargeted: the node left a synced cache, or the config's plugin can no longer run
 *   there (the same lenient rule as for stale DeviceNodeStates: a NoSchedule taint keeps the pod).
 * In name order, at most `limit`; slices being deleted are not returned again.
 */
export function findSlicesToDelete(input: SliceCleanupInput): {
  slices: { slice: SlimResourceSlice; reason: SliceDeleteReason }[];
  remaining: number;
} {
  const out: { slice: SlimResourceSlice; reason: SliceDeleteReason }[] = [];
  const own = input.slices
    .filter((s) => s.metadata.labels?.[LABEL_CONFIG] === input.configLabel && !s.metadata.deletionTimestamp)
    .sort((a, b) => ((a.metadata.name ?? "") < (b.metadata.name ?? "") ? -1 : 1));
  for (const slice of own) {
    const { config } = input;
    if (config === undefined) {
      out.push({ slice, reason: "ConfigGone" });
      continue;
    }
    if (config.spec.publish !== "DRA") {
      const node = slice.spec.nodeName;
      if (node === undefined || !(input.draPluginOn?.has(node) ?? false))
        out.push({ slice, reason: "NotDRA" });
      continue;
    }
    if (slice.spec.driver !== draDriverName(config.spec)) {
      out.push({ slice, reason: "OtherDriver" });
      continue;
    }
    const nodeName = slice.spec.nodeName;
    if (nodeName === undefined) continue;
    const node = input.nodesSynced ? input.node(nodeName) : undefined;
    if (input.nodesSynced && node === undefined) out.push({ slice, reason: "NodeGone" });
    else if (node !== undefined && !pluginMayRunOnNode(node, config.spec))
      out.push({ slice, reason: "NodeNotTargeted" });
  }
  const limit = Math.max(0, input.limit);
  return { slices: out.slice(0, limit), remaining: Math.max(0, out.length - limit) };
}
