// spec.plugin's pod fields (imagePullSecrets, imagePullPolicy, runtimeClassName, podAnnotations, env): what is
// refused, naming the field, the env names refused because they change how the runtime loads code or whom it
// trusts, and the env names the operator sets being the reserved ones.
import { describe, expect, it } from "vitest";
import { toV1alpha1, LOST_FIELDS_ANNOTATION } from "../../../../src/api/conversion/index.js";
import { devicePluginConfigCrd } from "../../../../src/api/crd.js";
import {
  validateAnyVersion,
  validateDevicePluginConfig,
  type FieldError,
} from "../../../../src/api/validate.js";
import {
  ENV_LOADER_RULE,
  isLoaderEnvName,
  isReservedEnvName,
  LOADER_ENV_MESSAGE,
  RESERVED_ENV_MESSAGE,
  type DevicePluginConfigSpecInput,
} from "../../../../src/api/v1beta1/spec.js";
import { PLUGIN_FLAGS } from "../../../../src/cli/plugin.js";
import { renderPluginDaemonSet } from "../../../../src/operator/render/daemonset.js";
import { config, configInput as input, ctx } from "./render-support.js";
import { errorsOf, ALL_FIELDS } from "./plugin-pod-fields-support.js";

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
