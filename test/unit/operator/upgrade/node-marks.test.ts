// Every mark the operator leaves on a Node for a config is found again from the Node alone, and the cleanup
// a deleted config gets takes each of them off (ADR 0009): pure.
import type { V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { nodeKeys } from "../../../../src/operator/model/targeting.js";
import { stripPatch, type NodePatch } from "../../../../src/operator/upgrade/node-labels.js";
import { configsMarkedOn, marksOf, NODE_MARKS } from "../../../../src/operator/upgrade/node-marks.js";
import { configLabelValue } from "../../../../src/contract/names.js";

/** A Node carrying, for each config, one key of every row of NODE_MARKS. */
function nodeMarkedBy(...configs: string[]): V1Node {
  const labels: Record<string, string> = { zone: "z" };
  const annotations: Record<string, string> = { note: "x" };
  const taints = [{ key: "dedicated", value: "gpu", effect: "NoSchedule" }];
  for (const config of configs) {
    const value = configLabelValue(config);
    for (const { place, prefix } of NODE_MARKS) {
      if (place === "label") labels[prefix + value] = "rev";
      if (place === "annotation") annotations[prefix + value] = '{"from":"a","to":"b"}';
      if (place === "taint") taints.push({ key: prefix + value, value: "rev", effect: "NoSchedule" });
    }
  }
  return { metadata: { name: "n1", resourceVersion: "7", labels, annotations }, spec: { taints } };
}

/** The Node as a JSON merge patch leaves it (a null removes a key; a list is replaced whole). */
function applied(node: V1Node, patch: NodePatch): V1Node {
  const merge = (have: Record<string, string> = {}, change: Record<string, string | null> = {}) =>
    Object.fromEntries(
      Object.entries({ ...have, ...change }).filter((e): e is [string, string] => e[1] !== null),
    );
  return {
    metadata: {
      ...node.metadata,
      labels: merge(node.metadata?.labels, patch.body.metadata.labels),
      annotations: merge(node.metadata?.annotations, patch.body.metadata.annotations),
    },
    spec: { taints: patch.body.spec !== undefined ? (patch.body.spec.taints ?? []) : node.spec?.taints },
  };
}

describe("configsMarkedOn", () => {
  it("finds a config by its revision or surge label, its upgrade record or its Replace taint", () => {
    const [a, b, c, d] = ["a", "b", "c", "d"].map((n) => nodeKeys(n));
    const node: V1Node = {
      metadata: {
        name: "n",
        labels: { [a!.revision]: "r1", [b!.surge]: "r2", other: "x" },
        annotations: { [c!.upgrade]: "{}", other: "x" },
      },
      spec: { taints: [{ key: d!.replace, value: "r1", effect: "NoSchedule" }] },
    };
    expect(configsMarkedOn(node).sort()).toEqual(["a", "b", "c", "d"]);
  });

  it("finds a config from each row of the table alone", () => {
    for (const row of NODE_MARKS) {
      const only = nodeMarkedBy("gpu");
      const keep = (place: string, key: string) => place === row.place && key.startsWith(row.prefix);
      only.metadata!.labels = Object.fromEntries(
        Object.entries(only.metadata!.labels!).filter(([k]) => !k.includes(".dpo.dev/") || keep("label", k)),
      );
      only.metadata!.annotations = Object.fromEntries(
        Object.entries(only.metadata!.annotations!).filter(
          ([k]) => !k.includes(".dpo.dev/") || keep("annotation", k),
        ),
      );
      only.spec!.taints = only.spec!.taints!.filter(
        (t) => !t.key.includes(".dpo.dev/") || keep("taint", t.key),
      );
      expect(configsMarkedOn(only), row.what).toEqual(["gpu"]);
      expect(marksOf(only, "gpu"), row.what).toHaveLength(1);
    }
  });

  it("names a long config by its label value, and nothing for a bare prefix or a node without marks", () => {
    const long = "x".repeat(80);
    expect(configsMarkedOn(nodeMarkedBy(long))).toEqual([configLabelValue(long)]);
    const bare: V1Node = { metadata: { name: "n", labels: { "revision.dpo.dev/": "r" } } };
    expect(configsMarkedOn(bare)).toEqual([]);
    expect(configsMarkedOn({ metadata: { name: "n" } })).toEqual([]);
  });
});

describe("marksOf and stripPatch", () => {
  it("lists a config's marks only, and stripPatch takes off every one of them and nothing else", () => {
    const node = nodeMarkedBy("gpu", "other");
    expect(marksOf(node, "gpu").map((m) => m.place)).toEqual(NODE_MARKS.map((m) => m.place));
    const after = applied(node, stripPatch(node, nodeKeys("gpu"))!);
    expect(marksOf(after, "gpu")).toEqual([]);
    expect(marksOf(after, "other")).toEqual(marksOf(node, "other"));
    expect(after.metadata?.labels?.["zone"]).toBe("z");
    expect(after.metadata?.annotations?.["note"]).toBe("x");
    expect(after.spec?.taints?.map((t) => t.key)).toContain("dedicated");
    expect(stripPatch(after, nodeKeys("gpu"))).toBeUndefined();
  });
});
