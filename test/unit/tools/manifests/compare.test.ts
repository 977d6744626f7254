// diffRenderings and withoutLabels: what the Helm chart's equivalence test with config/default relies on.
import { describe, expect, it } from "vitest";
import {
  diffRenderings,
  objectKey,
  withoutLabels,
  type KubeObject,
} from "../../../../tools/manifests/compare.js";

function object(
  kind: string,
  name: string,
  extra: Record<string, unknown> = {},
  namespace?: string,
): KubeObject {
  return {
    apiVersion: "v1",
    kind,
    metadata: { name, ...(namespace ? { namespace } : {}) },
    ...extra,
  };
}

const service = object("Service", "web", { spec: { ports: [{ name: "http", port: 80 }] } }, "ns");

describe("objectKey", () => {
  it.each([
    [service, "Service ns/web"],
    [object("ClusterRole", "reader"), "ClusterRole reader"],
  ])("%j → %s", (o, key) => {
    expect(objectKey(o)).toBe(key);
  });
});

describe("diffRenderings", () => {
  it.each<[string, KubeObject[], KubeObject[], string[]]>([
    ["the same objects in another order", [service, object("A", "a")], [object("A", "a"), service], []],
    ["an object only expected", [service, object("A", "a")], [service], ["missing: A a"]],
    ["an object only actual", [service], [service, object("A", "a", {}, "x")], ["unexpected: A x/a"]],
    [
      "the same name in another namespace",
      [service],
      [{ ...service, metadata: { ...service.metadata, namespace: "other" } }],
      ["missing: Service ns/web", "unexpected: Service other/web"],
    ],
    [
      "a changed scalar deep inside",
      [service],
      [object("Service", "web", { spec: { ports: [{ name: "http", port: 8080 }] } }, "ns")],
      ["Service ns/web: spec.ports[0].port: expected 80, got 8080"],
    ],
    [
      "a number that became a string",
      [service],
      [object("Service", "web", { spec: { ports: [{ name: "http", port: "80" }] } }, "ns")],
      ['Service ns/web: spec.ports[0].port: expected 80, got "80"'],
    ],
    [
      "an extra list item",
      [service],
      [
        object(
          "Service",
          "web",
          {
            spec: {
              ports: [
                { name: "http", port: 80 },
                { name: "https", port: 443 },
              ],
            },
          },
          "ns",
        ),
      ],
      [
        "Service ns/web: spec.ports: expected 1 items, got 2",
        'Service ns/web: spec.ports[1]: expected nothing, got {"name":"https","port":443}',
      ],
    ],
    [
      "a field only actual",
      [service],
      [object("Service", "web", { spec: { ports: [{ name: "http", port: 80 }], type: "NodePort" } }, "ns")],
      ['Service ns/web: spec.type: expected nothing, got "NodePort"'],
    ],
    ["an object rendered twice", [service], [service, service], ["actual has Service ns/web twice"]],
  ])("%s", (_what, expected, actual, differences) => {
    expect(diffRenderings(expected, actual)).toEqual(differences);
  });
});

describe("withoutLabels", () => {
  const labelled = object("A", "a", {});
  labelled.metadata.labels = { keep: "1", "helm.sh/chart": "dpo-0.1.0" };

  it("removes only the keys it is given", () => {
    expect(withoutLabels(labelled, ["helm.sh/chart", "absent"]).metadata.labels).toEqual({ keep: "1" });
    expect(labelled.metadata.labels).toEqual({ keep: "1", "helm.sh/chart": "dpo-0.1.0" });
  });

  it("drops labels that end up empty, as an object rendered without any has none", () => {
    expect(withoutLabels(labelled, ["keep", "helm.sh/chart"]).metadata).toEqual({ name: "a" });
  });
});
