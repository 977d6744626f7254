// spec.plugin's pod fields (imagePullSecrets, imagePullPolicy, runtimeClassName, podAnnotations, env): what is
// refused and why, what the plugin pod gets, how the Secrets combine with the operator's flag, that a change
// is a new revision, that others' annotations are no drift, and that v1alpha1 carries them through.
import type { V1DaemonSet } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { toV1alpha1, toV1beta1, LOST_FIELDS_ANNOTATION } from "../../../../src/api/conversion/index.js";
import { devicePluginConfigCrd } from "../../../../src/api/crd.js";
import {
  validateAnyVersion,
  validateDevicePluginConfig,
  type FieldError,
} from "../../../../src/api/validate.js";
import {
  DevicePluginConfigSchema,
  type DevicePluginConfig,
  type DevicePluginConfigInput,
} from "../../../../src/api/v1beta1/config.js";
import {
  ENV_LOADER_RULE,
  isLoaderEnvName,
  isReservedEnvName,
  LOADER_ENV_MESSAGE,
  RESERVED_ENV_MESSAGE,
  type DevicePluginConfigSpecInput,
} from "../../../../src/api/v1beta1/spec.js";
import { PLUGIN_FLAGS } from "../../../../src/cli/plugin.js";
import type { RenderContext } from "../../../../src/operator/render/context.js";
import { pluginRevision, renderPluginDaemonSet } from "../../../../src/operator/render/daemonset.js";
import { pluginImagePullSecrets } from "../../../../src/operator/render/pull-secrets.js";
import { renderRevision } from "../../../../src/operator/render/revision.js";
import { decideRollout, type RolloutInput } from "../../../../src/operator/upgrade/rollout.js";

const ctx: RenderContext = {
  namespace: "dpo-system",
  operatorImage: "registry.example/dpo:1.2.3",
  pluginServiceAccount: "dpo-plugin",
  registrationMode: "kubelet",
};

type Plugin = NonNullable<DevicePluginConfigSpecInput["plugin"]>;

function input(spec: Partial<DevicePluginConfigSpecInput> = {}): DevicePluginConfigInput {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: "example-foo", uid: "uid-1", generation: 1 },
    spec: {
      resourceName: "hardware-vendor.example/foo",
      backend: { type: "Mock", mock: { devices: 4 } },
      ...spec,
    },
  };
}

function config(spec: Partial<DevicePluginConfigSpecInput> = {}): DevicePluginConfig {
  return DevicePluginConfigSchema.parse(input(spec));
}

const withPlugin = (plugin: Plugin) => config({ plugin });

function errorsOf(plugin: unknown): FieldError[] {
  const r = validateAnyVersion({ ...input(), spec: { ...input().spec, plugin } });
  return r.ok ? [] : r.errors;
}

const ALL_FIELDS: Plugin = {
  imagePullSecrets: [{ name: "regcred" }, { name: "mirror.example" }],
  imagePullPolicy: "Always",
  runtimeClassName: "nvidia",
  podAnnotations: { "example.com/team": "gpu", "prometheus.io/scrape": "true" },
  env: [
    { name: "LANG", value: "C.UTF-8" },
    { name: "TZ", value: "UTC" },
  ],
};

describe("spec.plugin's pod fields: what is refused, naming the field", () => {
  const reserved: FieldError = { path: "spec.plugin.env[0].name", message: RESERVED_ENV_MESSAGE };
  it.each<{ what: string; plugin: unknown; errors: FieldError[] }>([
    {
      what: "a Secret name in upper case",
      plugin: { imagePullSecrets: [{ name: "RegCred" }] },
      errors: [
        {
          path: "spec.plugin.imagePullSecrets[0].name",
          message: "must be a lowercase RFC 1123 subdomain, e.g. regcred",
        },
      ],
    },
    {
      what: "a Secret reference without a name",
      plugin: { imagePullSecrets: [{}] },
      errors: [{ path: "spec.plugin.imagePullSecrets[0].name", message: "must be set" }],
    },
    {
      what: "a Secret given as a bare string",
      plugin: { imagePullSecrets: ["regcred"] },
      errors: [{ path: "spec.plugin.imagePullSecrets[0]", message: "must be an object" }],
    },
    {
      what: "too many Secrets",
      plugin: { imagePullSecrets: Array.from({ length: 33 }, (_, i) => ({ name: `s${i}` })) },
      errors: [{ path: "spec.plugin.imagePullSecrets", message: "must have at most 32 items" }],
    },
    {
      what: "a pull policy of another spelling",
      plugin: { imagePullPolicy: "always" },
      errors: [
        { path: "spec.plugin.imagePullPolicy", message: "must be one of Always, IfNotPresent, Never" },
      ],
    },
    {
      what: "a RuntimeClass name with an underscore",
      plugin: { runtimeClassName: "nvidia_runtime" },
      errors: [
        {
          path: "spec.plugin.runtimeClassName",
          message: "must be a lowercase RFC 1123 subdomain, e.g. nvidia",
        },
      ],
    },
    {
      what: "an empty RuntimeClass name",
      plugin: { runtimeClassName: "" },
      errors: [
        { path: "spec.plugin.runtimeClassName", message: "must not be empty" },
        {
          path: "spec.plugin.runtimeClassName",
          message: "must be a lowercase RFC 1123 subdomain, e.g. nvidia",
        },
      ],
    },
    {
      what: "an annotation key that is not a qualified name",
      plugin: { podAnnotations: { "example.com/a b": "x" } },
      errors: [
        {
          path: "spec.plugin.podAnnotations",
          message:
            "key \"example.com/a b\": keys must be qualified names: an optional DNS subdomain of at most 253 characters and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
        },
      ],
    },
    {
      what: "an annotation key whose name is longer than 63 characters",
      plugin: { podAnnotations: { [`example.com/${"a".repeat(64)}`]: "x" } },
      errors: [expect.objectContaining({ path: "spec.plugin.podAnnotations" }) as FieldError],
    },
    {
      what: "an annotation in the operator's domain",
      plugin: { podAnnotations: { "dpo.dev/config-hash": "0" } },
      errors: [
        {
          path: "spec.plugin.podAnnotations",
          message:
            'key "dpo.dev/config-hash": keys must not be in the dpo.dev domain: the operator sets those annotations itself',
        },
      ],
    },
    {
      what: "an annotation in a subdomain of the operator's domain",
      plugin: { podAnnotations: { "upgrade.dpo.dev/x": "0" } },
      errors: [expect.objectContaining({ path: "spec.plugin.podAnnotations" }) as FieldError],
    },
    {
      what: "an annotation value that is not a string",
      plugin: { podAnnotations: { "example.com/replicas": 2 } },
      errors: [{ path: "spec.plugin.podAnnotations.example.com/replicas", message: "must be a string" }],
    },
    {
      what: "too many annotations",
      plugin: { podAnnotations: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`a${i}`, ""])) },
      errors: [{ path: "spec.plugin.podAnnotations", message: "must have at most 32 entries" }],
    },
    {
      what: "an env var the downward API sets",
      plugin: { env: [{ name: "NODE_NAME", value: "x" }] },
      errors: [reserved],
    },
    { what: "POD_NAMESPACE", plugin: { env: [{ name: "POD_NAMESPACE" }] }, errors: [reserved] },
    { what: "POD_UID", plugin: { env: [{ name: "POD_UID" }] }, errors: [reserved] },
    {
      what: "a DPO_ variable",
      plugin: { env: [{ name: "DPO_LOG_LEVEL", value: "trace" }] },
      errors: [reserved],
    },
    {
      what: "an NVIDIA Container Toolkit variable",
      plugin: { env: [{ name: "NVIDIA_VISIBLE_DEVICES", value: "0" }] },
      errors: [reserved],
    },
    {
      what: "an env name starting with a digit",
      plugin: { env: [{ name: "1X" }] },
      errors: [
        {
          path: "spec.plugin.env[0].name",
          message: "must consist of letters, digits, '_', '-' and '.', and not start with a digit",
        },
      ],
    },
    {
      what: "an env var named twice",
      plugin: {
        env: [
          { name: "TZ", value: "UTC" },
          { name: "TZ", value: "CET" },
        ],
      },
      errors: [{ path: "spec.plugin.env[1]", message: "must not repeat the name TZ" }],
    },
    {
      // The API server checks the keys beside every other problem, and names a value's second appearance only.
      what: "an env name three times, beside an item without a name and too many items",
      plugin: {
        env: [
          { name: "TZ" },
          { value: "x" },
          { name: "TZ" },
          { name: "TZ" },
          ...Array.from({ length: 62 }, (_, i) => ({ name: `V${i}` })),
        ],
      },
      errors: [
        { path: "spec.plugin.env[1].name", message: "must be set" },
        { path: "spec.plugin.env", message: "must have at most 64 items" },
        { path: "spec.plugin.env[2]", message: "must not repeat the name TZ" },
      ],
    },
    {
      what: "two env items without a name",
      plugin: { env: [{ value: "a" }, { value: "b" }] },
      errors: [
        { path: "spec.plugin.env[0].name", message: "must be set" },
        { path: "spec.plugin.env[1].name", message: "must be set" },
        { path: "spec.plugin.env[1]", message: "must not repeat the name (no name)" },
      ],
    },
    {
      what: "an env item that is not an object, which the API server names alone",
      plugin: { env: [{ name: "TZ" }, "TZ", { name: "TZ" }] },
      errors: [expect.objectContaining({ path: "spec.plugin.env[1]" }) as FieldError],
    },
    {
      what: "valueFrom, which only literal values replace",
      plugin: { env: [{ name: "TOKEN", valueFrom: { secretKeyRef: { name: "s", key: "k" } } }] },
      errors: [{ path: "spec.plugin.env[0].valueFrom", message: "unknown field" }],
    },
    {
      what: "an env value too long",
      plugin: { env: [{ name: "BIG", value: "x".repeat(4097) }] },
      errors: [{ path: "spec.plugin.env[0].value", message: "must be at most 4096 characters" }],
    },
  ])("$what", ({ plugin, errors }) => {
    expect(errorsOf(plugin)).toEqual(errors);
  });

  it("accepts every field set, and keeps them as written", () => {
    const r = validateDevicePluginConfig(input({ plugin: ALL_FIELDS }));
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    expect(r.value.spec.plugin).toMatchObject(ALL_FIELDS);
  });

  it.each([
    ["an env var without a value", { env: [{ name: "DEBUG" }] }],
    ["a dotted env name", { env: [{ name: "my.var", value: "" }] }],
    ["an annotation without a prefix", { podAnnotations: { note: "" } }],
    [
      "an annotation of another tool's domain",
      { podAnnotations: { "kubectl.kubernetes.io/default-container": "plugin" } },
    ],
    ["a dpo.dev look-alike domain", { podAnnotations: { "notdpo.dev/x": "1" } }],
    ["empty lists and maps", { imagePullSecrets: [], podAnnotations: {}, env: [] }],
  ])("accepts %s", (_what, plugin) => {
    expect(errorsOf(plugin)).toEqual([]);
  });

  it("adds no defaults: a config without them parses, hashes and renders as before the fields existed", () => {
    // A default here would change every stored config's plugin ConfigMap, and so roll every plugin when
    // the operator is upgraded.
    expect(Object.keys(config().spec.plugin).sort()).toEqual([
      "image",
      "logLevel",
      "priorityClassName",
      "resources",
    ]);
    const pod = renderPluginDaemonSet(config(), ctx).spec!.template;
    expect(pod.spec).not.toHaveProperty("runtimeClassName");
    expect(pod.spec).not.toHaveProperty("imagePullSecrets");
    expect(pod.spec!.containers[0]!.imagePullPolicy).toBe("IfNotPresent");
    expect(Object.keys(pod.metadata!.annotations!)).toEqual(["dpo.dev/config-hash"]);
  });
});

describe("spec.plugin.env refuses what changes how the runtime loads code or whom it trusts", () => {
  const loader = (index: number, name: string): FieldError => ({
    path: `spec.plugin.env[${index}].name`,
    message: `${name} ${LOADER_ENV_MESSAGE}`,
  });
  it.each([
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_EXTRA_CA_CERTS",
    "NODE_TLS_REJECT_UNAUTHORIZED",
    "NODE_COMPILE_CACHE",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "GLIBC_TUNABLES",
    "OPENSSL_CONF",
    "SSL_CERT_FILE",
    "HTTPS_PROXY",
    "http_proxy",
    "NO_PROXY",
  ])("%s, naming the item and the variable", (name) => {
    const env = [{ name: "TZ", value: "UTC" }, { name: "LANG" }, { name, value: "--inspect=0.0.0.0:9229" }];
    expect(errorsOf({ env })).toEqual([loader(2, name)]);
  });

  it("a name the operator sets gets the reserved message alone, as the CRD's two rules give", () => {
    expect(errorsOf({ env: [{ name: "NODE_NAME" }] })).toEqual([
      { path: "spec.plugin.env[0].name", message: RESERVED_ENV_MESSAGE },
    ]);
    expect(isLoaderEnvName("NODE_NAME")).toBe(false);
  });

  it.each(["TZ", "LANG", "NODEOPTIONS", "MY_NODE_OPTIONS", "node_options", "LDPRELOAD", "GOMAXPROCS"])(
    "accepts %s",
    (name) => {
      expect(errorsOf({ env: [{ name }] })).toEqual([]);
    },
  );

  it("the CRD carries the rule on each env item, naming the variable in its message", () => {
    const beta = devicePluginConfigCrd().spec.versions.find((v) => v.name === "v1beta1")!;
    const items = beta.schema.openAPIV3Schema.properties!.spec!.properties!.plugin!.properties!.env!.items!;
    expect(items["x-kubernetes-validations"]).toContainEqual(
      expect.objectContaining({
        rule: ENV_LOADER_RULE,
        messageExpression: `self.name + ' ${LOADER_ENV_MESSAGE}'`,
        fieldPath: ".name",
      }),
    );
  });

  it("a v1alpha1 object whose conversion annotation restores NODE_OPTIONS is refused at the annotation", () => {
    const beta = validateDevicePluginConfig(input({ plugin: { env: [{ name: "TZ" }] } }));
    if (!beta.ok) throw new Error(JSON.stringify(beta.errors));
    const alpha = toV1alpha1(beta.value);
    const annotations = alpha.metadata.annotations!;
    annotations[LOST_FIELDS_ANNOTATION] = annotations[LOST_FIELDS_ANNOTATION]!.replace(
      '"TZ"',
      '"NODE_OPTIONS"',
    );
    const r = validateAnyVersion(alpha);
    expect(r.ok).toBe(false);
    expect(r.ok ? [] : r.errors.map((e) => `${e.path}: ${e.message}`)).toEqual([
      `metadata.annotations[${LOST_FIELDS_ANNOTATION}]: restores an invalid spec.plugin.env[0].name: NODE_OPTIONS ${LOADER_ENV_MESSAGE}`,
    ]);
  });
});

describe("the env names the operator sets are the reserved ones", () => {
  const specs: [string, Partial<DevicePluginConfigSpecInput>][] = [
    ["Mock", {}],
    ["NVIDIA", { backend: { type: "NVIDIA", nvidia: { dmesgPath: "/usr/bin/dmesg" } } }],
    ["DevFS", { backend: { type: "DevFS", devFS: { paths: [{ glob: "/dev/ttyUSB*" }] } } }],
    ["PCI", { backend: { type: "PCI", pci: { vendor: "10de" } } }],
    ["DRA", { publish: "DRA" }],
  ];
  it.each(specs)("every env var of the %s plugin container is refused in spec.plugin.env", (_what, spec) => {
    for (const registrationMode of ["kubelet", "watcher"] as const) {
      const env = renderPluginDaemonSet(config(spec), { ...ctx, registrationMode }).spec!.template.spec!
        .containers[0]!.env!;
      expect(env.length).toBeGreaterThan(0);
      for (const { name } of env) expect(isReservedEnvName(name), name).toBe(true);
    }
  });

  it("every environment twin of a plugin flag is refused: the operator passes those flags itself or fixes their paths", () => {
    for (const flag of PLUGIN_FLAGS) expect(isReservedEnvName(flag.env), flag.env).toBe(true);
  });
});

describe("renderPluginDaemonSet with spec.plugin's pod fields", () => {
  const pod = (plugin: Plugin) => renderPluginDaemonSet(withPlugin(plugin), ctx).spec!.template;

  it.each<{ field: string; plugin: Plugin; check: (ds: ReturnType<typeof pod>) => void }>([
    {
      field: "imagePullPolicy",
      plugin: { imagePullPolicy: "Always" },
      check: (t) => expect(t.spec!.containers[0]!.imagePullPolicy).toBe("Always"),
    },
    {
      field: "runtimeClassName",
      plugin: { runtimeClassName: "nvidia" },
      check: (t) => expect(t.spec!.runtimeClassName).toBe("nvidia"),
    },
    {
      field: "imagePullSecrets",
      plugin: { imagePullSecrets: [{ name: "regcred" }] },
      check: (t) => expect(t.spec!.imagePullSecrets).toEqual([{ name: "regcred" }]),
    },
    {
      field: "podAnnotations, beside the operator's own",
      plugin: { podAnnotations: { "example.com/team": "gpu" } },
      check: (t) =>
        expect(t.metadata!.annotations).toEqual({
          "example.com/team": "gpu",
          "dpo.dev/config-hash": expect.stringMatching(/^[0-9a-f]{16}$/) as string,
        }),
    },
    {
      field: "env, after the operator's own so values may refer to them",
      plugin: { env: [{ name: "HOST", value: "$(NODE_NAME)" }, { name: "EMPTY" }] },
      check: (t) => {
        const env = t.spec!.containers[0]!.env!;
        const names = env.map((e) => e.name);
        expect(names.indexOf("HOST")).toBeGreaterThan(names.indexOf("NODE_NAME"));
        expect(env.filter((e) => e.name === "HOST" || e.name === "EMPTY")).toEqual([
          { name: "HOST", value: "$(NODE_NAME)" },
          { name: "EMPTY" },
        ]);
        // The revision stays last, appended to the rendered template.
        expect(names.at(-1)).toBe("DPO_REVISION");
      },
    },
  ])("renders $field", ({ plugin, check }) => {
    check(pod(plugin));
  });

  it("every field is part of the revision: changing any rolls the plugin out as a new revision", () => {
    const base = pluginRevision(withPlugin(ALL_FIELDS), ctx);
    const changes: Plugin[] = [
      { ...ALL_FIELDS, imagePullSecrets: [{ name: "regcred" }] },
      { ...ALL_FIELDS, imagePullPolicy: "IfNotPresent" },
      { ...ALL_FIELDS, runtimeClassName: "kata" },
      { ...ALL_FIELDS, podAnnotations: { "example.com/team": "other" } },
      { ...ALL_FIELDS, env: [{ name: "TZ", value: "CET" }] },
    ];
    const revisions = changes.map((plugin) => pluginRevision(withPlugin(plugin), ctx));
    expect(new Set([base, ...revisions]).size).toBe(1 + changes.length);
    expect(pluginRevision(withPlugin(ALL_FIELDS), ctx)).toBe(base);
  });
});

describe("spec.plugin.imagePullSecrets with the operator's --plugin-image-pull-secrets: the union, the config's first", () => {
  it.each<{ what: string; spec?: string[]; flag?: string[]; want: string[] | undefined }>([
    { what: "neither", want: undefined },
    { what: "only the flag's", flag: ["operator-cred"], want: ["operator-cred"] },
    { what: "only the config's", spec: ["regcred"], want: ["regcred"] },
    {
      what: "both, the config's first",
      spec: ["regcred"],
      flag: ["operator-cred"],
      want: ["regcred", "operator-cred"],
    },
    {
      what: "a name in both, once, where the config puts it",
      spec: ["b", "a"],
      flag: ["a", "c"],
      want: ["b", "a", "c"],
    },
    { what: "a name twice in the config, once", spec: ["a", "a"], want: ["a"] },
    { what: "empty lists", spec: [], flag: [], want: undefined },
  ])("$what", ({ spec, flag, want }) => {
    const fromSpec = spec?.map((name) => ({ name }));
    const context = flag === undefined ? ctx : { ...ctx, pluginImagePullSecrets: flag };
    expect(pluginImagePullSecrets(context, fromSpec)).toEqual(want?.map((name) => ({ name })));
    const rendered = renderPluginDaemonSet(
      config(fromSpec === undefined ? {} : { plugin: { imagePullSecrets: fromSpec } }),
      context,
    );
    expect(rendered.spec!.template.spec!.imagePullSecrets).toEqual(want?.map((name) => ({ name })));
  });
});

describe("a rollout with podAnnotations: the operator's render is compared, others' additions are no drift", () => {
  const NOW = Date.parse("2026-11-23T12:00:00Z");
  const WITH = withPlugin(ALL_FIELDS);
  const stored = (c: DevicePluginConfig): V1DaemonSet => {
    const ds = renderPluginDaemonSet(c, ctx);
    ds.metadata = { ...ds.metadata, uid: "ds-1", resourceVersion: "7", creationTimestamp: new Date(0) };
    return ds;
  };
  const decide = (c: DevicePluginConfig, ds: V1DaemonSet) =>
    decideRollout({
      desired: renderRevision(c, ctx),
      daemonSets: [ds],
      nodes: [
        {
          metadata: { name: "a" },
          status: {
            allocatable: { "hardware-vendor.example/foo": "4" },
            nodeInfo: { kubeletVersion: "v1.37.0" } as never,
          },
        },
      ],
      pods: [],
      reports: [],
      now: NOW,
    } satisfies RolloutInput);

  it("writes nothing when the live template carries the config's annotations and another's", () => {
    const ds = stored(WITH);
    ds.spec!.template.metadata!.annotations!["kubectl.kubernetes.io/restartedAt"] = "2026-11-23T11:00:00Z";
    expect(decide(WITH, ds).writes).toEqual([]);
  });

  it.each<[string, (ds: V1DaemonSet) => void]>([
    ["a removed annotation", (ds) => delete ds.spec!.template.metadata!.annotations!["example.com/team"]],
    ["an edited annotation", (ds) => (ds.spec!.template.metadata!.annotations!["example.com/team"] = "x")],
    ["a removed runtimeClassName", (ds) => delete ds.spec!.template.spec!.runtimeClassName],
    [
      "an edited env value",
      (ds) => (ds.spec!.template.spec!.containers[0]!.env!.find((e) => e.name === "TZ")!.value = "x"),
    ],
    ["a removed pull Secret", (ds) => ds.spec!.template.spec!.imagePullSecrets!.pop()],
  ])("puts back %s in one write", (_what, edit) => {
    const ds = stored(WITH);
    const rendered = structuredClone(ds.spec);
    edit(ds);
    const d = decide(WITH, ds);
    expect(d.writes.map((w) => w.kind)).toEqual(["Update"]);
    const put = d.writes[0]!.kind === "Update" ? d.writes[0]!.daemonSet : undefined;
    expect(put?.spec).toEqual(rendered);
  });

  it("starts an upgrade to a new revision when podAnnotations change", () => {
    const changed = withPlugin({ ...ALL_FIELDS, podAnnotations: { "example.com/team": "other" } });
    const d = decide(changed, stored(WITH));
    expect(d.writes.map((w) => w.kind)).toEqual(["Create"]);
    expect(d.status.updateRevision).toBe(pluginRevision(changed, ctx));
    expect(d.status.currentRevision).toBe(pluginRevision(WITH, ctx));
  });
});

describe("v1beta1 → v1alpha1 → v1beta1 keeps the pod fields", () => {
  it("carries them in the conversion annotation and restores them", () => {
    const beta = input({ plugin: ALL_FIELDS });
    const alpha = toV1alpha1(beta);
    expect(JSON.parse(alpha.metadata.annotations![LOST_FIELDS_ANNOTATION]!)).toEqual({
      spec: { plugin: ALL_FIELDS },
    });
    const back = toV1beta1(alpha);
    if (!back.ok) throw new Error(back.error);
    expect(back.warnings).toEqual([]);
    expect(back.value).toStrictEqual(beta);
  });
});
