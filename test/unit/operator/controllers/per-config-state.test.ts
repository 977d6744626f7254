// What the operator keeps per config name stays bounded when names come from reports others write, and
// reports that no plugin wrote for itself (a squat on another's name, a config that does not exist) go.
import type { V1Node } from "@kubernetes/client-node";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import type { DeviceNodeState } from "../../../../src/api/v1beta1/devicenodestate.js";
import { boundedName } from "../../../../src/contract/names.js";
import { deviceNodeStateName } from "../../../../src/contract/node-state.js";
import type { ObjectClient, ObjectKey, ResourceRef } from "../../../../src/kube/index.js";
import {
  ConfigReconciler,
  type ConfigReconcilerDeps,
  type StoredConfig,
} from "../../../../src/operator/controllers/config-reconciler.js";
import type { StepDeps } from "../../../../src/operator/controllers/reconciler-deps.js";
import { cleanupWritesPending } from "../../../../src/operator/controllers/steps/node-label-cleanup.js";
import { rolloutWritesPending } from "../../../../src/operator/controllers/steps/plugin-workloads.js";
import { findStaleReports } from "../../../../src/operator/controllers/stale-reports.js";
import { OperatorMetrics } from "../../../../src/operator/metrics.js";
import { nodeKeys } from "../../../../src/operator/model/targeting.js";
import { configsMarkedOn } from "../../../../src/operator/upgrade/node-marks.js";
import { FakeCache } from "./fake-cache.js";

const NS = "dpo-system";

/** Deterministic names, so a failure can be replayed. */
function names(seed: number): () => string {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return `cfg-${state.toString(36)}`;
  };
}

function report(name: string, configName: string, nodeName: string): DeviceNodeState {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DeviceNodeState",
    metadata: { name, namespace: NS, uid: `uid-${name}` },
    spec: { configName, nodeName, resourceName: "vendor.example/foo" },
  };
}

describe("per-config state of configs that do not exist", () => {
  it("stays bounded over 10,000 reconciles of random config names, and their reports go", async () => {
    const nodes = new FakeCache<V1Node>(configsMarkedOn);
    const reports = new FakeCache<DeviceNodeState>((r) => [r.spec.configName]);
    const NODES = 50;
    let rv = 1;
    for (let i = 0; i < NODES; i++) nodes.put({ metadata: { name: `n${i}`, resourceVersion: String(rv++) } });
    // The Node patches the API server took, shown by the cache one reconcile later (a watch behind).
    let unseen: string[] = [];
    const deps: ConfigReconcilerDeps = {
      configs: new FakeCache<StoredConfig>().asInformer(),
      nodes: nodes.asInformer(),
      pods: new FakeCache().asInformer(),
      daemonSets: new FakeCache().asInformer(),
      configMaps: new FakeCache().asInformer(),
      reports: reports.asInformer(),
      applier: {} as never,
      objects: {
        patch: (_ref: ResourceRef, key: ObjectKey) => {
          unseen.push(key.name);
          return Promise.resolve({});
        },
        delete: (_ref: ResourceRef, key: ObjectKey) => {
          reports.delete(key.name, key.namespace);
          return Promise.resolve();
        },
      } as Partial<ObjectClient> as ObjectClient,
      events: { record: () => Promise.resolve() } as never,
      render: {
        namespace: NS,
        operatorImage: "dpo:test",
        pluginServiceAccount: "dpo-plugin",
        registrationMode: "kubelet",
      },
      logger: pino({ level: "silent" }),
      metrics: new OperatorMetrics(),
      now: () => new Date(0),
    };
    const reconciler = new ConfigReconciler(deps);
    const next = names(33);
    let most = 0;
    for (let i = 0; i < 10_000; i++) {
      for (const name of unseen) nodes.put({ metadata: { name, resourceVersion: String(rv++), labels: {} } });
      unseen = [];
      // A report naming a config that does not exist, and a Node carrying that config's revision label:
      // each reconcile has a report to delete and a Node to write.
      const config = next();
      reports.put(report(deviceNodeStateName(config, `n${i % NODES}`), config, `n${i % NODES}`));
      nodes.put({
        metadata: {
          name: `n${i % NODES}`,
          resourceVersion: String(rv++),
          labels: { [nodeKeys(config).revision]: "abc" },
        },
      });
      await reconciler.reconcile(config);
      most = Math.max(most, cleanupWritesPending(deps as StepDeps));
    }
    // One config's writes at a time wait for the cache; none is kept once it has caught up.
    expect(most).toBeLessThanOrEqual(2);
    expect(rolloutWritesPending(deps as StepDeps)).toBe(0);
    expect(reports.objects.size).toBe(0);
    expect(unseen).toHaveLength(1);
    // Each was stripped from the one Node that carried its label, found by the index, never by a scan.
    expect(nodes.lists).toBe(0);
  });
});

describe("findStaleReports: names that are not the contract's", () => {
  const node = (name: string): V1Node => ({ metadata: { name } });
  const judge = (...candidates: DeviceNodeState[]) =>
    findStaleReports({
      configName: "foo",
      spec: { nodeSelector: {}, tolerations: [] },
      reports: candidates,
      node,
      nodesSynced: true,
      limit: 100,
    }).stale.map((s) => [s.report.metadata.name, s.reason]);

  it("deletes a report squatting on another node's name, and keeps the reports named for their spec", () => {
    const own = report(deviceNodeStateName("foo", "node-c"), "foo", "node-c");
    const squat = report(deviceNodeStateName("foo", "node-b"), "foo", "node-a");
    const legacy = report(boundedName("foo", "node-d"), "foo", "node-d");
    expect(judge(own, squat, legacy)).toEqual([[squat.metadata.name, "Misnamed"]]);
  });

  it("deletes a squat beside its node's own report as Superseded, as any other name", () => {
    const own = report(deviceNodeStateName("foo", "node-a"), "foo", "node-a");
    const squat = report(deviceNodeStateName("foo", "node-b"), "foo", "node-a");
    expect(judge(own, squat)).toEqual([[squat.metadata.name, "Superseded"]]);
  });

  it("deletes a squat before the node cache has synced", () => {
    const squat = report(deviceNodeStateName("foo", "node-b"), "foo", "node-a");
    const stale = findStaleReports({
      configName: "foo",
      spec: { nodeSelector: {}, tolerations: [] },
      reports: [squat],
      node: () => undefined,
      nodesSynced: false,
      limit: 100,
    }).stale;
    expect(stale.map((s) => s.reason)).toEqual(["Misnamed"]);
  });

  it("judges the revision too: a report of one revision under another's name is misnamed", () => {
    const r = report(deviceNodeStateName("foo", "node-a", "rev1"), "foo", "node-a");
    r.spec.revision = "rev2";
    expect(judge(r)).toEqual([[r.metadata.name, "Misnamed"]]);
  });
});
