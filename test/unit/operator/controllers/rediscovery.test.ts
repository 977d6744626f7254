// A config deleted while no operator led is found again from whatever dpo left (ADR 0009): a Node carrying
// only its Replace fence, only its upgrade record, or one of dpo's objects, both by the Node events'
// mapping and by the leader's start-up list of configs to reconcile.
import type { V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { DeviceNodeState } from "../../../../src/api/v1beta1/devicenodestate.js";
import { configLabelValue, LABEL_CONFIG } from "../../../../src/contract/names.js";
import { configsForNode, type ConfigLookup } from "../../../../src/operator/controllers/mapping.js";
import { configsToReconcileAtStart } from "../../../../src/operator/controllers/rediscovery.js";
import type { StoredConfig } from "../../../../src/operator/controllers/reconciler-deps.js";
import { nodeKeys } from "../../../../src/operator/model/targeting.js";

function lookup(...configs: string[]): ConfigLookup {
  const stored: StoredConfig[] = configs.map((name) => ({ metadata: { name }, spec: {} }));
  return {
    get: (name) => stored.find((c) => c.metadata?.name === name),
    list: () => stored,
  };
}

/** A Node carrying only the first step of a Replace of `config`: its fence, no label, no record. */
function fencedOnly(config: string): V1Node {
  return {
    metadata: { name: "n1", labels: { zone: "z" } },
    spec: { taints: [{ key: nodeKeys(config).replace, value: "rev2", effect: "NoSchedule" }] },
  };
}

function recordOnly(config: string): V1Node {
  return { metadata: { name: "n2", annotations: { [nodeKeys(config).upgrade]: '{"from":"a","to":"b"}' } } };
}

const nothingLeft = { nodes: [], owned: [], reports: [] };

describe("rediscovery of a deleted config from a Node", () => {
  it("maps an event of a Node carrying only a config's Replace taint to that config", () => {
    expect(configsForNode(lookup(), undefined, fencedOnly("gone"))).toEqual(["gone"]);
  });

  it("maps a Node carrying only an upgrade record to its config", () => {
    expect(configsForNode(lookup(), undefined, recordOnly("gone"))).toEqual(["gone"]);
  });

  it("lists a config known only from a Node's Replace taint for the leader's start", () => {
    expect(configsToReconcileAtStart(lookup(), { ...nothingLeft, nodes: [fencedOnly("gone")] })).toEqual([
      "gone",
    ]);
  });

  it("maps a long config's bounded key back to the config while it exists, and reconciles the value after", () => {
    const long = "a".repeat(70);
    const node = fencedOnly(long);
    expect(configsToReconcileAtStart(lookup(long), { ...nothingLeft, nodes: [node] })).toEqual([long]);
    expect(configsToReconcileAtStart(lookup(), { ...nothingLeft, nodes: [node] })).toEqual([
      configLabelValue(long),
    ]);
  });
});

describe("configsToReconcileAtStart", () => {
  it("lists every config, then each name dpo's objects carry, once", () => {
    const report = { spec: { configName: "by-report" } } as DeviceNodeState;
    const owned = [
      {
        metadata: {
          ownerReferences: [
            { apiVersion: "dpo.dev/v1beta1", kind: "DevicePluginConfig", name: "by-owner", uid: "u" },
          ],
        },
      },
      { metadata: { labels: { [LABEL_CONFIG]: "by-pod-label" } } },
      { metadata: { labels: { [LABEL_CONFIG]: "live" } } },
    ];
    const slice = { metadata: { name: "s", labels: { [LABEL_CONFIG]: "by-slice" } } } as never;
    const got = configsToReconcileAtStart(lookup("live", "other"), {
      nodes: [fencedOnly("by-fence"), recordOnly("by-record"), fencedOnly("live")],
      owned,
      reports: [report],
      slices: [slice],
    });
    expect(got).toEqual([
      "live",
      "other",
      "by-fence",
      "by-record",
      "by-owner",
      "by-pod-label",
      "by-report",
      "by-slice",
    ]);
  });

  it("lists only the configs when dpo left nothing else", () => {
    expect(configsToReconcileAtStart(lookup("a", "b"), nothingLeft)).toEqual(["a", "b"]);
  });
});
