// A whole plugin upgrade at 1000 and 5000 nodes with 63-character names, driven through decideRollout
// alone: its writes are applied to objects in memory, and a minimal DaemonSet controller and kubelet
// answer them (a pod where a DaemonSet's node affinity selects the node, a Registered report for it,
// allocatable back at once). What is measured is what the rollout writes: the largest object, and the
// writes per node, which must not grow with the number of nodes (ADR 0004).
import type { V1DaemonSet, V1Node, V1NodeSelectorRequirement, V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { DevicePluginConfigSchema, type DevicePluginConfig } from "../../../../src/api/v1beta1/config.js";
import { standbyWanted } from "../../../../src/contract/node-upgrade.js";
import type { DeviceNodeState } from "../../../../src/api/v1beta1/devicenodestate.js";
import type { DevicePluginConfigSpecInput } from "../../../../src/api/v1beta1/spec.js";
import { pluginRevision, renderRevision } from "../../../../src/operator/render/index.js";
import { NO_REVISION, nodeKeys } from "../../../../src/operator/model/targeting.js";
import { revisionOfDaemonSet } from "../../../../src/operator/upgrade/daemonset-state.js";
import { decideRollout } from "../../../../src/operator/upgrade/rollout.js";

const ctx = {
  namespace: "dpo-system",
  operatorImage: "dpo:test",
  pluginServiceAccount: "dpo-plugin",
  registrationMode: "kubelet" as const,
};
const RESOURCE = "vendor.example/gpu";
/** Long enough for every label key the operator derives from it to reach its 63-character bound. */
const CONFIG_NAME = `gpu-${"x".repeat(70)}.example.com`;

function config(spec: Partial<DevicePluginConfigSpecInput>): DevicePluginConfig {
  return DevicePluginConfigSchema.parse({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: CONFIG_NAME, uid: "uid-gpu", generation: 1 },
    spec: { resourceName: RESOURCE, backend: { type: "Mock", mock: { devices: 4 } }, ...spec },
  });
}

/** A node name of exactly 63 characters, cloud style. */
function nodeName(i: number): string {
  const head = `ip-10-${Math.floor(i / 256) % 256}-${i % 256}-${i}.eu-west-1.compute.internal`;
  return head.padEnd(63, "x");
}

function matches(req: V1NodeSelectorRequirement, labels: Record<string, string>): boolean {
  const value = labels[req.key];
  switch (req.operator) {
    case "In":
      return value !== undefined && (req.values ?? []).includes(value);
    case "NotIn":
      return value === undefined || !(req.values ?? []).includes(value);
    case "Exists":
      return value !== undefined;
    case "DoesNotExist":
      return value === undefined;
    default:
      throw new Error(`operator ${req.operator} not simulated`);
  }
}

/** The DaemonSet controller's test: some term whose every expression holds (matchFields not simulated). */
function selects(ds: V1DaemonSet, node: V1Node): boolean {
  const terms =
    ds.spec?.template.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
      ?.nodeSelectorTerms;
  if (terms === undefined) return true;
  const labels = node.metadata?.labels ?? {};
  return terms.some((t) => {
    if ((t.matchFields ?? []).length > 0) throw new Error("matchFields placement is gone");
    return (t.matchExpressions ?? []).every((e) => matches(e, labels));
  });
}

interface Figures {
  passes: number;
  nodePatches: number;
  daemonSetWrites: number;
  /** Bytes of the largest DaemonSet written, and of the largest Node patch body. */
  largestDaemonSet: number;
  largestNodePatch: number;
  /** Bytes of the labels and annotations the rollout left on the node that carries the most. */
  largestNodeAddition: number;
  maxInFlight: number;
}

/** Runs one upgrade from start to promotion; half the kubelets can surge, half are replaced. */
function rollout(nodeCount: number, maxUnavailable: `${number}%`): Figures {
  const upgrade = { maxUnavailable, strategy: "Auto" as const };
  const OLD = config({ plugin: { logLevel: "info" }, upgrade });
  const NEW = config({ plugin: { logLevel: "debug" }, upgrade });
  const newRev = pluginRevision(NEW, ctx);
  let rv = 1;
  let now = Date.parse("2026-11-27T00:00:00Z");
  const nodes = new Map<string, V1Node>();
  for (let i = 0; i < nodeCount; i++) {
    const name = nodeName(i);
    nodes.set(name, {
      metadata: { name, resourceVersion: String(rv++), labels: {}, annotations: {} },
      status: {
        allocatable: { [RESOURCE]: "4" },
        nodeInfo: { kubeletVersion: i % 2 === 0 ? "v1.37.2" : "v1.35.4" } as never,
      },
    });
  }
  const daemonSets = new Map<string, V1DaemonSet>();
  const pods = new Map<string, V1Pod>();
  const reports = new Map<string, DeviceNodeState>();
  const figures: Figures = {
    passes: 0,
    nodePatches: 0,
    daemonSetWrites: 0,
    largestDaemonSet: 0,
    largestNodePatch: 0,
    largestNodeAddition: 0,
    maxInFlight: 0,
  };

  /** Whether a plugin pod other than `key` runs on the node. */
  const othersOn = (node: string, key: string) =>
    [...daemonSets.values()].some((ds) => {
      const other = `${ds.metadata!.uid}/${node}`;
      return other !== key && pods.has(other);
    });
  /** The DaemonSet controller and the kubelets, settled at once. */
  const settle = () => {
    for (const node of nodes.values()) {
      const name = node.metadata!.name!;
      let serving = 0;
      for (const ds of daemonSets.values()) {
        const key = `${ds.metadata!.uid}/${name}`;
        const revision = revisionOfDaemonSet(ds);
        if (selects(ds, node)) {
          serving++;
          if (pods.has(key)) {
            // A plugin standing by registers once it is the node's only one (contract/node-upgrade.ts).
            const report = reports.get(key)!;
            if (report.status!.registration.state === "StandingBy" && !othersOn(name, key)) {
              report.status!.registration.state = "Registered";
            }
            continue;
          }
          const uid = `pod-${key}`;
          pods.set(key, {
            metadata: { name: uid, uid, ownerReferences: [{ uid: ds.metadata!.uid! } as never] },
            spec: { nodeName: name, containers: [] },
            status: { phase: "Running" },
          });
          reports.set(key, {
            apiVersion: "dpo.dev/v1beta1",
            kind: "DeviceNodeState",
            metadata: { name: `r-${key}` },
            spec: { configName: CONFIG_NAME, nodeName: name, resourceName: RESOURCE, revision },
            status: {
              pluginVersion: "test",
              kubeletAPIVersion: "v1beta1",
              registration: {
                state:
                  othersOn(name, key) && standbyWanted(node.metadata!.annotations, CONFIG_NAME, revision)
                    ? "StandingBy"
                    : "Registered",
                since: "2026-11-27T00:00:00Z",
              },
              podUID: uid,
              advertised: 4,
              healthy: 4,
              devices: [],
              updateTime: "2026-11-27T00:00:00Z",
            },
          });
        } else {
          pods.delete(key);
          reports.delete(key);
        }
      }
      node.status!.allocatable![RESOURCE] = serving > 0 ? "4" : "0";
    }
  };

  const write = (ds: V1DaemonSet) => {
    const bytes = JSON.stringify(ds).length;
    figures.largestDaemonSet = Math.max(figures.largestDaemonSet, bytes);
    figures.daemonSetWrites++;
    ds.metadata = { ...ds.metadata, resourceVersion: String(rv++) };
    daemonSets.set(ds.metadata.name!, ds);
  };

  /** What the operator decides from the objects as they are now. */
  const decide = (c: DevicePluginConfig) =>
    decideRollout({
      desired: renderRevision(c, ctx),
      daemonSets: [...daemonSets.values()],
      nodes: [...nodes.values()],
      pods: [...pods.values()],
      reports: [...reports.values()],
      now,
    });

  let seq = 0;
  const pass = (c: DevicePluginConfig) => {
    figures.passes++;
    const decision = decide(c);
    for (const w of decision.writes) {
      if (w.kind === "Create") {
        const ds = structuredClone(w.daemonSet);
        ds.metadata = {
          ...ds.metadata,
          uid: `ds-${revisionOfDaemonSet(ds)}`,
          creationTimestamp: new Date(now + seq++),
        };
        write(ds);
      } else if (w.kind === "Update") {
        const stored = daemonSets.get(w.daemonSet.metadata!.name!)!;
        expect(w.daemonSet.metadata?.resourceVersion).toBe(stored.metadata?.resourceVersion);
        write(structuredClone(w.daemonSet));
      } else if (w.kind === "Delete") {
        daemonSets.delete(w.name);
      } else if (w.kind === "DeleteSlices") {
        throw new Error(`no publish switch here, yet the rollout deletes ${w.node}'s slices`);
      } else {
        const node = nodes.get(w.patch.node)!;
        expect(w.patch.resourceVersion).toBe(node.metadata!.resourceVersion);
        figures.nodePatches++;
        // Without the resourceVersion precondition, whose width is the test's counter's, not the rollout's.
        const { resourceVersion: _, ...metadata } = w.patch.body.metadata;
        figures.largestNodePatch = Math.max(figures.largestNodePatch, JSON.stringify({ metadata }).length);
        for (const [field, changes] of [
          ["labels", w.patch.body.metadata.labels],
          ["annotations", w.patch.body.metadata.annotations],
        ] as const) {
          const target = node.metadata![field]!;
          for (const [k, v] of Object.entries(changes ?? {})) {
            if (v === null) delete target[k];
            else target[k] = v;
          }
        }
        if (w.patch.body.spec !== undefined)
          node.spec = { ...node.spec, taints: w.patch.body.spec.taints ?? [] };
        node.metadata!.resourceVersion = String(rv++);
        const added = JSON.stringify([node.metadata!.labels, node.metadata!.annotations]).length;
        figures.largestNodeAddition = Math.max(figures.largestNodeAddition, added);
      }
    }
    settle();
    // In flight: surging (a surge label), in a Replace's gap (no revision), or fenced for a Replace.
    const keys = nodeKeys(CONFIG_NAME);
    let between = 0;
    for (const node of nodes.values()) {
      const labels = node.metadata!.labels!;
      const fenced = (node.spec?.taints ?? []).some((t) => t.key === keys.replace);
      if (labels[keys.surge] !== undefined || labels[keys.revision] === NO_REVISION || fenced) between++;
    }
    figures.maxInFlight = Math.max(figures.maxInFlight, between);
    now += 2_000;
    return decision;
  };

  // The old revision everywhere, then the spec changes.
  pass(OLD);
  expect([...daemonSets.values()].map(revisionOfDaemonSet)).toEqual([pluginRevision(OLD, ctx)]);
  const before = { ...figures };
  for (let i = 0; ; i++) {
    if (i > 2_000) throw new Error(`no promotion after ${i} passes: ${JSON.stringify(figures)}`);
    const d = pass(NEW);
    const live = [...daemonSets.values()];
    if (d.status.phase === "Complete" && live.length === 1 && revisionOfDaemonSet(live[0]!) === newRev) break;
  }
  // Once promoted, an idle pass writes nothing.
  expect(decide(NEW).writes).toEqual([]);
  return {
    ...figures,
    passes: figures.passes - before.passes,
    nodePatches: figures.nodePatches - before.nodePatches,
  };
}

describe("a plugin upgrade at scale, in objects alone", () => {
  const results = new Map<string, Figures>();
  it.each([
    { nodes: 1000, maxUnavailable: "1%" as const },
    { nodes: 1000, maxUnavailable: "10%" as const },
    { nodes: 5000, maxUnavailable: "1%" as const },
    { nodes: 5000, maxUnavailable: "10%" as const },
  ])(
    "$nodes nodes at maxUnavailable $maxUnavailable: Node patches per node and object sizes that do not grow",
    ({ nodes, maxUnavailable }) => {
      const figures = rollout(nodes, maxUnavailable);
      results.set(`${nodes}@${maxUnavailable}`, figures);
      // docs/benchmarks.md quotes these figures: DPO_PRINT_FIGURES=1 prints them.
      if (process.env.DPO_PRINT_FIGURES) console.log(JSON.stringify({ nodes, maxUnavailable, ...figures }));
      // Surge: add the new revision, then take the old one off (2). Replace with the new plugin standing by:
      // fence the node and add the new revision, take the old one off, unfence (3). Records ride along with
      // the first patch. Half and half.
      expect(figures.nodePatches / nodes).toBe(2.5);
      expect(figures.maxInFlight).toBe((nodes * Number.parseInt(maxUnavailable)) / 100);
      // Create the moving revision, promote it: the DaemonSets are written a fixed number of times.
      expect(figures.daemonSetWrites).toBeLessThanOrEqual(4);
      expect(figures.largestDaemonSet).toBeLessThan(8 * 1024);
      expect(figures.largestNodePatch).toBeLessThan(512);
      expect(figures.largestNodeAddition).toBeLessThan(512);
    },
    120_000,
  );

  it.each(["1%", "10%"])(
    "writes the same per node, and objects of the same size, at 5000 nodes as at 1000 (%s)",
    (maxUnavailable) => {
      const small = results.get(`1000@${maxUnavailable}`);
      const large = results.get(`5000@${maxUnavailable}`);
      expect(small && large, "both rollouts ran").toBeTruthy();
      expect(large!.nodePatches / 5000).toBe(small!.nodePatches / 1000);
      expect(large!.daemonSetWrites).toBe(small!.daemonSetWrites);
      expect(large!.largestDaemonSet).toBe(small!.largestDaemonSet);
      expect(large!.largestNodePatch).toBe(small!.largestNodePatch);
      expect(large!.largestNodeAddition).toBe(small!.largestNodeAddition);
    },
  );
});
