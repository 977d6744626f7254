// This node's devices as a DRA driver names them: a device name per physical device (the name its
// ResourceSlice will publish and allocation results carry), its health, and the CDI edits it needs.
import { createHash } from "node:crypto";
import type { CdiContainerEdits } from "../../cdi/spec.js";
import type { DeviceBackend } from "../devices/backend.js";
import { resourceEnvName } from "../devices/env.js";
import type { ContainerAllocation, Health, PhysicalDevice } from "../devices/types.js";
import { draTypedAttributes } from "../devices/attributes.js";
import type { Sharing } from "../../api/v1beta1/spec.js";
import { shareDevice } from "./sharing.js";
import type { PoolDevice } from "./slices.js";

/** One device of this node, as the DRA plugin prepares it. */
export interface DraNodeDevice {
  /** The device's name in this node's pool: a DNS label (see draDeviceName). */
  readonly name: string;
  /** The backend's id of the physical device behind it. */
  readonly physicalId: string;
  readonly health: Health;
  /** Why the device is unhealthy; empty when there is nothing to say. */
  readonly reason: string;
  /** What a container runtime must do for this device alone (the backend's CDI edits). */
  readonly containerEdits: CdiContainerEdits;
}

/** Longest device name resource.k8s.io accepts (a DNS label). */
export const MAX_DRA_DEVICE_NAME_LENGTH = 63;
const DNS_LABEL = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

/**
 * The DRA device name of a physical device. ResourceSlice device names must be DNS labels, backend ids
 * are not always (`ttyUSB0`, `0000:3b:00.0`): an id that is a label stays as it is; any other is
 * lower-cased, every run of other characters becomes `-`, and a hash of the exact id is appended, so two
 * ids that differ only in case or punctuation still get names of their own. Deterministic, so a
 * restarted plugin and the ResourceSlice publisher agree. Pure.
 */
export function draDeviceName(physicalId: string): string {
  if (physicalId.length <= MAX_DRA_DEVICE_NAME_LENGTH && DNS_LABEL.test(physicalId)) return physicalId;
  const hash = createHash("sha256").update(physicalId).digest("hex").slice(0, 8);
  const base = physicalId
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .slice(0, MAX_DRA_DEVICE_NAME_LENGTH - hash.length - 1)
    .replace(/^-+|-+$/g, "");
  return base === "" ? `d-${hash}` : `${base}-${hash}`;
}

/**
 * The backend's current devices as DRA devices; a device whose CDI edits the backend does not know
 * (it vanished between the two calls) is left out, so a claim for it is refused as unknown.
 */
export function draDevicesOf(backend: Pick<DeviceBackend, "devices" | "cdiContainerEdits">): DraNodeDevice[] {
  const out: DraNodeDevice[] = [];
  for (const device of backend.devices()) {
    const containerEdits = backend.cdiContainerEdits(device.id);
    if (containerEdits === undefined) continue;
    out.push({
      name: draDeviceName(device.id),
      physicalId: device.id,
      health: device.health,
      reason: device.reason,
      containerEdits,
    });
  }
  return out;
}

/**
 * What the device plugin's Allocate gives a container for `physicalIds` (the backend's env, mounts and
 * device nodes, and `DPO_<RESOURCE>` naming the ids), as CDI edits: the DRA plugin adds them to each
 * request, so a pod sees the same on both paths (a config switched between them). Annotations have no
 * CDI container edit and are left out. Pure.
 */
export function allocationEdits(
  allocation: ContainerAllocation,
  resourceName: string,
  physicalIds: readonly string[],
): CdiContainerEdits {
  const env = { ...allocation.envs, [resourceEnvName(resourceName)]: physicalIds.join(",") };
  return {
    env: Object.entries(env).map(([name, value]) => `${name}=${value}`),
    ...(allocation.mounts.length === 0
      ? {}
      : {
          mounts: allocation.mounts.map((m) => ({
            hostPath: m.hostPath,
            containerPath: m.containerPath,
            options: ["bind", m.readOnly ? "ro" : "rw"],
          })),
        }),
    ...(allocation.devices.length === 0
      ? {}
      : {
          deviceNodes: allocation.devices.map((d) => ({
            path: d.containerPath,
            ...(d.hostPath === d.containerPath ? {} : { hostPath: d.hostPath }),
            permissions: d.permissions,
          })),
        }),
  };
}

/**
 * The node's devices as the ResourceSlice publisher takes them: DRA name, health and the typed
 * attributes and capacities (NUMA node included), shared as the config's `sharing` says (sharing.ts:
 * time-slicing lets several claims hold one device), and why an unhealthy one is. Unhealthy ones are
 * kept here; the publisher taints them or leaves them out. Pure.
 */
export function draPoolDevices(physical: readonly PhysicalDevice[], sharing?: Sharing): PoolDevice[] {
  return physical.map((device) => {
    const typed = draTypedAttributes({ attributes: device.attributes, numaNode: device.numaNode });
    const pooled: PoolDevice = {
      name: draDeviceName(device.id),
      health: device.health,
      reason: device.reason,
      attributes: typed.attributes,
      capacity: typed.capacity,
    };
    return sharing === undefined ? pooled : shareDevice(pooled, sharing);
  });
}
