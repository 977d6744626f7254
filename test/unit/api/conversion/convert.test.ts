// The v1alpha1 ↔ v1beta1 mapping, field by field, and the annotation's corner cases.
import { describe, expect, it } from "vitest";
import {
  applyMergePatch,
  canonicalJson,
  diffMergePatch,
  LOST_FIELDS_ANNOTATION,
  toV1alpha1,
  toV1beta1,
  type AlphaObject,
  type BetaObject,
} from "../../../../src/api/conversion/index.js";

const RESOURCE = "hardware-vendor.example/foo";

function alpha(
  spec: Partial<AlphaObject["spec"]>,
  metadata: Partial<AlphaObject["metadata"]> = {},
): AlphaObject {
  return {
    apiVersion: "dpo.dev/v1alpha1",
    kind: "DevicePluginConfig",
    metadata: { name: "foo", ...metadata },
    spec: { resourceName: RESOURCE, backend: "Mock", mock: { devices: 4 }, ...spec },
  };
}

function beta(spec: Partial<BetaObject["spec"]>, metadata: Partial<BetaObject["metadata"]> = {}): BetaObject {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: "foo", ...metadata },
    spec: { resourceName: RESOURCE, backend: { type: "Mock", mock: { devices: 4 } }, ...spec },
  };
}

function up(a: AlphaObject): BetaObject {
  const r = toV1beta1(a);
  if (!r.ok) throw new Error(r.error);
  return r.value;
}

describe("v1alpha1 → v1beta1 field mapping", () => {
  it.each<[string, Partial<AlphaObject["spec"]>, Partial<BetaObject["spec"]>]>([
    ["backend Mock", {}, {}],
    [
      "backend DevFS and its member devfs",
      { backend: "DevFS", mock: undefined, devfs: { paths: [{ glob: "/dev/ttyUSB*" }] } },
      { backend: { type: "DevFS", devFS: { paths: [{ glob: "/dev/ttyUSB*" }] } } },
    ],
    [
      "backend PCI",
      { backend: "PCI", mock: undefined, pci: { vendor: "10de" } },
      { backend: { type: "PCI", pci: { vendor: "10de" } } },
    ],
    ["sharedDevNum unset: no sharing", {}, {}],
    ["sharedDevNum 1: strategy None, no replicas", { sharedDevNum: 1 }, { sharing: { strategy: "None" } }],
    [
      "sharedDevNum 4: TimeSlicing with 4 replicas",
      { sharedDevNum: 4 },
      { sharing: { strategy: "TimeSlicing", replicas: 4 } },
    ],
    [
      "sharedDevNum 0 (invalid): strategy None, replicas 0 (invalid too)",
      { sharedDevNum: 0 },
      { sharing: { strategy: "None", replicas: 0 } },
    ],
    ["policy none", { preferredAllocationPolicy: "none" }, { topology: { allocationPolicy: "None" } }],
    ["policy packed", { preferredAllocationPolicy: "packed" }, { topology: { allocationPolicy: "Packed" } }],
    [
      "policy balanced",
      { preferredAllocationPolicy: "balanced" },
      { topology: { allocationPolicy: "Spread" } },
    ],
    ["policy numa", { preferredAllocationPolicy: "numa" }, { topology: { allocationPolicy: "NUMAAligned" } }],
    ["image and logLevel", { image: "", logLevel: "debug" }, { plugin: { image: "", logLevel: "debug" } }],
    ["image only", { image: "registry.example/dpo:1" }, { plugin: { image: "registry.example/dpo:1" } }],
    [
      "nodeSelector and tolerations as they are, empty ones too",
      { nodeSelector: {}, tolerations: [{ operator: "Exists" }] },
      { nodeSelector: {}, tolerations: [{ operator: "Exists" }] },
    ],
  ])("%s", (_name, alphaSpec, betaSpec) => {
    const a = alpha(alphaSpec);
    const want = beta(betaSpec);
    expect(up(JSON.parse(JSON.stringify(a)) as AlphaObject)).toStrictEqual(want);
    expect(toV1alpha1(want)).toStrictEqual(JSON.parse(JSON.stringify(a)));
  });

  it("copies the status and every metadata field", () => {
    const status = {
      observedGeneration: 2,
      devices: { capacity: 4, allocatable: 4, unhealthy: 0, allocated: 3, summary: "4/4" },
      conditions: [
        {
          type: "SurgeUpgrades",
          status: "False",
          reason: "KubeletWithoutPerSocketEndpoints",
          message:
            "2 of 3 nodes replace instead of surging: their kubelets (v1.35.4) are older than v1.37.0, which per-socket device-plugin endpoints need",
          lastTransitionTime: "2026-01-01T00:00:00Z",
          observedGeneration: 2,
        },
        {
          type: "DRAPublishing",
          status: "True",
          reason: "ResourceAPIServed",
          message: "the API server serves resource.k8s.io/v1; no nodes match",
          lastTransitionTime: "2026-01-01T00:00:00Z",
          observedGeneration: 2,
        },
      ],
    };
    const metadata = {
      labels: { app: "dpo" },
      annotations: { note: "x" },
      uid: "u",
      creationTimestamp: null,
    };
    const a = { ...alpha({}, metadata), status };
    expect(up(a)).toStrictEqual({ ...beta({}, metadata), status });
    // The allocated count, the feature conditions and every other status field survive the way back too.
    expect(toV1alpha1({ ...beta({}, metadata), status }).status).toStrictEqual(status);
  });
});

describe("v1beta1 → v1alpha1: what v1alpha1 cannot say goes into the annotation", () => {
  it.each<[string, Partial<BetaObject["spec"]>, Partial<AlphaObject["spec"]>, object | undefined]>([
    ["no sharing: nothing lost", {}, {}, undefined],
    ["sharing {}: sharedDevNum unset", { sharing: {} }, {}, { spec: { sharing: {} } }],
    ["strategy None: sharedDevNum 1", { sharing: { strategy: "None" } }, { sharedDevNum: 1 }, undefined],
    [
      "strategy None with replicas 1: the replicas are kept",
      { sharing: { strategy: "None", replicas: 1 } },
      { sharedDevNum: 1 },
      { spec: { sharing: { replicas: 1 } } },
    ],
    [
      "replicas 1 without strategy: the absent strategy is kept",
      { sharing: { replicas: 1 } },
      { sharedDevNum: 1 },
      { spec: { sharing: { replicas: 1, strategy: null } } },
    ],
    [
      "strategy None with replicas 4 (refused by v1beta1 today): replicas 4 come back",
      { sharing: { strategy: "None", replicas: 4 } },
      { sharedDevNum: 1 },
      { spec: { sharing: { replicas: 4 } } },
    ],
    [
      "TimeSlicing with failRequestsGreaterThanOne",
      { sharing: { strategy: "TimeSlicing", replicas: 4, failRequestsGreaterThanOne: true } },
      { sharedDevNum: 4 },
      { spec: { sharing: { failRequestsGreaterThanOne: true } } },
    ],
    [
      "failRequestsGreaterThanOne false, spelled out",
      { sharing: { strategy: "TimeSlicing", replicas: 2, failRequestsGreaterThanOne: false } },
      { sharedDevNum: 2 },
      { spec: { sharing: { failRequestsGreaterThanOne: false } } },
    ],
    ["topology {}: no policy", { topology: {} }, {}, { spec: { topology: {} } }],
    [
      "CDI",
      { cdi: { enabled: true, kind: "vendor.example/foo" } },
      {},
      { spec: { cdi: { enabled: true, kind: "vendor.example/foo" } } },
    ],
    [
      "plugin priorityClassName and resources, next to image",
      { plugin: { image: "i", priorityClassName: "high", resources: { limits: { cpu: "1" } } } },
      { image: "i" },
      { spec: { plugin: { priorityClassName: "high", resources: { limits: { cpu: "1" } } } } },
    ],
    ["plugin {}", { plugin: {} }, {}, { spec: { plugin: {} } }],
    [
      "NVIDIA with MIG strategy Mixed and a profile: v1alpha1 names the type, the settings travel",
      { backend: { type: "NVIDIA", nvidia: { mig: { strategy: "Mixed", profile: "1g.10gb" } } } },
      { backend: "NVIDIA", mock: undefined },
      { spec: { backend: { nvidia: { mig: { profile: "1g.10gb", strategy: "Mixed" } } } } },
    ],
    [
      "nodeSelectorTerm and priority, next to nodeSelector",
      {
        nodeSelector: { gpu: "true" },
        nodeSelectorTerm: {
          matchExpressions: [
            { key: "pool", operator: "In", values: ["big"] },
            { key: "memory-gb", operator: "Gt", values: ["64"] },
          ],
        },
        priority: 10,
      },
      { nodeSelector: { gpu: "true" } },
      {
        spec: {
          nodeSelectorTerm: {
            matchExpressions: [
              { key: "pool", operator: "In", values: ["big"] },
              { key: "memory-gb", operator: "Gt", values: ["64"] },
            ],
          },
          priority: 10,
        },
      },
    ],
  ])("%s", (_name, betaSpec, alphaSpec, lost) => {
    const b = beta(betaSpec);
    const a = toV1alpha1(b);
    const want = alpha(
      alphaSpec,
      lost === undefined ? {} : { annotations: { [LOST_FIELDS_ANNOTATION]: JSON.stringify(lost) } },
    );
    expect(a).toStrictEqual(JSON.parse(JSON.stringify(want)));
    expect(up(a)).toStrictEqual(b);
  });

  it.each<[string, Record<string, string> | undefined, boolean, Record<string, string> | undefined]>([
    ["absent annotations, nothing lost", undefined, false, undefined],
    ["empty annotations, nothing lost", {}, false, {}],
    [
      "absent annotations, something lost",
      undefined,
      true,
      { [LOST_FIELDS_ANNOTATION]: '{"spec":{"topology":{}}}' },
    ],
    [
      "empty annotations, something lost: the empty map is restored too",
      {},
      true,
      { [LOST_FIELDS_ANNOTATION]: '{"metadata":{"annotations":{}},"spec":{"topology":{}}}' },
    ],
    [
      "other annotations stay next to it",
      { note: "x" },
      true,
      { note: "x", [LOST_FIELDS_ANNOTATION]: '{"spec":{"topology":{}}}' },
    ],
    [
      "a v1beta1 object carrying the annotation itself keeps it",
      { [LOST_FIELDS_ANNOTATION]: "copied" },
      false,
      { [LOST_FIELDS_ANNOTATION]: `{"metadata":{"annotations":{"${LOST_FIELDS_ANNOTATION}":"copied"}}}` },
    ],
  ])("metadata.annotations: %s", (_name, annotations, loses, want) => {
    const b = beta(loses ? { topology: {} } : {}, annotations === undefined ? {} : { annotations });
    const a = toV1alpha1(b);
    expect(a.metadata.annotations).toStrictEqual(want);
    expect(up(a)).toStrictEqual(b);
  });

  it("writes the annotation with sorted keys, so equal content is equal text", () => {
    const b = beta({
      plugin: { resources: { limits: { memory: "1Gi", cpu: "1" } }, priorityClassName: "high" },
    });
    expect(toV1alpha1(b).metadata.annotations?.[LOST_FIELDS_ANNOTATION]).toBe(
      '{"spec":{"plugin":{"priorityClassName":"high","resources":{"limits":{"cpu":"1","memory":"1Gi"}}}}}',
    );
  });
});

describe("v1alpha1 → v1beta1 with an annotation", () => {
  const withAnnotation = (spec: Partial<AlphaObject["spec"]>, value: string) =>
    alpha(spec, { annotations: { [LOST_FIELDS_ANNOTATION]: value } });

  it.each(["{not json", "[1,2]", '"text"', "null", ""])(
    "refuses %j, naming the object and the annotation",
    (value) => {
      const r = toV1beta1(withAnnotation({}, value));
      expect(r.ok).toBe(false);
      if (r.ok) return;
      expect(r.error).toMatch(/^DevicePluginConfig foo: annotation dpo\.dev\/v1beta1-fields /);
    },
  );

  it("restores the fields and removes the annotation, and an annotations map it leaves empty", () => {
    const r = toV1beta1(
      withAnnotation({ sharedDevNum: 2 }, '{"spec":{"sharing":{"failRequestsGreaterThanOne":true}}}'),
    );
    expect(r).toStrictEqual({
      ok: true,
      value: beta({ sharing: { strategy: "TimeSlicing", replicas: 2, failRequestsGreaterThanOne: true } }),
      ignored: [],
      warnings: [],
    });
  });

  it("a stale annotation loses to the v1alpha1 fields, with a warning naming the field", () => {
    // Written for sharedDevNum 1 with replicas 1; the user then asked for 4 containers per device.
    const r = toV1beta1(
      withAnnotation({ sharedDevNum: 4 }, '{"spec":{"sharing":{"replicas":1},"cdi":{"enabled":true}}}'),
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.spec.sharing).toStrictEqual({ strategy: "TimeSlicing", replicas: 4 });
    expect(r.value.spec.cdi).toStrictEqual({ enabled: true });
    expect(r.ignored).toStrictEqual([
      { field: "spec.sharing.replicas", reason: "it contradicts the v1alpha1 fields" },
    ]);
    expect(r.warnings).toStrictEqual([
      "DevicePluginConfig foo: annotation dpo.dev/v1beta1-fields: ignored spec.sharing.replicas (it contradicts the v1alpha1 fields)",
    ]);
  });

  it.each([
    ['{"apiVersion":"dpo.dev/v2"}', "apiVersion"],
    ['{"spec":{"resourceName":"other.example/bar"}}', "spec.resourceName"],
    ['{"spec":{"backend":{"type":"PCI"}}}', "spec.backend.type"],
    ['{"metadata":{"name":"bar"}}', "metadata.name"],
    ['{"spec":5}', "spec"],
  ])("never lets %s change what v1alpha1 says", (value, field) => {
    const a = withAnnotation({}, value);
    const r = toV1beta1(a);
    expect(r.ok && r.ignored.map((i) => i.field)).toStrictEqual([field]);
    expect(r.ok && r.value).toStrictEqual(beta({}));
  });
});

describe("merge patches", () => {
  it.each([
    [{ a: 1 }, { a: 1 }, undefined],
    [{ a: 1 }, { a: 2 }, { a: 2 }],
    [{ a: 1 }, {}, { a: null }],
    [{}, { a: {} }, { a: {} }],
    [{ a: { b: 1, c: 2 } }, { a: { b: 1 } }, { a: { c: null } }],
    [{ a: [1, 2] }, { a: [1] }, { a: [1] }],
    [{ a: 1 }, { a: { b: 1 } }, { a: { b: 1 } }],
  ])("diff(%j, %j) = %j, and applying it gives the target", (from, to, patch) => {
    expect(diffMergePatch(from, to)).toStrictEqual(patch);
    if (patch !== undefined) expect(applyMergePatch(from, patch)).toStrictEqual(to);
  });

  it("canonical JSON sorts keys at every level", () => {
    expect(canonicalJson({ b: 1, a: { d: [{ f: 1, e: 2 }], c: null } })).toBe(
      '{"a":{"c":null,"d":[{"e":2,"f":1}]},"b":1}',
    );
  });
});
