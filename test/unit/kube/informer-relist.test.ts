// The informer's pure parts: the diff of a relist against the cache, and object keys.
import { describe, expect, it } from "vitest";
import { diffRelist, objectKey, splitObjectKey } from "../../../src/kube/index.js";
import { type Obj, obj, names } from "./informer-support.js";

describe("diffRelist", () => {
  const cache = (...objects: Obj[]): Map<string, Obj> => new Map(objects.map((o) => [objectKey(o), o]));
  const cases: Array<{
    name: string;
    cached: Obj[];
    fresh: Obj[];
    added: string[];
    updated: string[];
    deleted: string[];
  }> = [
    {
      name: "empty cache: everything is added",
      cached: [],
      fresh: [obj("a", "1"), obj("b", "2")],
      added: ["a", "b"],
      updated: [],
      deleted: [],
    },
    {
      name: "same resourceVersions: nothing happened",
      cached: [obj("a", "1"), obj("b", "2")],
      fresh: [obj("a", "1"), obj("b", "2")],
      added: [],
      updated: [],
      deleted: [],
    },
    {
      name: "another resourceVersion: updated",
      cached: [obj("a", "1"), obj("b", "2")],
      fresh: [obj("a", "5"), obj("b", "2")],
      added: [],
      updated: ["a"],
      deleted: [],
    },
    {
      name: "gone from the list: deleted while nobody watched",
      cached: [obj("a", "1"), obj("b", "2")],
      fresh: [obj("b", "2")],
      added: [],
      updated: [],
      deleted: ["a"],
    },
    {
      name: "empty list: everything deleted",
      cached: [obj("a", "1"), obj("b", "2")],
      fresh: [],
      added: [],
      updated: [],
      deleted: ["a", "b"],
    },
    {
      name: "deleted and re-created under the same name: updated",
      cached: [obj("a", "1")],
      fresh: [obj("a", "9")],
      added: [],
      updated: ["a"],
      deleted: [],
    },
    {
      name: "no resourceVersion to compare: treated as updated",
      cached: [obj("a")],
      fresh: [obj("a")],
      added: [],
      updated: ["a"],
      deleted: [],
    },
    {
      name: "same name in two namespaces: two objects",
      cached: [obj("a", "1", { namespace: "x" })],
      fresh: [obj("a", "1", { namespace: "x" }), obj("a", "2", { namespace: "y" })],
      added: ["y/a"],
      updated: [],
      deleted: [],
    },
    {
      name: "all three at once",
      cached: [obj("keep", "1"), obj("change", "1"), obj("drop", "1")],
      fresh: [obj("keep", "1"), obj("change", "2"), obj("new", "3")],
      added: ["new"],
      updated: ["change"],
      deleted: ["drop"],
    },
  ];
  it.each(cases)("$name", ({ cached, fresh, added, updated, deleted }) => {
    const diff = diffRelist(cache(...cached), fresh);
    expect(names(diff.added)).toEqual(added);
    expect(names(diff.updated.map((u) => u.current))).toEqual(updated);
    expect(names(diff.deleted)).toEqual(deleted);
    for (const { old, current } of diff.updated) expect(objectKey(old)).toBe(objectKey(current));
  });
});

describe("objectKey", () => {
  it.each([
    { o: obj("n1"), key: "n1" },
    { o: obj("cm", "1", { namespace: "dpo" }), key: "dpo/cm" },
  ])("$key", ({ o, key }) => {
    expect(objectKey(o)).toBe(key);
    const { name, namespace } = splitObjectKey(key);
    expect(name).toBe(o.metadata.name);
    expect(namespace).toBe(o.metadata.namespace);
  });
});
