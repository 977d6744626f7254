// Pure: the DeviceNodeState a plugin reports for its node, built from the runtime's status and device snapshot.
import type { DeviceNodeStateStatus, ReportedDevice } from "../../api/v1beta1/devicenodestate.js";
import {
  API_VERSION as CONFIG_API_VERSION,
  DEVICE_NODE_STATE_KIND,
  DEVICE_NODE_STATE_PLURAL,
  KIND as CONFIG_KIND,
} from "../../api/v1beta1/kinds.js";
import {
  MAX_ATTRIBUTE_KEY,
  MAX_ATTRIBUTE_VALUE,
  MAX_ATTRIBUTES_PER_DEVICE,
} from "../../api/v1beta1/devicenodestate-bounds.js";
import { configLabelValue, LABEL_CONFIG } from "../../contract/names.js";
import { deviceNodeStateName } from "../../contract/node-state.js";
import type { AdvertisedDevice, Health, PhysicalDevice } from "../devices/types.js";
import { draTypedAttributes } from "../devices/attributes.js";
import type { SelfHealRecord } from "../registration/capacity-heal.js";

export const DEVICE_NODE_STATE_API_VERSION = "dpo.dev/v1beta1";
/** Node label of a DeviceNodeState, so `kubectl get dnstate -l dpo.dev/node=<node>` finds a node's reports. */
export const LABEL_NODE = "dpo.dev/node";
/** Field manager of every write the plugin makes. */
export const PLUGIN_FIELD_MANAGER = "dpo-plugin";

// The schema's bounds (devicenodestate.ts); the API server would refuse anything longer.
const MAX_DEVICES = 4096;
const MAX_REASON = 1024;
const MAX_ERROR = 1024;
const MAX_SOCKET = 1024;
const MAX_SELF_HEAL_MESSAGE = 256;

/** When each device last changed health, keyed by physical id. */
export type DeviceSince = ReadonlyMap<string, { readonly health: Health; readonly since: string }>;

/**
 * Carries `since` forward for devices whose health is unchanged and stamps `now` on the rest (new
 * devices, and devices whose health flipped). Devices that are gone are dropped. Reason changes alone
 * do not move `since`: it answers "unhealthy since when".
 */
export function trackSince(prev: DeviceSince, devices: readonly PhysicalDevice[], now: string): DeviceSince {
  const next = new Map<string, { health: Health; since: string }>();
  for (const device of devices) {
    if (next.has(device.id)) continue;
    const before = prev.get(device.id);
    next.set(device.id, {
      health: device.health,
      since: before !== undefined && before.health === device.health ? before.since : now,
    });
  }
  return next;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller: boolean;
  blockOwnerDeletion: boolean;
}

/** The object part of a DeviceNodeState: what the main resource's apply carries. */
export interface DeviceNodeStateObject {
  apiVersion: typeof DEVICE_NODE_STATE_API_VERSION;
  kind: typeof DEVICE_NODE_STATE_KIND;
  metadata: {
    name: string;
    namespace: string;
    labels: Record<string, string>;
    /** Absent only when the config file carries no uid (a hand-written config run by hand). */
    ownerReferences?: OwnerReference[];
  };
  spec: { configName: string; nodeName: string; resourceName: string; revision?: string };
}

export interface NodeStateReport {
  object: DeviceNodeStateObject;
  status: DeviceNodeStateStatus;
}

export interface NodeStateInput {
  namespace: string;
  /** The DevicePluginConfig served (its uid comes with the config file the operator renders). */
  config: { name: string; uid?: string | undefined };
  nodeName: string;
  resourceName: string;
  /** The plugin revision (the pod template's `dpo.dev/revision`); absent when run outside the operator. */
  revision?: string | undefined;
  /** The pod the plugin runs in. */
  podUID?: string | undefined;
  pluginVersion: string;
  kubeletAPIVersion: string;
  configHash?: string;
  registration: {
    registered: boolean;
    /** Serving but waiting for an older instance to go before registering (StandingBy). */
    standingBy?: boolean;
    /** RFC 3339 time `registered` last changed. */
    since: string;
    lastError?: string;
    socket?: string;
    /** The plugin's last self-heal (capacity-heal.ts); absent: never. */
    selfHeal?: SelfHealRecord | undefined;
  };
  physical: readonly PhysicalDevice[];
  advertised: readonly AdvertisedDevice[];
  /**
   * Physical devices the node's other publish path holds (`by`: that path), reported with `heldBy`: with
   * their replicas where this path still advertises them (the device plugin), 0 where it leaves them out
   * (DRA); absent when none are.
   */
  heldElsewhere?: { readonly by: "DevicePlugin" | "DRA"; readonly ids: ReadonlySet<string> } | undefined;
  /** Devices the kubelet has given to containers (PodResources); undefined while unknown. */
  allocated?: number | undefined;
  since: DeviceSince;
  /** RFC 3339; the status's updateTime and the `since` of devices the tracker has not seen. */
  now: string;
}

function bounded(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * One entry per physical device the kubelet is told about, in advertised order, with its replica
 * count, then those the other publish path holds that this one does not advertise (0 replicas); a held
 * device carries `heldBy`. Any other physical device advertised under no id is not reported (the kubelet
 * cannot use it).
 */
function reportedDevices(input: NodeStateInput): ReportedDevice[] {
  const physicalById = new Map<string, PhysicalDevice>();
  for (const device of input.physical) if (!physicalById.has(device.id)) physicalById.set(device.id, device);
  const advertisedById = new Map<string, { first: AdvertisedDevice; count: number }>();
  for (const device of input.advertised) {
    const seen = advertisedById.get(device.physicalId);
    if (seen === undefined) advertisedById.set(device.physicalId, { first: device, count: 1 });
    else seen.count++;
  }
  const entries: { id: string; advertised: AdvertisedDevice | undefined; count: number }[] = [
    ...advertisedById,
  ].map(([id, { first, count }]) => ({ id, advertised: first, count }));
  const held = input.heldElsewhere;
  if (held !== undefined) {
    for (const device of physicalById.values()) {
      if (held.ids.has(device.id) && !advertisedById.has(device.id)) {
        entries.push({ id: device.id, advertised: undefined, count: 0 });
      }
    }
  }
  const devices: ReportedDevice[] = [];
  for (const { id, advertised, count } of entries) {
    if (devices.length >= MAX_DEVICES) break;
    const physical = physicalById.get(id);
    const health = physical?.health ?? advertised?.health ?? "Healthy";
    const reason = physical?.reason ?? advertised?.reason ?? "";
    const numaNode = physical?.numaNode ?? advertised?.numaNode;
    const tracked = input.since.get(id);
    const attributes = physical?.attributes ?? {};
    // The same typing the ResourceSlice publisher applies, so the report and the slice never disagree.
    const typed = draTypedAttributes({ attributes, numaNode });
    devices.push({
      id,
      health,
      ...(reason !== "" ? { reason: bounded(reason, MAX_REASON) } : {}),
      since: tracked !== undefined && tracked.health === health ? tracked.since : input.now,
      ...(numaNode !== undefined ? { numaNode } : {}),
      replicas: count,
      ...(held?.ids.has(id) === true ? { heldBy: held.by } : {}),
      ...(Object.keys(attributes).length > 0 ? { attributes: sortedRecord(attributes) } : {}),
      ...(Object.keys(typed.attributes).length > 0 ? { typedAttributes: { ...typed.attributes } } : {}),
      ...(Object.keys(typed.capacity).length > 0 ? { capacity: { ...typed.capacity } } : {}),
    });
  }
  return devices;
}

/**
 * The attributes in key order, within the schema's bounds: a backend that reports more or longer ones
 * than the API server keeps loses the excess here rather than the whole report.
 */
function sortedRecord(values: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(
    Object.keys(values)
      .filter((key) => key.length <= MAX_ATTRIBUTE_KEY)
      .sort()
      .slice(0, MAX_ATTRIBUTES_PER_DEVICE)
      .map((key) => [key, bounded(values[key] ?? "", MAX_ATTRIBUTE_VALUE)]),
  );
}

/**
 * The DeviceNodeState for a config on a node. The config owns it (garbage collection removes it with
 * the config) as its controller, with blockOwnerDeletion false: setting it true would need permission
 * on the config's finalizers, which a node agent should not have.
 */
export function buildDeviceNodeState(input: NodeStateInput): NodeStateReport {
  const object: DeviceNodeStateObject = {
    apiVersion: DEVICE_NODE_STATE_API_VERSION,
    kind: DEVICE_NODE_STATE_KIND,
    metadata: {
      name: deviceNodeStateName(input.config.name, input.nodeName, input.revision),
      namespace: input.namespace,
      labels: {
        [LABEL_CONFIG]: configLabelValue(input.config.name),
        // Node names are DNS subdomains of up to 253 characters; label values stop at 63.
        [LABEL_NODE]: configLabelValue(input.nodeName),
      },
      ...(input.config.uid !== undefined && input.config.uid !== ""
        ? {
            ownerReferences: [
              {
                apiVersion: CONFIG_API_VERSION,
                kind: CONFIG_KIND,
                name: input.config.name,
                uid: input.config.uid,
                controller: true,
                blockOwnerDeletion: false,
              },
            ],
          }
        : {}),
    },
    spec: {
      configName: input.config.name,
      nodeName: input.nodeName,
      resourceName: input.resourceName,
      ...(input.revision !== undefined && input.revision !== "" ? { revision: input.revision } : {}),
    },
  };
  const { registration } = input;
  const healthy = input.advertised.filter((d) => d.health === "Healthy").length;
  const status: DeviceNodeStateStatus = {
    pluginVersion: input.pluginVersion,
    kubeletAPIVersion: input.kubeletAPIVersion,
    registration: {
      state: registration.registered
        ? "Registered"
        : registration.standingBy === true
          ? "StandingBy"
          : "NotRegistered",
      since: registration.since,
      ...(registration.lastError !== undefined && registration.lastError !== ""
        ? { lastError: bounded(registration.lastError, MAX_ERROR) }
        : {}),
      ...(registration.socket !== undefined && registration.socket !== ""
        ? { socket: bounded(registration.socket, MAX_SOCKET) }
        : {}),
      ...(registration.selfHeal !== undefined ? { selfHeal: selfHealOf(registration.selfHeal) } : {}),
    },
    ...(input.configHash !== undefined && input.configHash !== "" ? { configHash: input.configHash } : {}),
    ...(input.podUID !== undefined && input.podUID !== "" ? { podUID: input.podUID } : {}),
    advertised: input.advertised.length,
    healthy,
    ...(input.allocated !== undefined ? { allocated: input.allocated } : {}),
    devices: reportedDevices(input),
    updateTime: input.now,
  };
  return { object, status };
}

/** Whether two statuses say the same thing; updateTime alone is no news. */
export function sameReport(a: DeviceNodeStateStatus | undefined, b: DeviceNodeStateStatus): boolean {
  if (a === undefined) return false;
  return JSON.stringify({ ...a, updateTime: "" }) === JSON.stringify({ ...b, updateTime: "" });
}

/** Path of a DeviceNodeState (add `/status` for the status subresource). */
export function deviceNodeStatePath(namespace: string, name: string): string {
  return `/apis/${DEVICE_NODE_STATE_API_VERSION}/namespaces/${encodeURIComponent(namespace)}/${DEVICE_NODE_STATE_PLURAL}/${encodeURIComponent(name)}`;
}

/** The body of the status subresource's apply: identity and status only. */
export function statusApplyBody(report: NodeStateReport): {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string };
  status: DeviceNodeStateStatus;
} {
  const { apiVersion, kind, metadata } = report.object;
  return {
    apiVersion,
    kind,
    metadata: { name: metadata.name, namespace: metadata.namespace },
    status: report.status,
  };
}

/** status.registration.selfHeal from the runtime's record. */
function selfHealOf(record: SelfHealRecord): NonNullable<DeviceNodeStateStatus["registration"]["selfHeal"]> {
  return {
    count: record.count,
    lastTime: new Date(record.lastAtMs).toISOString(),
    message: bounded(record.message, MAX_SELF_HEAL_MESSAGE),
    ...(record.healedAtMs !== undefined ? { healedTime: new Date(record.healedAtMs).toISOString() } : {}),
  };
}
