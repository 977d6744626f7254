// fast-check arbitraries of DevicePluginConfig objects in both API versions, for the conversion properties.
// Every field of the zod schemas is drawn, each optional one also absent; `invalid` mixes in values the
// schemas refuse (bounds, patterns, unions, CEL rules) so validity itself can be compared.
import fc from "fast-check";
import type { AlphaObject, BetaObject } from "../../../src/api/conversion/index.js";
import { LOST_FIELDS_ANNOTATION } from "../../../src/api/conversion/index.js";
import {
  ALLOCATION_POLICIES,
  BACKEND_TYPES,
  checkDefaultDriverName,
  LOG_LEVELS,
  PUBLISH_MODES,
  UPGRADE_STRATEGIES,
} from "../../../src/api/v1beta1/spec.js";
import {
  V1ALPHA1_ALLOCATION_POLICIES,
  V1ALPHA1_MEMBER_BACKEND_TYPES,
} from "../../../src/api/v1alpha1/spec.js";
import { CONDITION_TYPES } from "../../../src/api/v1beta1/status.js";
import { backendType, members, partial, pick, type Options } from "./api-arbitrary-backends.js";
import { takeover } from "./takeover-arbitraries.js";

export type { Options };

const resourceName = (o: Options) =>
  pick(
    o,
    fc.constantFrom("hardware-vendor.example/foo", "nvidia.com/gpu", "example.com/a_b.c-d"),
    "foo",
    "kubernetes.io/foo",
    "requests.example.com/foo",
    "Example.com/foo",
    "a/b/c",
  );

/** fast-check builds some records without a prototype; objects read from YAML or JSON have one. */
function plain<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/** Drops keys whose value is undefined, so "absent" is really absent. */
function compact<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

const tolerations = (o: Options) =>
  fc.array(
    partial({
      key: fc.constantFrom("dedicated", "gpu"),
      operator: fc.constantFrom("Exists" as const, "Equal" as const),
      value: fc.constantFrom("", "foo"),
      effect: fc.constantFrom("NoSchedule" as const, "NoExecute" as const),
      tolerationSeconds: fc.integer({ min: 0, max: 3600 }),
    }).filter(
      (t) =>
        o.invalid ||
        ((t.operator !== "Exists" || !t.value) &&
          (t.tolerationSeconds === undefined || t.effect === "NoExecute")),
    ),
    { maxLength: 2 },
  );

const nodeSelector = (o: Options) =>
  fc.dictionary(
    fc.constantFrom("feature.example/foo", "kubernetes.io/arch"),
    pick(o, fc.constantFrom("true", "amd64", ""), "not valid!"),
    {
      maxKeys: 2,
    },
  );

/** spec.nodeSelectorTerm (v1beta1 only): operators with the values each takes, or (invalid) the wrong ones. */
const nodeSelectorTerm = (o: Options) =>
  partial({
    matchExpressions: fc.array(
      fc
        .record({
          key: fc.constantFrom("feature.example/pool", "memory-gb"),
          operator: fc.constantFrom("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"),
          values: fc.constantFrom(undefined, ["a"], ["a", "b"], ["80"], ["-3"], ["x"]),
        })
        .map((r) => compact(r))
        .filter((r) => {
          if (o.invalid) return true;
          const n = r.values?.length ?? 0;
          if (r.operator === "In" || r.operator === "NotIn") return n > 0;
          if (r.operator === "Exists" || r.operator === "DoesNotExist") return n === 0;
          return n === 1 && /^-?[0-9]+$/.test(r.values?.[0] ?? "");
        }),
      { maxLength: 3 },
    ),
  });

const logLevel = (o: Options) =>
  pick(o, fc.constantFrom(...LOG_LEVELS), "verbose" as (typeof LOG_LEVELS)[number]);

/** spec.upgrade: the same shape in both versions. */
const upgrade = (o: Options) =>
  partial({
    strategy: fc.constantFrom(...UPGRADE_STRATEGIES),
    maxUnavailable: pick<number | `${number}%`>(
      o,
      fc.oneof(fc.integer({ min: 1, max: 50 }), fc.constantFrom("10%" as const, "100%" as const)),
      0,
      "0%",
    ),
    progressDeadlineSeconds: fc.integer({ min: 10, max: 3600 }),
    paused: fc.boolean(),
    autoRollback: fc.boolean(),
  });

/** spec.nodeLabels: the same shape in both versions. */
const nodeLabels = partial({ enabled: fc.boolean() });

/** spec.publish and spec.dra: the same shape in both versions. */
const publish = fc.constantFrom(...PUBLISH_MODES);
const dra = (o: Options) =>
  partial({
    driverName: pick(
      o,
      fc.constantFrom("gpu.example.com", "foo.hardware-vendor.example"),
      "Gpu_X",
      "x".repeat(64),
    ),
    deviceClass: partial({
      // Invalid class names are the config fuzzer's (test/fuzz); one invalid pick here is enough.
      name: fc.constantFrom("gpu.example.com", "big-gpus"),
      // Invalid ones too are the config fuzzer's (its pattern samples) and the fixtures'.
      extendedResourceName: fc.constantFrom("example.com/accelerator", "nvidia.com/gpu", ""),
      selectors: fc.array(
        fc.record({
          cel: fc.record({
            expression: fc.constantFrom('device.attributes["gpu.example.com"].model == "X100"', "true"),
          }),
        }),
        { maxLength: 2 },
      ),
    }),
  });

/**
 * Whether publish and dra agree with the rest of a spec: DRA needs a driver name (given, or valid as
 * defaulted from the resource name) and no time-slicing.
 */
function publishHolds(spec: {
  resourceName: string;
  publish?: string;
  dra?: { driverName?: string };
  timeSliced: boolean;
}): boolean {
  if (spec.publish !== "DRA") return true;
  if (spec.timeSliced) return false;
  return spec.dra?.driverName !== undefined || checkDefaultDriverName(spec.resourceName) === undefined;
}

/**
 * Specs that break a rule across fields (`holds` false): never when only valid objects are asked for, and
 * then one time in twelve, like a single invalid pick, so the mix keeps enough valid objects.
 */
function keepingFewBroken<T>(o: Options, spec: fc.Arbitrary<T>, holds: (s: T) => boolean): fc.Arbitrary<T> {
  return fc
    .tuple(spec, fc.integer({ min: 0, max: 11 }))
    .filter(([s, roll]) => holds(s) || (o.invalid && roll === 0))
    .map(([s]) => s);
}

const image = (o: Options) => pick(o, fc.constantFrom("", "registry.example/dpo:1.0"), "x".repeat(1025));

/** spec.plugin's pod fields, each also empty where a list or map; invalid: bad names, reserved keys and env. */
const pluginPodFields = (o: Options) => ({
  imagePullSecrets: fc.array(
    fc.record({ name: pick(o, fc.constantFrom("regcred", "mirror.example"), "RegCred", "") }),
    { maxLength: 2 },
  ),
  imagePullPolicy: pick(o, fc.constantFrom("Always" as const, "IfNotPresent" as const, "Never" as const)),
  runtimeClassName: pick(o, fc.constantFrom("nvidia", "kata.example"), "Nvidia", ""),
  podAnnotations: fc.dictionary(
    pick(o, fc.constantFrom("example.com/team", "prometheus.io/scrape", "note"), "dpo.dev/x", "-bad"),
    fc.constantFrom("", "true", '{"a":1}'),
    { maxKeys: 2 },
  ),
  env: envList(o),
});

/** Extra env: valid lists name each variable once; invalid ones may repeat a name too. */
function envList(o: Options) {
  const item = fc.record(
    {
      name: pick(
        o,
        fc.constantFrom("LANG", "TZ", "my.var"),
        "NODE_NAME",
        "DPO_X",
        "1X",
        "NODE_OPTIONS",
        "LD_PRELOAD",
      ),
      value: fc.constantFrom("", "C.UTF-8", "$(NODE_NAME)"),
    },
    { requiredKeys: ["name"] },
  );
  return o.invalid
    ? fc.array(item, { maxLength: 2 })
    : fc.uniqueArray(item, { maxLength: 2, selector: (e) => e.name });
}

/** metadata: a name, and annotations absent, empty, or with other keys (sometimes the reserved one). */
const metadata = (o: Options) =>
  fc.record(
    {
      name: pick(o, fc.constantFrom("foo", "example-mock"), "Foo_Bar"),
      labels: fc.dictionary(fc.constantFrom("app", "team"), fc.constantFrom("dpo", "a")),
      annotations: fc.dictionary(fc.constantFrom("note", "example.com/owner"), fc.constantFrom("x", "{}"), {
        maxKeys: 2,
      }),
      generation: fc.integer({ min: 1, max: 5 }),
      uid: fc.constantFrom("0b5c2e8e-1111-2222-3333-444455556666"),
      creationTimestamp: fc.constantFrom("2025-01-01T00:00:00Z"),
    },
    { requiredKeys: ["name"] },
  );

/** A status as the operator writes it; identical in both versions. */
const status = fc.record(
  {
    observedGeneration: fc.integer({ min: 0, max: 5 }),
    conditions: fc.array(
      fc.record({
        type: fc.constantFrom(...CONDITION_TYPES),
        status: fc.constantFrom("True", "False", "Unknown"),
        reason: fc.constantFrom(
          "AllNodesReady",
          "UnhealthyDevices",
          "KubeletWithoutPerSocketEndpoints",
          "ResourceAPIUnavailable",
        ),
        message: fc.constantFrom(
          "",
          "1 node has unhealthy devices",
          "2 of 3 nodes replace instead of surging: their kubelets (v1.35.4) are older than v1.37.0, which per-socket device-plugin endpoints need",
        ),
        lastTransitionTime: fc.constant("2025-01-01T00:00:00Z"),
      }),
      { maxLength: 2 },
    ),
    nodes: fc.constant({ desired: 3, ready: 2, updated: 3, summary: "2/3" }),
    // allocated is optional: statuses of operators before it have none, and both must survive.
    devices: fc.record(
      {
        capacity: fc.constant(12),
        allocatable: fc.constant(11),
        unhealthy: fc.constant(1),
        allocated: fc.integer({ min: 0, max: 11 }),
        summary: fc.constant("11/12"),
      },
      { requiredKeys: ["capacity", "allocatable", "unhealthy", "summary"] },
    ),
    problems: fc.constant([{ node: "n3", reason: "UnhealthyDevices", devices: ["foo-1"] }]),
  },
  { requiredKeys: [] },
);

/** A v1beta1 DevicePluginConfig. */
export function betaObject(o: Options): fc.Arbitrary<BetaObject> {
  const sharing = partial({
    strategy: pick(o, fc.constantFrom("None" as const, "TimeSlicing" as const)),
    replicas: pick(o, fc.integer({ min: 1, max: 1024 }), 0, 1025),
    failRequestsGreaterThanOne: fc.boolean(),
  }).filter(
    (s) =>
      o.invalid ||
      ((s.strategy !== "TimeSlicing" || (s.replicas ?? 0) >= 2) &&
        (s.strategy === "TimeSlicing" || s.replicas === undefined || s.replicas === 1)),
  );
  const spec = backendType.chain((type) =>
    fc.record(
      {
        resourceName: resourceName(o),
        backend: members(o, type, true).map((m) => compact({ type, ...m })),
        sharing,
        topology: partial({ allocationPolicy: fc.constantFrom(...ALLOCATION_POLICIES) }),
        cdi: partial({
          enabled: fc.boolean(),
          kind: pick(o, fc.constantFrom("vendor.example/foo"), "not a kind"),
        }),
        nodeSelector: nodeSelector(o),
        nodeSelectorTerm: nodeSelectorTerm(o),
        priority: pick(o, fc.integer({ min: -1000, max: 1000 }), 1001),
        tolerations: tolerations(o),
        plugin: partial({
          image: image(o),
          priorityClassName: fc.constantFrom("system-node-critical", "high"),
          resources: partial({
            requests: fc.dictionary(
              fc.constantFrom("cpu", "memory"),
              pick(o, fc.constantFrom("100m", "64Mi"), "lots"),
            ),
            limits: fc.dictionary(fc.constantFrom("cpu", "memory"), fc.constantFrom("1", "128Mi")),
          }),
          logLevel: logLevel(o),
          ...pluginPodFields(o),
        }),
        upgrade: upgrade(o),
        publish,
        dra: dra(o),
        takeover: takeover(o),
        nodeLabels,
      },
      { requiredKeys: ["resourceName", "backend"] },
    ),
  );
  const checkedSpec = keepingFewBroken(o, spec, (s) =>
    publishHolds({ ...s, timeSliced: s.sharing?.strategy === "TimeSlicing" }),
  );
  return fc
    .record(
      {
        apiVersion: fc.constant("dpo.dev/v1beta1" as const),
        kind: fc.constant("DevicePluginConfig" as const),
        metadata: metadata(o),
        spec: checkedSpec,
        status,
      },
      { requiredKeys: ["apiVersion", "kind", "metadata", "spec"] },
    )
    .map((b) => plain(b) as BetaObject);
}

/**
 * A v1alpha1 DevicePluginConfig without the conversion annotation. Backends v1alpha1 has no member for
 * (NVIDIA) need the annotation, so only the mixed generator draws them, as invalid objects.
 */
export function alphaObject(o: Options): fc.Arbitrary<AlphaObject> {
  const types = o.invalid ? BACKEND_TYPES : V1ALPHA1_MEMBER_BACKEND_TYPES;
  const spec = fc.constantFrom(...types).chain((type) =>
    fc
      .record(
        {
          resourceName: resourceName(o),
          backend: fc.constant(type),
          members: members(o, type),
          sharedDevNum: pick(o, fc.integer({ min: 1, max: 1024 }), 0, -3, 1025),
          preferredAllocationPolicy: fc.constantFrom(...V1ALPHA1_ALLOCATION_POLICIES),
          nodeSelector: nodeSelector(o),
          tolerations: tolerations(o),
          image: image(o),
          logLevel: logLevel(o),
          upgrade: upgrade(o),
          publish,
          dra: dra(o),
          takeover: takeover(o),
          nodeLabels,
        },
        { requiredKeys: ["resourceName", "backend", "members"] },
      )
      .map(({ members: m, ...rest }) => compact({ ...rest, mock: m.mock, devfs: m.devFS, pci: m.pci })),
  );
  const checkedSpec = keepingFewBroken(o, spec, (s) =>
    publishHolds({ ...s, timeSliced: (s.sharedDevNum ?? 1) > 1 }),
  );
  return fc
    .record(
      {
        apiVersion: fc.constant("dpo.dev/v1alpha1" as const),
        kind: fc.constant("DevicePluginConfig" as const),
        metadata: metadata(o),
        spec: checkedSpec,
        status,
      },
      { requiredKeys: ["apiVersion", "kind", "metadata", "spec"] },
    )
    .map((a) => plain(a) as AlphaObject);
}

/** A v1beta1 object that also carries the reserved annotation, as one copied from a v1alpha1 manifest might. */
export function betaWithCopiedAnnotation(o: Options): fc.Arbitrary<BetaObject> {
  return fc
    .tuple(betaObject(o), fc.constantFrom("{}", '{"spec":{"cdi":{"enabled":true}}}', "not json"))
    .map(([b, value]) => ({
      ...b,
      metadata: {
        ...b.metadata,
        annotations: { ...b.metadata.annotations, [LOST_FIELDS_ANNOTATION]: value },
      },
    }));
}
