// The Helm chart (charts/dpo) rendered, against config/: helm lint, and the same objects as kustomize renders,
// component by component. test/integration/helm-chart.test.ts takes the chart to a real API server;
// test/integration/helm-values.test.ts renders each value.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import type { V1Deployment, V1NetworkPolicySpec, V1Service } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { parseAllDocuments, stringify } from "yaml";
import { diffRenderings, objectKey, type KubeObject } from "../../tools/manifests/compare.js";
import {
  chartDir,
  CONFIG_NAMESPACE as NAMESPACE,
  configDir,
  find,
  helm,
  HELM_OWN_LABELS,
  managerContainer,
  RELEASE,
  renderChart,
  renderKustomize,
  repoRoot,
  useHelmHome,
  withoutHelmLabels,
} from "./helm-support.js";

const packageVersion = (
  JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version: string }
).version;

useHelmHome();

/**
 * config/default's objects but its Namespace, which the chart leaves to the user (the release's own, which
 * `helm uninstall` must not delete): the objects the chart renders into that namespace.
 */
function withoutNamespace(objects: KubeObject[]): KubeObject[] {
  const namespaces = objects.filter((o) => o.kind === "Namespace").map(objectKey);
  expect(namespaces).toEqual([`Namespace ${NAMESPACE}`]);
  return objects.filter((o) => o.kind !== "Namespace");
}

/** config/default with these components of config/components, rendered by kustomize, namespace left out. */
async function renderDefaultWith(components: string[]): Promise<KubeObject[]> {
  const overlayDir = await mkdtemp(join(tmpdir(), "dpo-helm-components-"));
  try {
    await writeFile(
      join(overlayDir, "kustomization.yaml"),
      stringify({
        apiVersion: "kustomize.config.k8s.io/v1beta1",
        kind: "Kustomization",
        resources: [relative(overlayDir, join(configDir, "default"))],
        components: components.map((c) => relative(overlayDir, join(configDir, "components", c))),
      }),
    );
    return withoutNamespace(await renderKustomize(overlayDir));
  } finally {
    await rm(overlayDir, { recursive: true, force: true });
  }
}

describe("charts/dpo rendered", () => {
  it("passes helm lint with the defaults, and strictly with every option on", async () => {
    const defaults = await helm(["lint", chartDir], { allowFailure: true });
    expect(defaults.exitCode, defaults.stdout + defaults.stderr).toBe(0);
    const everything = await helm(
      [
        "lint",
        "--strict",
        chartDir,
        "--set",
        "samples.enabled=true,webhook.certManager.enabled=true,metrics.serviceMonitor.enabled=true,crds.upgrade=true," +
          "metrics.podMonitor.enabled=true,metrics.prometheusRule.enabled=true,metrics.dashboard.enabled=true",
      ],
      { allowFailure: true },
    );
    expect(everything.exitCode, everything.stdout + everything.stderr).toBe(0);
  });

  it("renders with default values the objects config/default renders but its Namespace, equal but for Helm's own labels", async () => {
    const chart = (await renderChart()).objects;
    const kustomize = withoutNamespace(await renderKustomize(join(configDir, "default")));
    expect(diffRenderings(kustomize, withoutHelmLabels(chart))).toEqual([]);
    // The labels set aside above are there, on every object Helm renders (crds/ are copied as they are).
    for (const object of chart.filter((o) => o.kind !== "CustomResourceDefinition")) {
      expect(Object.keys(object.metadata.labels ?? {}), objectKey(object)).toEqual(
        expect.arrayContaining([...HELM_OWN_LABELS]),
      );
    }
    const chartYaml = parseAllDocuments(readFileSync(join(chartDir, "Chart.yaml"), "utf8"))[0]?.toJS() as {
      appVersion: string;
    };
    expect(chartYaml.appVersion).toBe(packageVersion);
  });

  it("tells one field, one object and one label apart in that comparison", async () => {
    const kustomize = withoutNamespace(await renderKustomize(join(configDir, "default")));
    const chart = withoutHelmLabels((await renderChart()).objects);
    const changed = structuredClone(chart);
    const { container } = managerContainer(changed);
    container.imagePullPolicy = "Always";
    const service = find<KubeObject>(changed, "Service", "dpo-webhook");
    service.metadata.labels = { ...service.metadata.labels, "app.kubernetes.io/instance": RELEASE };
    const withoutPdb = changed.filter((o) => o.kind !== "PodDisruptionBudget");
    expect(diffRenderings(kustomize, withoutPdb).sort()).toEqual(
      [
        `missing: PodDisruptionBudget ${NAMESPACE}/dpo-operator`,
        `Service ${NAMESPACE}/dpo-webhook: metadata.labels.app.kubernetes.io/instance: expected nothing, got "${RELEASE}"`,
        `Deployment ${NAMESPACE}/dpo-operator: spec.template.spec.containers[0].imagePullPolicy: expected "IfNotPresent", got "Always"`,
      ].sort(),
    );
  });

  it("with webhook.certManager.enabled, renders config/default with the cert-manager component, but for the CRD annotation", async () => {
    const kustomize = await renderDefaultWith(["cert-manager"]);
    const chart = (await renderChart(["webhook.certManager.enabled=true"])).objects;
    // Helm never templates crds/, so this one annotation is the user's (NOTES.txt and docs/deploy.md say so).
    expect(diffRenderings(kustomize, withoutHelmLabels(chart))).toEqual([
      "CustomResourceDefinition devicepluginconfigs.dpo.dev: metadata.annotations: " +
        `expected {"cert-manager.io/inject-ca-from":"${NAMESPACE}/dpo-webhook"}, got nothing`,
    ]);
    // The NOTES as Helm renders them for this install, which name the release's webhook Service.
    const { stdout } = await helm([
      "install",
      "dpo",
      chartDir,
      "--dry-run=client",
      "--namespace",
      NAMESPACE,
      "--set",
      "webhook.certManager.enabled=true",
    ]);
    expect(stdout.split("NOTES:")[1]).toContain(
      `kubectl annotate crd devicepluginconfigs.dpo.dev cert-manager.io/inject-ca-from=${NAMESPACE}/dpo-webhook`,
    );
  });

  it("with samples.enabled, adds exactly the objects of config/samples", async () => {
    const defaults = (await renderChart()).objects;
    const withSamples = (await renderChart(["samples.enabled=true"])).objects;
    const defaultKeys = new Set(defaults.map(objectKey));
    const added = withSamples.filter((o) => !defaultKeys.has(objectKey(o)));
    expect(added.length).toBeGreaterThan(0);
    expect(
      diffRenderings(await renderKustomize(join(configDir, "samples")), withoutHelmLabels(added)),
    ).toEqual([]);
    expect(withSamples.length).toBe(defaults.length + added.length);
  });

  it("takes the image (for the operator and its plugins), replicas, resources and placement from values", async () => {
    const { objects } = await renderChart([
      "image.repository=registry.example/dpo",
      "image.tag=1.2.3",
      "replicas=3",
      "resources.requests.cpu=200m",
      "nodeSelector.disktype=ssd",
      "tolerations[0].key=node-role.kubernetes.io/control-plane",
      "tolerations[0].operator=Exists",
      "tolerations[0].effect=NoSchedule",
      "affinity.podAntiAffinity=null",
    ]);
    const { deployment, container } = managerContainer(objects);
    expect(container.image).toBe("registry.example/dpo:1.2.3");
    expect(container.env?.find((e) => e.name === "DPO_PLUGIN_IMAGE")?.value).toBe(container.image);
    expect(deployment.spec?.replicas).toBe(3);
    expect(container.resources).toEqual({
      requests: { cpu: "200m", memory: "128Mi" },
      limits: { memory: "256Mi" },
    });
    const pod = deployment.spec?.template.spec;
    expect(pod?.nodeSelector).toEqual({ disktype: "ssd" });
    expect(pod?.tolerations).toEqual([
      { key: "node-role.kubernetes.io/control-plane", operator: "Exists", effect: "NoSchedule" },
    ]);
    expect(pod?.affinity).toBeUndefined();

    const pinned = managerContainer(
      (await renderChart([`image.digest=sha256:${"ab".repeat(32)}`])).objects,
    ).container;
    expect(pinned.image).toBe(`ghcr.io/dpo-dev/dpo@sha256:${"ab".repeat(32)}`);
    expect(pinned.env?.find((e) => e.name === "DPO_PLUGIN_IMAGE")?.value).toBe(pinned.image);
  });

  it("with metrics.podMonitor and metrics.prometheusRule, renders config/default with the plugin-pod-monitor and prometheus-rules components", async () => {
    const objects = (await renderChart()).objects;
    expect(objects.filter((o) => o.kind === "PodMonitor" || o.kind === "PrometheusRule")).toEqual([]);
    const kustomize = await renderDefaultWith(["plugin-pod-monitor", "prometheus-rules"]);
    const chart = await renderChart([
      "metrics.podMonitor.enabled=true",
      "metrics.prometheusRule.enabled=true",
    ]);
    expect(diffRenderings(kustomize, withoutHelmLabels(chart.objects))).toEqual([]);
    // The alerts' own templates ({{ $labels.config }}) reach Prometheus as they are, not as Helm's.
    const rule = find<
      KubeObject & { spec: { groups: { rules: { annotations?: Record<string, string> }[] }[] } }
    >(chart.objects, "PrometheusRule", "dpo");
    expect(rule.spec.groups[0]?.rules[0]?.annotations?.summary).toContain("{{ $labels.config }}");
    const labelled = (
      await renderChart([
        "metrics.podMonitor.enabled=true",
        "metrics.podMonitor.labels.release=prometheus",
        "metrics.prometheusRule.enabled=true",
        "metrics.prometheusRule.labels.release=prometheus",
      ])
    ).objects;
    expect(find<KubeObject>(labelled, "PodMonitor", "dpo-plugin").metadata.labels?.release).toBe(
      "prometheus",
    );
    expect(find<KubeObject>(labelled, "PrometheusRule", "dpo").metadata.labels?.release).toBe("prometheus");
  });

  it("with networkPolicy.enabled, renders config/default with the network-policy component", async () => {
    expect((await renderChart()).objects.filter((o) => o.kind === "NetworkPolicy")).toEqual([]);
    const kustomize = await renderDefaultWith(["network-policy"]);
    const chart = await renderChart(["networkPolicy.enabled=true"]);
    expect(diffRenderings(kustomize, withoutHelmLabels(chart.objects))).toEqual([]);
    // The policy selects the operator's pods and names ports the operator's container has.
    const policy = find<KubeObject & { spec: V1NetworkPolicySpec }>(
      chart.objects,
      "NetworkPolicy",
      "dpo-operator",
    );
    const deployment = find<V1Deployment & KubeObject>(chart.objects, "Deployment", "dpo-operator");
    expect(deployment.spec?.template.metadata?.labels).toMatchObject(
      policy.spec.podSelector?.matchLabels ?? {},
    );
    const containerPorts = deployment.spec?.template.spec?.containers[0]?.ports?.map((p) => p.name);
    const policyPorts = policy.spec.ingress?.flatMap((rule) => rule.ports?.map((p) => p.port) ?? []);
    expect(policyPorts).toEqual(["webhook", "metrics", "health"]);
    expect(containerPorts).toEqual(expect.arrayContaining(policyPorts ?? []));
  });

  it("renders the Grafana dashboard ConfigMap only when metrics.dashboard.enabled, holding dashboards/dpo.json", async () => {
    expect((await renderChart()).objects.filter((o) => o.metadata.name === "dpo-grafana-dashboard")).toEqual(
      [],
    );
    const { objects } = await renderChart(["metrics.dashboard.enabled=true", "metrics.dashboard.folder=GPU"]);
    const configMap = find<KubeObject & { data: Record<string, string> }>(
      objects,
      "ConfigMap",
      "dpo-grafana-dashboard",
    );
    expect(configMap.metadata.namespace).toBe(NAMESPACE);
    expect(configMap.metadata.labels?.grafana_dashboard).toBe("1");
    expect(configMap.metadata.annotations?.grafana_folder).toBe("GPU");
    expect(JSON.parse(configMap.data["dpo.json"] ?? "")).toEqual(
      JSON.parse(readFileSync(join(chartDir, "dashboards", "dpo.json"), "utf8")),
    );
  });

  it("renders a ServiceMonitor only when metrics.serviceMonitor.enabled, for the metrics Service's port", async () => {
    expect((await renderChart()).objects.filter((o) => o.kind === "ServiceMonitor")).toEqual([]);
    const { objects } = await renderChart([
      "metrics.serviceMonitor.enabled=true",
      "metrics.serviceMonitor.interval=15s",
      "metrics.serviceMonitor.labels.release=prometheus",
    ]);
    const monitor = find<
      KubeObject & {
        spec: {
          selector: { matchLabels: Record<string, string> };
          namespaceSelector: { matchNames: string[] };
          endpoints: { port: string; interval?: string }[];
        };
      }
    >(objects, "ServiceMonitor", "dpo-operator");
    expect(monitor.metadata.namespace).toBe(NAMESPACE);
    expect(monitor.metadata.labels?.release).toBe("prometheus");
    expect(monitor.spec.namespaceSelector.matchNames).toEqual([NAMESPACE]);
    const selects = (service: V1Service) =>
      Object.entries(monitor.spec.selector.matchLabels).every(
        ([key, value]) => service.metadata?.labels?.[key] === value,
      );
    const services = objects.filter((o) => o.kind === "Service") as unknown as V1Service[];
    expect(services.filter(selects).map((s) => s.metadata?.name)).toEqual(["dpo-operator-metrics"]);
    const metrics = find<V1Service>(objects, "Service", "dpo-operator-metrics");
    expect(monitor.spec.endpoints).toEqual([
      expect.objectContaining({ port: metrics.spec?.ports?.[0]?.name, interval: "15s" }),
    ]);
  });
});
