// Builders for aggregateStatus's tests: a config, a small cluster (Nodes, plugin pods, DeviceNodeState
// reports) described node by node in a NodeSetup, the DaemonSet, the whole input; and readers of the
// conditions in the status.
import type { V1DaemonSet, V1Node, V1NodeSystemInfo, V1Pod, V1Taint } from "@kubernetes/client-node";
import { DevicePluginConfigSchema, type DevicePluginConfig } from "../../../../src/api/v1beta1/config.js";
import type { DeviceNodeState } from "../../../../src/api/v1beta1/devicenodestate.js";
import type { Condition, DevicePluginConfigStatus } from "../../../../src/api/v1beta1/status.js";
import { deviceNodeStateName } from "../../../../src/contract/node-state.js";
import { pluginConfigHash } from "../../../../src/operator/render/configmap.js";
import type { AggregateStatusInput } from "../../../../src/operator/status/aggregate.js";

export const RESOURCE = "hardware-vendor.example/foo";
export const T0 = new Date("2025-03-01T10:00:00.123Z");
export const T1 = new Date("2025-03-01T10:05:00Z");

export function config(replicas = 1, name = "example-foo"): DevicePluginConfig {
  return DevicePluginConfigSchema.parse({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name, uid: "uid-1", generation: 2 },
    spec: {
      resourceName: RESOURCE,
      backend: { type: "Mock", mock: { devices: 4, idPrefix: "foo" } },
      sharing: replicas > 1 ? { strategy: "TimeSlicing", replicas } : { strategy: "None" },
      nodeSelector: { "feature.example/foo": "true" },
    },
  });
}

export interface NodeSetup {
  name: string;
  /** Kubelet counts; undefined leaves the resource out of the node status. */
  capacity?: number | undefined;
  allocatable?: number | undefined;
  pod?: { ready?: boolean; hash?: string; waiting?: string } | "none";
  report?:
    | {
        state?: "Registered" | "NotRegistered";
        lastError?: string;
        /** Physical devices foo-0..foo-(devices-1); the listed indexes are unhealthy. */
        devices?: number;
        unhealthy?: number[];
        /** Override of the advertised/healthy counts the plugin reports. */
        replicas?: number;
        /** The kubelet's allocated count, as the plugin reports it; absent by default (unknown). */
        allocated?: number;
      }
    | "none";
  labels?: Record<string, string>;
  taints?: V1Taint[];
  /** Node.status.nodeInfo.kubeletVersion; absent when unset. */
  kubeletVersion?: string;
}

export interface World {
  nodes: V1Node[];
  pods: V1Pod[];
  reports: DeviceNodeState[];
}

/** A cluster where each node defaults to a healthy plugin with 4 devices (times the config's replicas). */
export function world(cfg: DevicePluginConfig, setups: NodeSetup[]): World {
  const hash = pluginConfigHash(cfg);
  const replicas = cfg.spec.sharing.strategy === "TimeSlicing" ? (cfg.spec.sharing.replicas ?? 1) : 1;
  const w: World = { nodes: [], pods: [], reports: [] };
  for (const s of setups) {
    const reportSetup = s.report === "none" ? undefined : (s.report ?? {});
    const physical = reportSetup?.devices ?? 4;
    const unhealthy = new Set(reportSetup?.unhealthy ?? []);
    const healthyAdvertised = (physical - unhealthy.size) * replicas;
    const capacity = "capacity" in s ? s.capacity : physical * replicas;
    const allocatable = "allocatable" in s ? s.allocatable : healthyAdvertised;
    w.nodes.push({
      metadata: { name: s.name, labels: s.labels ?? { "feature.example/foo": "true" } },
      spec: { taints: s.taints ?? [] },
      status: {
        ...(s.kubeletVersion !== undefined
          ? { nodeInfo: { kubeletVersion: s.kubeletVersion } as V1NodeSystemInfo }
          : {}),
        capacity: { cpu: "4", ...(capacity !== undefined ? { [RESOURCE]: String(capacity) } : {}) },
        allocatable: { cpu: "4", ...(allocatable !== undefined ? { [RESOURCE]: String(allocatable) } : {}) },
      },
    });
    if (s.pod !== "none") {
      const ready = s.pod?.ready ?? true;
      w.pods.push({
        metadata: {
          name: `dpo-${cfg.metadata.name}-${s.name}`,
          labels: { "dpo.dev/config": cfg.metadata.name },
          annotations: { "dpo.dev/config-hash": s.pod?.hash ?? hash },
        },
        spec: { nodeName: s.name, containers: [] },
        status: {
          phase: "Running",
          conditions: [{ type: "Ready", status: ready ? "True" : "False" }],
          ...(s.pod?.waiting
            ? {
                containerStatuses: [
                  {
                    name: "plugin",
                    image: "x",
                    imageID: "",
                    ready: false,
                    restartCount: 3,
                    state: { waiting: { reason: s.pod.waiting } },
                  },
                ],
              }
            : {}),
        },
      });
    }
    if (reportSetup !== undefined) {
      const devices = Array.from({ length: physical }, (_, i) => ({
        id: `foo-${i}`,
        health: unhealthy.has(i) ? ("Unhealthy" as const) : ("Healthy" as const),
        ...(unhealthy.has(i) ? { reason: "MarkedUnhealthy" } : {}),
        since: "2025-03-01T09:00:00Z",
        numaNode: i % 2,
        replicas,
      }));
      w.reports.push({
        apiVersion: "dpo.dev/v1beta1",
        kind: "DeviceNodeState",
        metadata: { name: deviceNodeStateName(cfg.metadata.name, s.name), namespace: "dpo-system" },
        spec: { configName: cfg.metadata.name, nodeName: s.name, resourceName: RESOURCE },
        status: {
          pluginVersion: "0.1.0",
          kubeletAPIVersion: "v1beta1",
          registration: {
            state: reportSetup.state ?? "Registered",
            since: "2025-03-01T09:00:00Z",
            ...(reportSetup.lastError ? { lastError: reportSetup.lastError } : {}),
          },
          configHash: hash,
          advertised: physical * replicas,
          healthy: healthyAdvertised,
          ...(reportSetup.allocated !== undefined ? { allocated: reportSetup.allocated } : {}),
          devices,
          updateTime: "2025-03-01T09:00:00Z",
        },
      });
    }
  }
  return w;
}

export function daemonSet(
  cfg: DevicePluginConfig,
  opts: { desired: number; updated?: number; generation?: number; observed?: number; hash?: string },
): V1DaemonSet {
  return {
    metadata: { name: `dpo-${cfg.metadata.name}`, namespace: "dpo-system", generation: opts.generation ?? 1 },
    spec: {
      selector: { matchLabels: { "dpo.dev/config": cfg.metadata.name } },
      template: { metadata: { annotations: { "dpo.dev/config-hash": opts.hash ?? pluginConfigHash(cfg) } } },
    },
    status: {
      currentNumberScheduled: opts.desired,
      desiredNumberScheduled: opts.desired,
      numberMisscheduled: 0,
      numberReady: opts.desired,
      updatedNumberScheduled: opts.updated ?? opts.desired,
      observedGeneration: opts.observed ?? opts.generation ?? 1,
    },
  };
}

export function input(
  cfg: DevicePluginConfig,
  setups: NodeSetup[],
  extra: Partial<AggregateStatusInput> = {},
): AggregateStatusInput {
  const w = world(cfg, setups);
  const targeted = setups.filter((s) => s.labels === undefined && s.taints === undefined).length;
  return {
    config: cfg,
    configHash: pluginConfigHash(cfg),
    ...w,
    daemonSet: daemonSet(cfg, { desired: targeted }),
    previous: undefined,
    now: T0,
    ...extra,
  };
}

export function condition(status: DevicePluginConfigStatus, type: string): Condition {
  const found = status.conditions?.find((c) => c.type === type);
  if (!found) throw new Error(`no ${type} condition in ${JSON.stringify(status.conditions)}`);
  return found;
}

/** type=status/reason for each condition, in order: the shape the e2e tests and kubectl wait read. */
export function conditionSummary(status: DevicePluginConfigStatus): string[] {
  return (status.conditions ?? []).map((c) => `${c.type}=${c.status}/${c.reason}`);
}

export const three = (over: Partial<Record<"n1" | "n2" | "n3", Partial<NodeSetup>>> = {}): NodeSetup[] =>
  (["n1", "n2", "n3"] as const).map((name) => ({ name, ...over[name] }));

/** The default config with `spec` merged over it. */
export function configWith(spec: Record<string, unknown>): DevicePluginConfig {
  return DevicePluginConfigSchema.parse({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: "example-foo", uid: "uid-1", generation: 2 },
    spec: {
      resourceName: RESOURCE,
      backend: { type: "Mock", mock: { devices: 4, idPrefix: "foo" } },
      nodeSelector: { "feature.example/foo": "true" },
      ...spec,
    },
  });
}

/** The three nodes, each with its kubelet version. */
export const versions = (v1: string, v2: string, v3: string): NodeSetup[] =>
  three({ n1: { kubeletVersion: v1 }, n2: { kubeletVersion: v2 }, n3: { kubeletVersion: v3 } });
