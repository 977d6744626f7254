// The cleanup of a config's keys on Nodes: one patch per Node, even when the next pass comes before the
// operator's cache shows the last pass's writes.
import type { V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { StepDeps } from "../../../../../src/operator/controllers/reconciler-deps.js";
import { stripNodeLabels } from "../../../../../src/operator/controllers/steps/node-label-cleanup.js";
import { nodeKeys } from "../../../../../src/operator/model/targeting.js";

const CONFIG = "gpu";
const keys = nodeKeys(CONFIG);

function node(name: string, resourceVersion: string, carries: boolean): V1Node {
  return {
    metadata: {
      name,
      resourceVersion,
      labels: carries ? { [keys.revision]: "abc" } : {},
      annotations: carries ? { [keys.upgrade]: '{"from":"a","to":"b"}' } : {},
    },
  };
}

/** A Node cache the test moves by hand, and the patches the step sends. */
function fakeDeps(initial: V1Node[]): { deps: StepDeps; cache: Map<string, V1Node>; patched: string[] } {
  const cache = new Map(initial.map((n) => [n.metadata!.name!, n]));
  const patched: string[] = [];
  const deps = {
    nodes: { list: () => [...cache.values()], get: (name: string) => cache.get(name) },
    objects: {
      patch: (_ref: unknown, id: { name: string }) => {
        patched.push(id.name);
        return Promise.resolve({});
      },
    },
    metrics: { applies: { inc: () => undefined } },
    logger: { info: () => undefined },
  } as unknown as StepDeps;
  return { deps, cache, patched };
}

describe("stripNodeLabels", () => {
  it("writes each Node once while the cache catches up, and comes back until it has", async () => {
    const { deps, cache, patched } = fakeDeps([
      node("n1", "1", true),
      node("n2", "1", true),
      node("n3", "1", false),
    ]);
    expect(await stripNodeLabels(deps, CONFIG, () => false)).toBeUndefined();
    expect(patched).toEqual(["n1", "n2"]);

    // The next pass, before the cache shows the writes: nothing is written again, and it comes back.
    expect(await stripNodeLabels(deps, CONFIG, () => false)).toBeGreaterThan(0);
    expect(patched).toEqual(["n1", "n2"]);

    // The cache catches up on n1 only.
    cache.set("n1", node("n1", "2", false));
    expect(await stripNodeLabels(deps, CONFIG, () => false)).toBeGreaterThan(0);
    expect(patched).toEqual(["n1", "n2"]);

    cache.set("n2", node("n2", "2", false));
    expect(await stripNodeLabels(deps, CONFIG, () => false)).toBeUndefined();
    expect(patched).toEqual(["n1", "n2"]);
  });

  it("writes a Node again when a newer version of it carries the config's keys again", async () => {
    const { deps, cache, patched } = fakeDeps([node("n1", "1", true)]);
    await stripNodeLabels(deps, CONFIG, () => false);
    cache.set("n1", node("n1", "5", true));
    await stripNodeLabels(deps, CONFIG, () => false);
    expect(patched).toEqual(["n1", "n1"]);
  });

  it("leaves the Nodes the config keeps", async () => {
    const { deps, patched } = fakeDeps([node("n1", "1", true), node("n2", "1", true)]);
    await stripNodeLabels(deps, CONFIG, (n) => n.metadata?.name === "n2");
    expect(patched).toEqual(["n1"]);
  });
});
