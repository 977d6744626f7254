// The processless plugin mode's pure parts: the timings it plays a plugin with, where they come from, and
// what a plugin pod's `dpo plugin` would register, advertise and report, read from the pod and its config.
import type { V1Pod } from "@kubernetes/client-node";
import { loadDevicePluginConfig } from "../../src/api/validate.js";
import type { DevicePluginConfig } from "../../src/api/v1beta1/config.js";
import { configHash, PLUGIN_CONFIG_KEY } from "../../src/contract/plugin-config.js";
import { MOCK_DEVICE_IDS_ENV, mockDevices } from "../../src/plugin-runtime/backends/mock.js";
import { resourceEnvName } from "../../src/plugin-runtime/devices/env.js";
import { advertiseDevices } from "../../src/plugin-runtime/devices/sharing.js";
import type { AdvertisedDevice, PhysicalDevice } from "../../src/plugin-runtime/devices/types.js";
import type { ContainerAllocateResponse, Device } from "../../src/plugin-runtime/proto/index.js";
import { socketFileName, socketPrefix } from "../../src/plugin-runtime/registration/sockets.js";
import { resolveContainerEnv } from "./plugin-pod.js";

/**
 * How long a processless plugin takes for what a real one does, in one place. Every figure is the p50 of
 * the 100-node `make bench-upgrade` run of 2026-11-26 with real plugin processes (docs/benchmarks.md,
 * "Between two steps that follow each other on a node", Replace and Surge), on this machine:
 *
 * - `startToRegisteredMs`: "new plugin started → registered 351 ms" (Replace; Surge 356 ms): the process
 *   starting, reading its config, serving its socket and the kubelet's Register round trip.
 * - `stopMs`: "allocatable 0 (Node) → old plugin exited 25 ms" after the pod's deletion: SIGTERM to exit,
 *   the final node report and the end of ListAndWatch included.
 *
 * What the kubelet does with a registration is not in here: the simulated device manager answers at
 * once, and the Node's status follows it at once or on the kubelet's sync period
 * (`nodeStatusUpdateIntervalMs`, 10 s on a real kubelet), as for plugins run as processes.
 */
export const PROCESSLESS_TIMING = { startToRegisteredMs: 351, stopMs: 25 } as const;
export type ProcesslessTiming = { readonly startToRegisteredMs: number; readonly stopMs: number };

/** The plugin API version a processless plugin registers with (the only one the kubelet speaks). */
export const PROCESSLESS_KUBELET_API_VERSION = "v1beta1";

/** Everything a processless plugin needs from its pod and config, as the real plugin reads them. */
export interface ProcesslessPluginSpec {
  namespace: string;
  nodeName: string;
  config: { name: string; uid?: string | undefined };
  resourceName: string;
  revision: string | undefined;
  podUID: string | undefined;
  /** The hash the real plugin reports: of the config file it reads (the simulated node's copy). */
  configHash: string;
  physical: PhysicalDevice[];
  advertised: AdvertisedDevice[];
}

export type SpecResult = { ok: true; spec: ProcesslessPluginSpec } | { ok: false; problem: string };

/**
 * What the plugin of `pod` runs with: node, namespace, revision and pod uid from the container's env (the
 * flags' variables NODE_NAME, POD_NAMESPACE, DPO_REVISION and POD_UID, as the operator renders them), and
 * its devices from `configText` (the file the plugin would read, host paths already moved). Only the Mock
 * backend has devices without hardware or files to watch; anything else is a problem naming the field.
 */
export function processlessPluginSpec(pod: V1Pod, configText: string): SpecResult {
  const where = `pod ${pod.metadata?.namespace ?? ""}/${pod.metadata?.name ?? ""}`;
  const container = pod.spec?.containers[0];
  if (container === undefined) return { ok: false, problem: `${where}: spec.containers: no container` };
  const { env } = resolveContainerEnv(pod, container);
  const loaded = loadDevicePluginConfig(configText);
  if (!loaded.ok) {
    const first = loaded.errors[0];
    return { ok: false, problem: `${where}: config ${first?.path ?? ""}: ${first?.message ?? "invalid"}` };
  }
  const config: DevicePluginConfig = loaded.value;
  const mock = config.spec.backend.mock;
  if (config.spec.backend.type !== "Mock" || mock === undefined) {
    return {
      ok: false,
      problem: `${where}: spec.backend.type: the processless mode runs only Mock plugins, got ${config.spec.backend.type}`,
    };
  }
  if (mock.healthFile !== undefined) {
    return {
      ok: false,
      problem: `${where}: spec.backend.mock.healthFile: not followed in the processless mode (no process watches it)`,
    };
  }
  if (config.spec.cdi.enabled) {
    return {
      ok: false,
      problem: `${where}: spec.cdi.enabled: no CDI spec is written in the processless mode`,
    };
  }
  const namespace = env["POD_NAMESPACE"] ?? "";
  if (namespace === "")
    return { ok: false, problem: `${where}: env POD_NAMESPACE: required for the node report` };
  const physical = mockDevices(mock);
  return {
    ok: true,
    spec: {
      namespace,
      nodeName: env["NODE_NAME"] ?? pod.spec?.nodeName ?? "",
      config: { name: config.metadata.name, uid: config.metadata.uid },
      resourceName: config.spec.resourceName,
      revision: nonEmpty(env["DPO_REVISION"]),
      podUID: nonEmpty(env["POD_UID"]),
      configHash: configHash({ [PLUGIN_CONFIG_KEY]: configText }),
      physical,
      advertised: advertiseDevices(physical, config.spec.sharing),
    },
  };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}

/** The socket file name the plugin would serve: its resource's prefix, unique per plugin start. */
export function processlessSocketName(resourceName: string, startedAtMs: number, sequence: number): string {
  return socketFileName(socketPrefix(resourceName), startedAtMs, sequence);
}

/** ListAndWatch's device list, as the plugin's server sends it (toProtoDevice). */
export function listAndWatchDevices(advertised: readonly AdvertisedDevice[]): Device[] {
  return advertised.map((d) => ({
    ID: d.id,
    health: d.health,
    topology: d.numaNode === undefined ? undefined : { nodes: [{ ID: d.numaNode }] },
  }));
}

/**
 * The plugin's answer to Allocate for one container of a Mock plugin without CDI: the Mock backend's
 * variable with the physical ids, and the resource's variable with the advertised ids. An id the plugin
 * does not advertise is an error, as the real plugin refuses it (INVALID_ARGUMENT).
 */
export function processlessAllocation(
  resourceName: string,
  advertised: readonly AdvertisedDevice[],
  ids: readonly string[],
): ContainerAllocateResponse {
  const byId = new Map(advertised.map((d) => [d.id, d]));
  const unknown = ids.filter((id) => !byId.has(id));
  if (unknown.length > 0) throw new Error(`unknown device ids for ${resourceName}: ${unknown.join(", ")}`);
  const physical = [...new Set(ids.map((id) => byId.get(id)!.physicalId))];
  return {
    envs: { [MOCK_DEVICE_IDS_ENV]: physical.join(","), [resourceEnvName(resourceName)]: ids.join(",") },
    mounts: [],
    devices: [],
    annotations: {},
    cdiDevices: [],
  };
}
