// Pure: this node's ResourceSlices (resource.k8s.io/v1) — their names, the desired objects for the
// node's devices, and the plan that turns what the API server has into them. The publisher does the I/O.
import { createHash } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import {
  configLabelValue,
  DRA_MANAGED_BY,
  LABEL_CONFIG,
  LABEL_MANAGED_BY,
  LABEL_SHARED_ALLOCATIONS,
} from "../../contract/names.js";
import type { Health } from "../devices/types.js";
import { quantityAmount, type DraAttributeValue, type DraCapacityValue } from "../devices/attributes.js";
import type { CapacityRequestPolicy } from "./sharing.js";

export const RESOURCE_SLICE_API_VERSION = "resource.k8s.io/v1";
export const RESOURCE_SLICE_KIND = "ResourceSlice";
/** The cluster-scoped collection of ResourceSlices. */
export const RESOURCE_SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices";
/** Most devices in one ResourceSlice (ResourceSliceMaxDevices in k8s.io/api resource/v1). */
export const RESOURCE_SLICE_MAX_DEVICES = 128;
/** Field selectors the API server supports on resourceslices (ResourceSliceSelectorNodeName/Driver). */
export const SLICE_FIELD_NODE_NAME = "spec.nodeName";
export const SLICE_FIELD_DRIVER = "spec.driver";

/** resource.k8s.io/v1 DeviceCapacity: a request policy only on a device that allows multiple allocations. */
export interface SliceCapacity extends DraCapacityValue {
  readonly requestPolicy?: CapacityRequestPolicy;
}

/** resource.k8s.io/v1 Device, the members this project publishes. */
export interface SliceDevice {
  readonly name: string;
  readonly attributes?: Readonly<Record<string, DraAttributeValue>>;
  readonly capacity?: Readonly<Record<string, SliceCapacity>>;
  /** Set on a time-sliced device (sharing.ts): several claims may hold it at once. */
  readonly allowMultipleAllocations?: boolean;
  /** Device taints (KEP-5055): an unhealthy device's, see taints.ts. `timeAdded` is RFC 3339. */
  readonly taints?: readonly {
    readonly key: string;
    readonly value?: string;
    readonly effect: string;
    readonly timeAdded?: string;
  }[];
}

/** resource.k8s.io/v1 ResourceSlice as this project writes and reads it. */
export interface ResourceSlice {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: {
    readonly name: string;
    readonly labels?: Readonly<Record<string, string>>;
    readonly resourceVersion?: string;
    readonly uid?: string;
  };
  readonly spec: {
    readonly driver: string;
    readonly nodeName?: string;
    readonly pool: {
      readonly name: string;
      readonly generation: number;
      readonly resourceSliceCount: number;
    };
    readonly devices?: readonly SliceDevice[];
  };
}

/** A device of the node as the publisher sees it: its DRA name, health and typed attributes. */
export interface PoolDevice extends SliceDevice {
  readonly health: Health;
  /** Why the device is unhealthy: the value of its taint where the slice keeps unhealthy devices. */
  readonly reason?: string;
}

/**
 * The name of the `index`th slice of a driver's pool on a node: `dpo-` and the first 16 hex digits of
 * sha256(`<driver>/<node>/<index>`). Deterministic, so a restarted plugin and the operator find the
 * same objects without listing by generateName; short and always a DNS subdomain. Pure.
 */
export function resourceSliceName(driver: string, node: string, index: number): string {
  const hash = createHash("sha256").update(`${driver}/${node}/${index}`).digest("hex").slice(0, 16);
  return `dpo-${hash}`;
}

/** The labels of every slice of a config. Pure. */
export function sliceLabels(configName: string): Record<string, string> {
  return { [LABEL_CONFIG]: configLabelValue(configName), [LABEL_MANAGED_BY]: DRA_MANAGED_BY };
}

export interface PoolInput {
  readonly driver: string;
  readonly node: string;
  readonly configName: string;
  readonly devices: readonly PoolDevice[];
}

/**
 * The published devices of the pool, split into slices of at most 128: healthy devices only (a new
 * claim must not get an unhealthy one), sorted by name, empty attribute and capacity maps left out.
 * A node without healthy devices still has one slice with no devices, so consumers see the pool is
 * empty rather than unknown. Pure.
 */
export function sliceDeviceChunks(devices: readonly PoolDevice[]): SliceDevice[][] {
  const published = devices
    .filter((device) => device.health === "Healthy")
    .map((device): SliceDevice => {
      const out: {
        name: string;
        attributes?: SliceDevice["attributes"];
        capacity?: SliceDevice["capacity"];
        allowMultipleAllocations?: boolean;
      } = { name: device.name };
      if (device.attributes !== undefined && Object.keys(device.attributes).length > 0) {
        out.attributes = device.attributes;
      }
      if (device.capacity !== undefined && Object.keys(device.capacity).length > 0) {
        out.capacity = device.capacity;
      }
      if (device.allowMultipleAllocations === true) out.allowMultipleAllocations = true;
      return out;
    })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const chunks: SliceDevice[][] = [];
  for (let i = 0; i < published.length; i += RESOURCE_SLICE_MAX_DEVICES) {
    chunks.push(published.slice(i, i + RESOURCE_SLICE_MAX_DEVICES));
  }
  return chunks.length === 0 ? [[]] : chunks;
}

/**
 * The pool's slices at `generation`, without resourceVersions. `chunks` are the devices of each slice:
 * by default sliceDeviceChunks (healthy devices only); with taints, taints.ts's publishedDeviceChunks. A
 * slice with a device sent with allowMultipleAllocations says so in a label (LABEL_SHARED_ALLOCATIONS), so
 * the operator can tell an API server that dropped the field from a config that does not share. Pure.
 */
export function desiredSlices(
  input: PoolInput,
  generation: number,
  chunks: readonly (readonly SliceDevice[])[] = sliceDeviceChunks(input.devices),
): ResourceSlice[] {
  return chunks.map((devices, index) => ({
    apiVersion: RESOURCE_SLICE_API_VERSION,
    kind: RESOURCE_SLICE_KIND,
    metadata: {
      name: resourceSliceName(input.driver, input.node, index),
      labels: devices.some((d) => d.allowMultipleAllocations === true)
        ? { ...sliceLabels(input.configName), [LABEL_SHARED_ALLOCATIONS]: "true" }
        : sliceLabels(input.configName),
    },
    spec: {
      driver: input.driver,
      nodeName: input.node,
      pool: { name: input.node, generation, resourceSliceCount: chunks.length },
      devices,
    },
  }));
}

export type SliceOp =
  | { readonly op: "create"; readonly slice: ResourceSlice }
  /** A PUT carrying the existing object's resourceVersion: a concurrent change is a 409. */
  | { readonly op: "update"; readonly slice: ResourceSlice }
  | { readonly op: "delete"; readonly name: string; readonly resourceVersion?: string };

export interface SlicePlan {
  /** The pool generation the slices have once the plan is applied. */
  readonly generation: number;
  /** In order: deletes of slices that cannot be updated in place, creates and updates, then obsolete deletes. */
  readonly ops: readonly SliceOp[];
}

/** Fields an update cannot change (driver, node and pool name are immutable). */
function immutableMatches(existing: ResourceSlice, want: ResourceSlice): boolean {
  return (
    existing.spec.driver === want.spec.driver &&
    existing.spec.nodeName === want.spec.nodeName &&
    existing.spec.pool.name === want.spec.pool.name
  );
}

/** Whether the existing slice already says what `want` says, generation aside. */
function sameContent(existing: ResourceSlice, want: ResourceSlice): boolean {
  const labels = existing.metadata.labels ?? {};
  const labelsOk =
    Object.entries(want.metadata.labels ?? {}).every(([k, v]) => labels[k] === v) &&
    labels[LABEL_SHARED_ALLOCATIONS] === want.metadata.labels?.[LABEL_SHARED_ALLOCATIONS];
  return (
    labelsOk &&
    immutableMatches(existing, want) &&
    existing.spec.pool.resourceSliceCount === want.spec.pool.resourceSliceCount &&
    isDeepStrictEqual(normalizeDevices(existing.spec.devices), normalizeDevices(want.spec.devices))
  );
}

/**
 * Devices as compared: what the API server returns drops empty maps, and so does the builder; quantities
 * by amount. An API server whose DRAConsumableCapacity gate is off (1.35 defaults) drops
 * allowMultipleAllocations and request policies, so a time-sliced pool differs after every write there
 * and is written once per pass: the operator's DRASharing condition says the devices are exclusive.
 */
function normalizeDevices(devices: readonly SliceDevice[] | undefined): unknown {
  return (devices ?? []).map((d) => ({
    name: d.name,
    attributes: d.attributes !== undefined && Object.keys(d.attributes).length > 0 ? d.attributes : undefined,
    capacity:
      d.capacity !== undefined && Object.keys(d.capacity).length > 0
        ? Object.fromEntries(Object.entries(d.capacity).map(([k, c]) => [k, normalizeCapacity(c)]))
        : undefined,
    allowMultipleAllocations: d.allowMultipleAllocations === true ? true : undefined,
    taints:
      d.taints !== undefined && d.taints.length > 0
        ? d.taints.map((t) => ({
            key: t.key,
            value: t.value ?? "",
            effect: t.effect,
            timeAdded: t.timeAdded,
          }))
        : undefined,
  }));
}

function normalizeCapacity(capacity: SliceCapacity): unknown {
  const policy = capacity.requestPolicy;
  if (policy === undefined) return quantityAmount(capacity.value);
  return {
    value: quantityAmount(capacity.value),
    default: quantityAmount(policy.default),
    validValues: policy.validValues?.map(quantityAmount),
  };
}

/**
 * What to do so the API server holds exactly the desired slices of this node's pool. `existing` is every
 * slice of this driver on this node (listed by field selector); `lastGeneration` is the highest generation
 * this process has written (0 at start). When everything matches and all slices share one generation the
 * plan is empty; otherwise every desired slice is written at a generation above any seen, so the pool
 * generation never goes backwards across restarts and consumers never mix two versions of the pool.
 * Slices that are not desired (fewer devices, a foreign name) are deleted after the writes. `chunks` as
 * for desiredSlices. Pure.
 */
export function planSlices(
  input: PoolInput,
  existing: readonly ResourceSlice[],
  lastGeneration = 0,
  chunks: readonly (readonly SliceDevice[])[] = sliceDeviceChunks(input.devices),
): SlicePlan {
  const byName = new Map(existing.map((slice) => [slice.metadata.name, slice]));
  const current = Math.max(lastGeneration, ...existing.map((slice) => slice.spec.pool.generation));
  const probe = desiredSlices(input, current, chunks);
  const wanted = new Set(probe.map((slice) => slice.metadata.name));
  const generations = new Set(existing.map((slice) => slice.spec.pool.generation));
  const unchanged =
    existing.length === probe.length &&
    generations.size === 1 &&
    generations.has(current) &&
    probe.every((want) => {
      const have = byName.get(want.metadata.name);
      return have !== undefined && sameContent(have, want);
    });
  if (unchanged) return { generation: current, ops: [] };

  const generation = current + 1;
  const replaced: SliceOp[] = [];
  const writes: SliceOp[] = [];
  for (const want of desiredSlices(input, generation, chunks)) {
    const have = byName.get(want.metadata.name);
    if (have === undefined) {
      writes.push({ op: "create", slice: want });
    } else if (!immutableMatches(have, want)) {
      replaced.push({
        op: "delete",
        name: have.metadata.name,
        resourceVersion: have.metadata.resourceVersion,
      });
      writes.push({ op: "create", slice: want });
    } else {
      writes.push({
        op: "update",
        slice: { ...want, metadata: { ...want.metadata, resourceVersion: have.metadata.resourceVersion } },
      });
    }
  }
  const obsolete: SliceOp[] = existing
    .filter((slice) => !wanted.has(slice.metadata.name))
    .map((slice) => slice.metadata.name)
    .sort()
    .map((name) => ({ op: "delete", name, resourceVersion: byName.get(name)?.metadata.resourceVersion }));
  return { generation, ops: [...replaced, ...writes, ...obsolete] };
}
