// Builders for decideRollout's tests: a config (OLD and NEW revisions of it), a Node with its rollout
// labels and record, a DaemonSet in a role as the API server returns it, a plugin pod and its report; and
// the writes of a decision printed one line each.
import type { V1DaemonSet, V1Node, V1Pod } from "@kubernetes/client-node";
import { DevicePluginConfigSchema, type DevicePluginConfig } from "../../../../src/api/v1beta1/config.js";
import type { DeviceNodeState } from "../../../../src/api/v1beta1/devicenodestate.js";
import type { DevicePluginConfigSpecInput } from "../../../../src/api/v1beta1/spec.js";
import {
  pluginRevision,
  renderPluginDaemonSet,
  renderRevision,
  type RenderContext,
} from "../../../../src/operator/render/index.js";
import { nodeKeys, type PlacementRole } from "../../../../src/operator/model/targeting.js";
import {
  ANNOTATION_UPGRADE_STATE,
  roleOfDaemonSet,
  type LegacyNodeRecord,
  type UpgradeState,
} from "../../../../src/operator/upgrade/daemonset-state.js";
import { serializeNodeRecord, type NodeRecord } from "../../../../src/operator/upgrade/node-labels.js";
import {
  decideRollout,
  type RolloutDecision,
  type RolloutInput,
} from "../../../../src/operator/upgrade/rollout.js";

export const ctx = {
  namespace: "dpo-system",
  operatorImage: "dpo:test",
  pluginServiceAccount: "dpo-plugin",
  registrationMode: "kubelet" as const,
};
export const NOW = Date.parse("2026-11-23T12:00:00Z");
export const RESOURCE = "vendor.example/foo";

export function config(spec: Partial<DevicePluginConfigSpecInput> = {}): DevicePluginConfig {
  return DevicePluginConfigSchema.parse({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: "foo", uid: "uid-foo", generation: 1 },
    spec: { resourceName: RESOURCE, backend: { type: "Mock", mock: { devices: 4 } }, ...spec },
  });
}

export const OLD = config({ plugin: { logLevel: "info" } });
export const NEW = config({ plugin: { logLevel: "debug" } });
/** NEW under an explicit Replace: the same revision (spec.upgrade is the operator's). */
export const NEW_REPLACE = config({ plugin: { logLevel: "debug" }, upgrade: { strategy: "Replace" } });

export const KEYS = nodeKeys("foo");

export interface NodeOptions {
  kubeletVersion?: string;
  allocatable?: number;
  /** The revision and surge labels; absent by default (a node no upgrade touched). */
  revision?: string;
  surge?: string;
  record?: Omit<NodeRecord, "from" | "to"> & { from?: string; to?: string };
}

export function node(
  name: string,
  kubeletVersion = "v1.37.0",
  allocatable = 4,
  options: NodeOptions = {},
): V1Node {
  const labels: Record<string, string> = {};
  if (options.revision !== undefined) labels[KEYS.revision] = options.revision;
  if (options.surge !== undefined) labels[KEYS.surge] = options.surge;
  const annotations: Record<string, string> = {};
  if (options.record !== undefined) {
    annotations[KEYS.upgrade] = serializeNodeRecord({ from: oldRev, to: newRev, ...options.record });
  }
  return {
    metadata: { name, resourceVersion: `rv-${name}`, labels, annotations },
    status: { allocatable: { [RESOURCE]: String(allocatable) }, nodeInfo: { kubeletVersion } as never },
  };
}

/** A DaemonSet as the API server returns it: uid, resourceVersion, creation time. */
export function stored(
  c: DevicePluginConfig,
  role: PlacementRole,
  state?: Partial<UpgradeState>,
  created = "2026-11-01T00:00:00Z",
): V1DaemonSet {
  const ds = renderPluginDaemonSet(c, ctx, {
    role,
    ...(state ? { annotations: { [ANNOTATION_UPGRADE_STATE]: JSON.stringify(state) } } : {}),
  });
  const revision = pluginRevision(c, ctx);
  ds.metadata = {
    ...ds.metadata,
    uid: `ds-${revision}`,
    resourceVersion: "7",
    creationTimestamp: new Date(created),
  };
  return ds;
}

/** A DaemonSet an older operator placed by node name: exactly `only`, or every node but `except`. */
export function legacyStored(
  c: DevicePluginConfig,
  placement: { only: string[] } | { except: string[] },
  nodes?: Record<string, LegacyNodeRecord>,
  created = "2026-11-01T00:00:00Z",
): V1DaemonSet {
  const ds = stored(c, "only" in placement ? "moving" : "base", undefined, created);
  const terms =
    "only" in placement
      ? placement.only.length === 0
        ? [{ matchExpressions: [{ key: "dpo.dev/no-node-matches-this", operator: "Exists" }] }]
        : placement.only.map((n) => ({
            matchFields: [{ key: "metadata.name", operator: "In", values: [n] }],
          }))
      : [
          {
            matchFields: placement.except.map((n) => ({
              key: "metadata.name",
              operator: "NotIn",
              values: [n],
            })),
          },
        ];
  const spec = ds.spec!.template.spec!;
  if ("except" in placement && placement.except.length === 0) delete spec.affinity;
  else
    spec.affinity = {
      nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms } },
    };
  if (nodes !== undefined) {
    ds.metadata!.annotations = {
      [ANNOTATION_UPGRADE_STATE]: JSON.stringify({ from: oldRev, rollingBack: false, nodes }),
    };
  }
  return ds;
}

export function pod(ds: V1DaemonSet, nodeName: string, phase = "Running"): V1Pod {
  return {
    metadata: {
      name: `${ds.metadata?.name}-${nodeName}`,
      uid: `pod-${ds.metadata?.uid}-${nodeName}`,
      labels: ds.spec?.template.metadata?.labels,
      ownerReferences: [
        { apiVersion: "apps/v1", kind: "DaemonSet", name: ds.metadata!.name!, uid: ds.metadata!.uid! },
      ],
    },
    spec: { nodeName, containers: [] },
    status: { phase },
  };
}

export function report(c: DevicePluginConfig, p: V1Pod, registered = true): DeviceNodeState {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DeviceNodeState",
    metadata: { name: `r-${p.metadata?.uid}` },
    spec: {
      configName: "foo",
      nodeName: p.spec!.nodeName!,
      resourceName: RESOURCE,
      revision: pluginRevision(c, ctx),
    },
    status: {
      pluginVersion: "test",
      kubeletAPIVersion: "v1beta1",
      registration: { state: registered ? "Registered" : "NotRegistered", since: "2026-11-23T11:00:00Z" },
      podUID: p.metadata!.uid!,
      advertised: 4,
      healthy: 4,
      devices: [],
      updateTime: "2026-11-23T11:00:00Z",
    },
  };
}

/** The rollout's input as the reconcile step builds it: the config rendered once into its revision. */
export function decide(
  input: Partial<Omit<RolloutInput, "desired">> & { config: DevicePluginConfig; render?: RenderContext },
): RolloutDecision {
  const { config, render = ctx, ...rest } = input;
  return decideRollout({
    desired: renderRevision(config, render),
    daemonSets: [],
    nodes: [],
    pods: [],
    reports: [],
    now: NOW,
    ...rest,
  });
}

/** Revisions by name in what the tests print. */
export function revName(rev: string | null | undefined): string {
  if (rev === null || rev === undefined) return "-";
  return rev === oldRev ? "OLD" : rev === newRev ? "NEW" : rev === "" ? "legacy" : rev;
}

/**
 * The writes, one line each: `Create NEW moving`, `Update OLD base`, `Delete OLD`, and node patches
 * `Node a revision=NEW surge=-` naming only the labels they change, with `+record` when the patch writes
 * the node's upgrade record.
 */
export function written(d: RolloutDecision): string[] {
  return d.writes.map((w) => {
    if (w.kind === "Delete") return `Delete ${revName(w.revision)}`;
    if (w.kind === "DeleteSlices") return `DeleteSlices ${w.node}`;
    if (w.kind === "PatchNode") {
      const labels = w.patch.body.metadata.labels ?? {};
      const parts = [`Node ${w.patch.node}`];
      if (KEYS.revision in labels) parts.push(`revision=${revName(labels[KEYS.revision])}`);
      if (KEYS.surge in labels) parts.push(`surge=${revName(labels[KEYS.surge])}`);
      if (w.patch.body.metadata.annotations?.[KEYS.upgrade] !== undefined) parts.push("+record");
      const taints = w.patch.body.spec?.taints;
      if (taints !== undefined) {
        parts.push((taints ?? []).some((t) => t.key === KEYS.replace) ? "+fence" : "-fence");
      }
      return parts.join(" ");
    }
    const rev = w.daemonSet.metadata?.labels?.["dpo.dev/revision"];
    return `${w.kind} ${revName(rev ?? "")} ${roleOfDaemonSet(w.daemonSet)}`;
  });
}

/** The record a node patch writes. */
export function recordWritten(d: RolloutDecision, name: string): NodeRecord | undefined {
  for (const w of d.writes) {
    if (w.kind !== "PatchNode" || w.patch.node !== name) continue;
    const text = w.patch.body.metadata.annotations?.[KEYS.upgrade];
    if (typeof text === "string") return JSON.parse(text) as NodeRecord;
  }
  return undefined;
}

export const oldRev = pluginRevision(OLD, ctx);
export const newRev = pluginRevision(NEW, ctx);

export const FRESH = { from: oldRev, rollingBack: false };
