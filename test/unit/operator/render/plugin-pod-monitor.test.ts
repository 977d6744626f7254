// The PodMonitor of config/components/plugin-pod-monitor (the chart's metrics.podMonitor) scrapes what the
// operator renders: it selects the plugin pods of any config, in the operator's namespace, on the port
// their metrics are served on, and turns the pod's config label into the `config` label the alerts use.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { DevicePluginConfigSchema } from "../../../../src/api/v1beta1/config.js";
import { LABEL_CONFIG } from "../../../../src/contract/names.js";
import type { RenderContext } from "../../../../src/operator/render/context.js";
import { METRICS_PORT, renderPluginDaemonSet } from "../../../../src/operator/render/daemonset.js";

const repoRoot = resolve(import.meta.dirname, "..", "..", "..", "..");
const podMonitor = parse(
  readFileSync(join(repoRoot, "config/components/plugin-pod-monitor/pod-monitor.yaml"), "utf8"),
) as {
  kind: string;
  metadata: { namespace: string };
  spec: {
    selector: { matchLabels: Record<string, string> };
    namespaceSelector: { matchNames: string[] };
    podMetricsEndpoints: {
      port: string;
      path: string;
      honorLabels?: boolean;
      relabelings: { sourceLabels: string[]; targetLabel: string }[];
    }[];
  };
};

const ctx: RenderContext = {
  namespace: "dpo-system",
  operatorImage: "registry.example/dpo:1.2.3",
  pluginServiceAccount: "dpo-plugin",
  registrationMode: "kubelet",
};

function daemonSetOf(name: string) {
  return renderPluginDaemonSet(
    DevicePluginConfigSchema.parse({
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name, uid: `uid-${name}`, generation: 1 },
      spec: { resourceName: `vendor.example/${name}`, backend: { type: "Mock", mock: { devices: 2 } } },
    }),
    ctx,
  );
}

/** Prometheus' name for a pod label in Kubernetes service discovery. */
const podLabelMeta = (label: string): string =>
  `__meta_kubernetes_pod_label_${label.replace(/[^a-zA-Z0-9_]/g, "_")}`;

describe("the plugin PodMonitor", () => {
  it.each(["gpu", "a-config-with-a-much-longer-name"])("selects the plugin pods of config %s", (name) => {
    const ds = daemonSetOf(name);
    const podLabels = ds.spec?.template.metadata?.labels ?? {};
    for (const [key, value] of Object.entries(podMonitor.spec.selector.matchLabels)) {
      expect(podLabels[key], key).toBe(value);
    }
    expect(podMonitor.spec.namespaceSelector.matchNames).toEqual([ds.metadata?.namespace]);
    expect(podMonitor.metadata.namespace).toBe(ds.metadata?.namespace);
  });

  it("scrapes the port the plugin serves /metrics on, honouring the device holders' pod labels", () => {
    const ports = daemonSetOf("gpu").spec?.template.spec?.containers[0]?.ports ?? [];
    const metrics = ports.find((p) => p.containerPort === METRICS_PORT);
    expect(metrics?.name).toBeDefined();
    expect(podMonitor.spec.podMetricsEndpoints).toEqual([
      expect.objectContaining({ port: metrics?.name, path: "/metrics", honorLabels: true }),
    ]);
  });

  it("labels each series with its pod's config and node", () => {
    const [endpoint] = podMonitor.spec.podMetricsEndpoints;
    expect(endpoint?.relabelings).toEqual(
      expect.arrayContaining([
        { sourceLabels: [podLabelMeta(LABEL_CONFIG)], targetLabel: "config" },
        { sourceLabels: ["__meta_kubernetes_pod_node_name"], targetLabel: "node" },
      ]),
    );
    expect(daemonSetOf("gpu").spec?.template.metadata?.labels?.[LABEL_CONFIG]).toBe("gpu");
  });
});
