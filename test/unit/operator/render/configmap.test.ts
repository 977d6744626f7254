// The plugin ConfigMap: what the plugin reads, and a hash that moves with the spec and nothing else.
import { describe, expect, it } from "vitest";
import { loadDevicePluginConfig } from "../../../../src/api/validate.js";
import {
  DevicePluginConfigSchema,
  type DevicePluginConfig,
  type DevicePluginConfigInput,
} from "../../../../src/api/v1beta1/config.js";
import {
  pluginConfigHash,
  renderPluginConfigData,
  renderPluginConfigMap,
} from "../../../../src/operator/render/configmap.js";
import type { RenderContext } from "../../../../src/operator/render/context.js";

const ctx: RenderContext = {
  namespace: "dpo-system",
  operatorImage: "registry.example/dpo:1.2.3",
  pluginServiceAccount: "dpo-plugin",
  registrationMode: "kubelet",
};

function config(mutate: (c: DevicePluginConfigInput) => void = () => undefined): DevicePluginConfig {
  const input: DevicePluginConfigInput = {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: "example-foo", uid: "uid-1", generation: 3 },
    spec: {
      resourceName: "hardware-vendor.example/foo",
      backend: { type: "Mock", mock: { devices: 4, idPrefix: "foo", healthFile: "/run/dpo/health.json" } },
      sharing: { strategy: "TimeSlicing", replicas: 4 },
      nodeSelector: { "feature.example/foo": "true" },
    },
  };
  mutate(input);
  return DevicePluginConfigSchema.parse(input);
}

describe("renderPluginConfigMap", () => {
  it("puts the ConfigMap in the operator namespace, labelled and owned by the config", () => {
    const cm = renderPluginConfigMap(config(), ctx, "0123456789");
    expect(cm.apiVersion).toBe("v1");
    expect(cm.kind).toBe("ConfigMap");
    expect(cm.metadata).toEqual({
      name: "dpo-example-foo-0123456789",
      namespace: "dpo-system",
      labels: {
        "app.kubernetes.io/name": "dpo-plugin",
        "app.kubernetes.io/instance": "example-foo",
        "app.kubernetes.io/managed-by": "dpo-operator",
        "dpo.dev/config": "example-foo",
        "dpo.dev/revision": "0123456789",
      },
      ownerReferences: [
        {
          apiVersion: "dpo.dev/v1beta1",
          kind: "DevicePluginConfig",
          name: "example-foo",
          uid: "uid-1",
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    });
    expect(Object.keys(cm.data ?? {})).toEqual(["config.yaml"]);
  });

  it("holds a manifest the plugin's own loader accepts, with the same spec and the config's uid", () => {
    const c = config();
    const loaded = loadDevicePluginConfig(renderPluginConfigMap(c, ctx, "0123456789").data!["config.yaml"]!);
    expect(loaded.ok).toBe(true);
    if (!loaded.ok) return;
    // spec.upgrade is the operator's: the plugin gets it defaulted, and a change of it is no new config.
    expect(loaded.value.spec).toEqual(c.spec);
    const paused = config();
    paused.spec.upgrade = { ...paused.spec.upgrade, paused: true, maxUnavailable: "50%" };
    expect(renderPluginConfigMap(paused, ctx, "0123456789").data).toEqual(
      renderPluginConfigMap(c, ctx, "0123456789").data,
    );
    expect(loaded.value.metadata).toEqual({ name: "example-foo", uid: "uid-1" });
  });

  // A free-text field the plugin reads (env, the fuzzer's first find, now reaches the pod through its template).
  it.each([" \n", "\n \n4😽a)*éa%z日wJY中B89[wG\u0000(@u8:中", "line\n  indented\n"])(
    "gives the plugin the attribute value %j exactly as the config holds it",
    (value) => {
      const c = config((input) => void (input.spec.backend.mock!.attributes = { x: value }));
      const loaded = loadDevicePluginConfig(renderPluginConfigData(c)["config.yaml"]!);
      if (!loaded.ok) throw new Error(JSON.stringify(loaded.errors));
      expect(loaded.value.spec.backend.mock?.attributes).toEqual({ x: value });
    },
  );

  it("leaves out what only the operator and the kubelet act on, so an older plugin reads the rest", () => {
    const plain = renderPluginConfigData(config());
    const withPodFields = config((input) => {
      input.spec.plugin = {
        imagePullSecrets: [{ name: "regcred" }],
        imagePullPolicy: "Always",
        runtimeClassName: "nvidia",
        podAnnotations: { "example.com/team": "a" },
        env: [{ name: "X", value: "1" }],
      };
      input.spec.publish = "DRA";
      input.spec.sharing = { strategy: "None" };
      input.spec.dra = { deviceClass: { extendedResourceName: "example.com/other" } };
    });
    const text = renderPluginConfigData(withPodFields)["config.yaml"]!;
    for (const field of [
      "imagePullSecrets",
      "imagePullPolicy",
      "runtimeClassName",
      "podAnnotations",
      "env",
      "extendedResourceName",
    ]) {
      expect(text).not.toContain(field);
    }
    const withoutThem = config((input) => {
      input.spec.publish = "DRA";
      input.spec.sharing = { strategy: "None" };
      input.spec.dra = {};
    });
    expect(text).toBe(renderPluginConfigData(withoutThem)["config.yaml"]);
    expect(text).not.toBe(plain["config.yaml"]);
  });

  it("writes the same text for the same spec whatever the key order", () => {
    const a = config();
    const reordered = DevicePluginConfigSchema.parse({
      spec: Object.fromEntries(Object.entries(a.spec).reverse()),
      metadata: { generation: 3, uid: "uid-1", name: "example-foo" },
      kind: "DevicePluginConfig",
      apiVersion: "dpo.dev/v1beta1",
    });
    expect(renderPluginConfigData(reordered)).toEqual(renderPluginConfigData(a));
  });
});

describe("config hash", () => {
  const base = pluginConfigHash(config());

  it.each<{ change: string; mutate: (c: DevicePluginConfigInput) => void }>([
    { change: "generation", mutate: (c) => void (c.metadata.generation = 4) },
    { change: "labels", mutate: (c) => void (c.metadata.labels = { team: "a" }) },
    { change: "annotations", mutate: (c) => void (c.metadata.annotations = { note: "x" }) },
    { change: "resourceVersion", mutate: (c) => void Object.assign(c.metadata, { resourceVersion: "99" }) },
    { change: "status", mutate: (c) => void (c.status = { observedGeneration: 1 }) },
    {
      change: "a default written out",
      mutate: (c) => void (c.spec.topology = { allocationPolicy: "None" }),
    },
  ])("does not change with $change", ({ mutate }) => {
    expect(pluginConfigHash(config(mutate))).toBe(base);
  });

  it.each<{ change: string; mutate: (c: DevicePluginConfigInput) => void }>([
    { change: "replicas", mutate: (c) => void (c.spec.sharing = { strategy: "TimeSlicing", replicas: 2 }) },
    { change: "device count", mutate: (c) => void (c.spec.backend.mock!.devices = 5) },
    { change: "log level", mutate: (c) => void (c.spec.plugin = { logLevel: "debug" }) },
    { change: "node selector", mutate: (c) => void (c.spec.nodeSelector = {}) },
    { change: "uid (a recreated config)", mutate: (c) => void (c.metadata.uid = "uid-2") },
  ])("changes with $change", ({ mutate }) => {
    expect(pluginConfigHash(config(mutate))).not.toBe(base);
  });
});
