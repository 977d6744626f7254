// The API side's truth of a DRA config's devices: the ResourceSlices its plugins publish, counted per node.
// In DevicePlugin mode the kubelet's Node.status.capacity/allocatable plays this part; both feed the same
// status and upgrade code through DeviceTruth (node-health.ts).
import type { V1ObjectMeta } from "@kubernetes/client-node";
import { LABEL_CONFIG } from "../../contract/names.js";

/**
 * A ResourceSlice (resource.k8s.io/v1) as the operator's cache keeps it: identity and labels, the driver,
 * the node, the pool, and each device's name, whether a taint keeps new claims off it, and
 * allowMultipleAllocations where the API server kept it (dra-sharing.ts reads it). Attributes and
 * capacities are most of a slice and nothing the operator reads; counting devices needs no more.
 */
export interface SlimResourceSlice {
  apiVersion?: string;
  kind?: string;
  metadata: Pick<
    V1ObjectMeta,
    "name" | "uid" | "resourceVersion" | "labels" | "creationTimestamp" | "deletionTimestamp"
  >;
  spec: {
    driver: string;
    nodeName?: string;
    pool: { name: string; generation: number; resourceSliceCount: number };
    /** `tainted`: a NoSchedule or NoExecute taint (an unhealthy device kept in the slice, KEP-5055). */
    devices: { name: string; tainted?: true; allowMultipleAllocations?: true }[];
  };
}

/** Taint effects that keep new allocations off a device (None only informs). */
const BLOCKING_TAINT_EFFECTS = new Set(["NoSchedule", "NoExecute"]);

/** What the ResourceSlice informer keeps of each slice (see SlimResourceSlice). */
export function slimResourceSliceForCache(slice: unknown): SlimResourceSlice {
  const s = slice as {
    apiVersion?: string;
    kind?: string;
    metadata?: V1ObjectMeta;
    spec?: {
      driver?: string;
      nodeName?: string;
      pool?: { name?: string; generation?: number; resourceSliceCount?: number };
      devices?: { name?: string; taints?: { effect?: string }[]; allowMultipleAllocations?: boolean }[];
    };
  };
  const m = s.metadata ?? {};
  const metadata: SlimResourceSlice["metadata"] = {};
  for (const key of [
    "name",
    "uid",
    "resourceVersion",
    "labels",
    "creationTimestamp",
    "deletionTimestamp",
  ] as const) {
    if (m[key] !== undefined && m[key] !== null) (metadata as Record<string, unknown>)[key] = m[key];
  }
  const spec = s.spec ?? {};
  return {
    ...(s.apiVersion === undefined ? {} : { apiVersion: s.apiVersion }),
    ...(s.kind === undefined ? {} : { kind: s.kind }),
    metadata,
    spec: {
      driver: spec.driver ?? "",
      ...(spec.nodeName ? { nodeName: spec.nodeName } : {}),
      pool: {
        name: spec.pool?.name ?? "",
        generation: spec.pool?.generation ?? 0,
        resourceSliceCount: spec.pool?.resourceSliceCount ?? 0,
      },
      devices: (spec.devices ?? []).map((d) => ({
        name: d.name ?? "",
        ...((d.taints ?? []).some((t) => BLOCKING_TAINT_EFFECTS.has(t.effect ?? ""))
          ? { tainted: true as const }
          : {}),
        ...(d.allowMultipleAllocations === true ? { allowMultipleAllocations: true as const } : {}),
      })),
    },
  };
}

/** The `dpo.dev/config` label of a slice (the config whose plugin published it), if any. */
export function sliceConfigLabel(slice: SlimResourceSlice): string | undefined {
  return slice.metadata.labels?.[LABEL_CONFIG];
}

/**
 * Devices published per node by `driver` that new claims can get (tainted ones, an unhealthy device kept
 * in its slice, left out): for each pool of a node, only the slices of the pool's highest
 * generation count (a consumer must ignore the others, resource.k8s.io/v1 ResourcePool), summed over
 * them; a node with several pools of the driver sums the pools. Slices being deleted and slices for no
 * single node (all nodes, a node selector: never dpo's) are left out. A node with no slice is absent.
 * Pure.
 */
export function publishedDevicesByNode(
  slices: readonly SlimResourceSlice[],
  driver: string,
): Map<string, number> {
  const pools = new Map<string, { node: string; generation: number; devices: number }>();
  for (const slice of slices) {
    const { spec } = slice;
    if (spec.driver !== driver || !spec.nodeName || slice.metadata.deletionTimestamp) continue;
    const key = `${spec.nodeName}\u0000${spec.pool.name}`;
    const seen = pools.get(key);
    // A tainted device is in the slice but no new claim gets it: it counts as the kubelet's allocatable does.
    const devices = spec.devices.filter((d) => d.tainted !== true).length;
    if (seen === undefined || spec.pool.generation > seen.generation) {
      pools.set(key, { node: spec.nodeName, generation: spec.pool.generation, devices });
    } else if (spec.pool.generation === seen.generation) {
      seen.devices += devices;
    }
  }
  const byNode = new Map<string, number>();
  for (const pool of pools.values()) byNode.set(pool.node, (byNode.get(pool.node) ?? 0) + pool.devices);
  return byNode;
}
