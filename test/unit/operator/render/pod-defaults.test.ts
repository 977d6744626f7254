// The chart-wide defaults of every config's plugin pods (--plugin-pod-defaults): what each field does to the
// rendered DaemonSet, how a config's own fields override it, that the operator's own labels and annotations
// stay the operator's, that a change of them is a new revision, and that bad defaults are refused naming
// the field.
import type { V1DaemonSet } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { DevicePluginConfigSchema, type DevicePluginConfig } from "../../../../src/api/v1beta1/config.js";
import type { DevicePluginConfigSpecInput } from "../../../../src/api/v1beta1/spec.js";
import type { RenderContext } from "../../../../src/operator/render/context.js";
import { pluginRevision, renderPluginDaemonSet } from "../../../../src/operator/render/daemonset.js";
import {
  parsePluginPodDefaults,
  withDefaultTolerations,
  type PluginPodDefaults,
} from "../../../../src/operator/render/pod-defaults.js";
import { pluginRunsOnNode } from "../../../../src/operator/model/targeting.js";
import { NODE_REPLACE_TAINT_PREFIX } from "../../../../src/contract/node-upgrade.js";
import { LABEL_REVISION } from "../../../../src/operator/model/names.js";

const ctx: RenderContext = {
  namespace: "dpo-system",
  operatorImage: "registry.example/dpo:1.2.3",
  pluginServiceAccount: "dpo-plugin",
  registrationMode: "kubelet",
};

function config(spec: Partial<DevicePluginConfigSpecInput> = {}): DevicePluginConfig {
  return DevicePluginConfigSchema.parse({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: "example-foo", uid: "uid-1", generation: 1 },
    spec: {
      resourceName: "hardware-vendor.example/foo",
      backend: { type: "Mock", mock: { devices: 4 } },
      ...spec,
    },
  });
}

const render = (c: DevicePluginConfig, defaults?: PluginPodDefaults): V1DaemonSet =>
  renderPluginDaemonSet(c, defaults ? { ...ctx, pluginPodDefaults: defaults } : ctx);
const podSpec = (ds: V1DaemonSet) => ds.spec!.template.spec!;
const container = (ds: V1DaemonSet) => podSpec(ds).containers[0]!;
/** The tolerations but the rollout's own Replace toleration, which every plugin pod carries. */
const tolerations = (ds: V1DaemonSet) =>
  (podSpec(ds).tolerations ?? []).filter((t) => !t.key?.startsWith(NODE_REPLACE_TAINT_PREFIX));

const gpuTaint = { key: "nvidia.com/gpu", operator: "Exists" as const, effect: "NoSchedule" as const };
const dedicated = {
  key: "dedicated",
  operator: "Equal" as const,
  value: "ml",
  effect: "NoSchedule" as const,
};

describe("tolerations: the union of the config's and the defaults", () => {
  it("a config without any gets the defaults", () => {
    expect(tolerations(render(config(), { tolerations: [gpuTaint] }))).toEqual([gpuTaint]);
  });

  it("a config's own come first, then each default it does not already carry, once", () => {
    const ds = render(config({ tolerations: [dedicated, gpuTaint] }), { tolerations: [gpuTaint, dedicated] });
    expect(tolerations(ds)).toEqual([dedicated, gpuTaint]);
    const other = render(config({ tolerations: [dedicated] }), { tolerations: [gpuTaint] });
    expect(tolerations(other)).toEqual([dedicated, gpuTaint]);
  });

  it("count for where the plugin runs: a node tainted only for the default toleration is targeted", () => {
    const node = {
      metadata: { name: "gpu-1", labels: {} },
      spec: { taints: [{ key: "nvidia.com/gpu", value: "", effect: "NoSchedule" }] },
    };
    const plain = config();
    expect(pluginRunsOnNode(node, plain.spec)).toBe(false);
    expect(pluginRunsOnNode(node, withDefaultTolerations(plain, { tolerations: [gpuTaint] }).spec)).toBe(
      true,
    );
    // Folded into the spec once, rendering adds none twice.
    const folded = withDefaultTolerations(plain, { tolerations: [gpuTaint] });
    expect(tolerations(render(folded, { tolerations: [gpuTaint] }))).toEqual([gpuTaint]);
  });
});

describe("priorityClassName: the default replaces the built-in system-node-critical", () => {
  it("a config that names none (the API server writes system-node-critical) gets the default", () => {
    expect(podSpec(render(config(), { priorityClassName: "gpu-plugins" })).priorityClassName).toBe(
      "gpu-plugins",
    );
  });

  it("a config naming another class, or '' for none, keeps its own", () => {
    const own = render(config({ plugin: { priorityClassName: "team-critical" } }), {
      priorityClassName: "gpu-plugins",
    });
    expect(podSpec(own).priorityClassName).toBe("team-critical");
    const none = render(config({ plugin: { priorityClassName: "" } }), { priorityClassName: "gpu-plugins" });
    expect(podSpec(none).priorityClassName).toBeUndefined();
  });

  it("without a default: system-node-critical, as before", () => {
    expect(podSpec(render(config())).priorityClassName).toBe("system-node-critical");
  });
});

describe("resources: the config's own replace the default whole", () => {
  const defaults: PluginPodDefaults = {
    resources: { requests: { cpu: "10m", memory: "32Mi" }, limits: { memory: "64Mi" } },
  };

  it("a config with none gets the default's requests and limits", () => {
    expect(container(render(config(), defaults)).resources).toEqual(defaults.resources);
  });

  it("a config with only a limit keeps just that limit: no default request is merged in", () => {
    const ds = render(config({ plugin: { resources: { limits: { memory: "128Mi" } } } }), defaults);
    expect(container(ds).resources).toEqual({ limits: { memory: "128Mi" } });
  });
});

describe("labels and annotations: merged", () => {
  it("default labels on the pods and the DaemonSet, under the operator's own", () => {
    const ds = render(config(), { labels: { team: "ml", "cost-center": "42" } });
    const labels = ds.spec!.template.metadata!.labels!;
    expect(labels).toMatchObject({ team: "ml", "cost-center": "42" });
    expect(ds.metadata!.labels).toMatchObject({ team: "ml" });
    // The operator's labels are all there, and the selector is the same but for the revision.
    const plain = render(config());
    const { [LABEL_REVISION]: _revision, ...operatorLabels } = plain.spec!.template.metadata!.labels!;
    expect(labels).toMatchObject(operatorLabels);
    expect(Object.keys(ds.spec!.selector.matchLabels!)).toEqual(
      Object.keys(plain.spec!.selector.matchLabels!),
    );
  });

  it("default annotations on the pods; the config's podAnnotations win a key both have; the hash stays the operator's", () => {
    const ds = render(config({ plugin: { podAnnotations: { owner: "team-a", extra: "1" } } }), {
      annotations: { owner: "platform", "prometheus.io/scrape": "true" },
    });
    const annotations = ds.spec!.template.metadata!.annotations!;
    expect(annotations).toMatchObject({ owner: "team-a", extra: "1", "prometheus.io/scrape": "true" });
    expect(annotations["dpo.dev/config-hash"]).toBe(
      render(config({ plugin: { podAnnotations: { owner: "team-a", extra: "1" } } })).spec!.template.metadata!
        .annotations!["dpo.dev/config-hash"],
    );
  });
});

describe("a change of the defaults", () => {
  it("is a new revision, for each field", () => {
    const base = pluginRevision(config(), ctx);
    const changed: PluginPodDefaults[] = [
      { tolerations: [gpuTaint] },
      { priorityClassName: "gpu-plugins" },
      { labels: { team: "ml" } },
      { annotations: { owner: "platform" } },
      { resources: { requests: { cpu: "10m" } } },
    ];
    const revisions = changed.map((d) => pluginRevision(config(), { ...ctx, pluginPodDefaults: d }));
    expect(new Set([base, ...revisions]).size).toBe(changed.length + 1);
  });

  it("none at all, or an empty object, is the revision of an operator without the flag", () => {
    expect(pluginRevision(config(), { ...ctx, pluginPodDefaults: {} })).toBe(pluginRevision(config(), ctx));
    expect(parsePluginPodDefaults("", "--plugin-pod-defaults")).toBeUndefined();
  });
});

describe("parsePluginPodDefaults", () => {
  it("reads the JSON the chart writes", () => {
    expect(
      parsePluginPodDefaults(
        JSON.stringify({
          tolerations: [gpuTaint],
          priorityClassName: "gpu-plugins",
          labels: { team: "ml" },
          annotations: { owner: "platform" },
          resources: { limits: { memory: "64Mi" } },
        }),
        "--plugin-pod-defaults",
      ),
    ).toEqual({
      tolerations: [gpuTaint],
      priorityClassName: "gpu-plugins",
      labels: { team: "ml" },
      annotations: { owner: "platform" },
      resources: { limits: { memory: "64Mi" } },
    });
  });

  it.each([
    ["not JSON", "{tolerations", /--plugin-pod-defaults: not a JSON object/],
    ["an unknown field", '{"nodeSelector":{}}', /--plugin-pod-defaults: .*nodeSelector/],
    [
      "a toleration with a value and Exists",
      '{"tolerations":[{"key":"a","operator":"Exists","value":"x"}]}',
      /--plugin-pod-defaults: tolerations\.0\.value: must be empty when operator is Exists/,
    ],
    ["a quantity that is none", '{"resources":{"limits":{"memory":"lots"}}}', /resources\.limits\.memory/],
    [
      "an operator's label",
      '{"labels":{"app.kubernetes.io/name":"x"}}',
      /labels\.app\.kubernetes\.io\/name: the operator sets/,
    ],
    ["a dpo.dev label", '{"labels":{"dpo.dev/config":"x"}}', /labels\.dpo\.dev\/config: the operator sets/],
    ["a label value that is none", '{"labels":{"team":"a b"}}', /labels\.team/],
    ["a dpo.dev annotation", '{"annotations":{"dpo.dev/config-hash":"x"}}', /annotations: .*dpo\.dev/],
    ["a PriorityClass that is no name", '{"priorityClassName":"Gpu Plugins"}', /priorityClassName/],
  ])("refuses %s, naming the field", (_what, text, message) => {
    expect(() => parsePluginPodDefaults(text, "--plugin-pod-defaults")).toThrow(message);
  });
});
