// The chart's values for the plugin pods and the configs (pluginDefaults, kubeletRootDir, configs), the names
// of its objects (fullnameOverride, nameOverride) and its Chart.yaml metadata, each rendered with `helm template`: the operator's flags they set are read by the
// operator's own parsers and rendered into a plugin DaemonSet, so chart, flag and DaemonSet are checked as
// one chain; the defaults set no flag (kustomize and the chart still agree, helm-chart.test.ts); and
// values.schema.json refuses wrong values in `helm lint --strict`, naming the value.
import type { V1DaemonSet, V1Deployment } from "@kubernetes/client-node";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseDocument, stringify } from "yaml";
import { DevicePluginConfigSchema } from "../../src/api/v1beta1/config.js";
import { validateDevicePluginConfig } from "../../src/api/validate.js";
import { parseKubeletRootDir } from "../../src/contract/kubelet-paths.js";
import type { RenderContext } from "../../src/operator/render/context.js";
import { renderPluginDaemonSet } from "../../src/operator/render/daemonset.js";
import { parsePluginPodDefaults } from "../../src/operator/render/pod-defaults.js";
import type { KubeObject } from "../../tools/manifests/compare.js";
import {
  chartDir,
  helm,
  managerContainer,
  parseObjects,
  RELEASE,
  renderChart,
  useHelmHome,
} from "./helm-support.js";

useHelmHome();

const NAMESPACE = "gpu-operators";
let valuesDir = "";
beforeAll(async () => {
  valuesDir = await mkdtemp(join(tmpdir(), "dpo-helm-values-"));
});
afterAll(async () => {
  if (valuesDir !== "") await rm(valuesDir, { recursive: true, force: true });
});

/** `helm template` with a values file (what configs: and nested lists need), or the defaults. */
async function renderValues(values?: Record<string, unknown>): Promise<KubeObject[]> {
  if (values === undefined) return (await renderChart([], NAMESPACE)).objects;
  const file = join(valuesDir, `values-${Math.random().toString(36).slice(2)}.yaml`);
  await writeFile(file, stringify(values));
  const { stdout } = await helm(["template", RELEASE, chartDir, "--namespace", NAMESPACE, "-f", file]);
  return parseObjects(stdout);
}

/** The value of `--name=value` among the operator's arguments, or undefined. */
function operatorFlag(objects: KubeObject[], name: string): string | undefined {
  const prefix = `--${name}=`;
  return (managerContainer(objects).container.args ?? [])
    .find((a) => a.startsWith(prefix))
    ?.slice(prefix.length);
}

/** What the operator would render for a Mock config, started with the chart's flags. */
function pluginDaemonSet(objects: KubeObject[]): V1DaemonSet {
  const defaults = operatorFlag(objects, "plugin-pod-defaults");
  const root = operatorFlag(objects, "kubelet-root-dir");
  const ctx: RenderContext = {
    namespace: NAMESPACE,
    operatorImage: "ghcr.io/dpo-dev/dpo:test",
    pluginServiceAccount: "dpo-plugin",
    registrationMode: "watcher",
    ...(defaults !== undefined
      ? { pluginPodDefaults: parsePluginPodDefaults(defaults, "--plugin-pod-defaults") }
      : {}),
    ...(root !== undefined ? { kubeletRootDir: parseKubeletRootDir(root, "--kubelet-root-dir") } : {}),
  };
  const config = DevicePluginConfigSchema.parse({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: "example-foo", uid: "uid-1", generation: 1 },
    spec: { resourceName: "hardware-vendor.example/foo", backend: { type: "Mock", mock: { devices: 1 } } },
  });
  return renderPluginDaemonSet(config, ctx);
}

const gpuToleration = { key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" };

describe("pluginDefaults", () => {
  it("reach every plugin DaemonSet through --plugin-pod-defaults: tolerations, PriorityClass, labels, annotations, resources", async () => {
    const objects = await renderValues({
      pluginDefaults: {
        tolerations: [gpuToleration],
        priorityClassName: "gpu-plugins",
        labels: { team: "ml" },
        // A value YAML and the flag's quoting must carry as it is.
        annotations: { "example.com/note": 'a: "b", c' },
        resources: { requests: { cpu: "10m", memory: "32Mi" }, limits: { memory: "64Mi" } },
      },
    });
    const ds = pluginDaemonSet(objects);
    const pod = ds.spec!.template;
    expect(pod.spec!.tolerations).toContainEqual(gpuToleration);
    expect(pod.spec!.priorityClassName).toBe("gpu-plugins");
    expect(pod.metadata!.labels).toMatchObject({ team: "ml" });
    expect(pod.metadata!.annotations).toMatchObject({ "example.com/note": 'a: "b", c' });
    expect(pod.spec!.containers[0]!.resources).toEqual({
      requests: { cpu: "10m", memory: "32Mi" },
      limits: { memory: "64Mi" },
    });
  });

  it("only the fields set reach the flag; none set, no flag at all", async () => {
    const objects = await renderValues({ pluginDefaults: { labels: { team: "ml" } } });
    expect(JSON.parse(operatorFlag(objects, "plugin-pod-defaults")!)).toEqual({ labels: { team: "ml" } });
    expect(operatorFlag(await renderValues(), "plugin-pod-defaults")).toBeUndefined();
    expect(pluginDaemonSet(await renderValues()).spec!.template.spec!.priorityClassName).toBe(
      "system-node-critical",
    );
  });
});

describe("kubeletRootDir", () => {
  it("--kubelet-root-dir, which the plugin pods' kubelet directories follow (device-plugins stays)", async () => {
    const objects = await renderValues({ kubeletRootDir: "/var/lib/k0s/kubelet/" });
    expect(operatorFlag(objects, "kubelet-root-dir")).toBe("/var/lib/k0s/kubelet");
    const hosts = (pluginDaemonSet(objects).spec!.template.spec!.volumes ?? [])
      .map((v) => v.hostPath?.path)
      .filter((p) => p !== undefined);
    expect(hosts).toEqual([
      "/var/lib/kubelet/device-plugins",
      "/var/lib/k0s/kubelet/plugins_registry",
      "/var/lib/k0s/kubelet/pod-resources",
    ]);
  });

  it("the default, /var/lib/kubelet, sets no flag", async () => {
    expect(operatorFlag(await renderValues(), "kubelet-root-dir")).toBeUndefined();
    expect(
      operatorFlag(await renderValues({ kubeletRootDir: "/var/lib/kubelet/" }), "kubelet-root-dir"),
    ).toBeUndefined();
  });
});

describe("configs", () => {
  const gpus = {
    name: "gpus",
    labels: { team: "ml" },
    annotations: { "example.com/owner": "ml-platform" },
    spec: {
      resourceName: "nvidia.com/gpu",
      backend: { type: "NVIDIA", nvidia: {} },
      nodeSelector: { "nvidia.com/gpu.present": "true" },
    },
  };
  const serial = {
    name: "serial",
    spec: { resourceName: "example.com/serial", backend: { type: "Mock", mock: { devices: 2 } } },
  };

  it("each a DevicePluginConfig of that name and spec, with its labels, annotations and Helm's labels, valid for dpo", async () => {
    const objects = await renderValues({ configs: [gpus, serial] });
    const configs = objects.filter((o) => o.kind === "DevicePluginConfig");
    expect(configs.map((c) => c.metadata.name)).toEqual(["gpus", "serial"]);
    const [first] = configs as (KubeObject & { apiVersion: string; spec: unknown })[];
    expect(first!.apiVersion).toBe("dpo.dev/v1beta1");
    expect(first!.metadata.labels).toMatchObject({ team: "ml", "app.kubernetes.io/managed-by": "Helm" });
    expect(first!.metadata.annotations).toEqual({ "example.com/owner": "ml-platform" });
    expect(first!.spec).toEqual(gpus.spec);
    for (const config of configs) expect(validateDevicePluginConfig(config)).toMatchObject({ ok: true });
    // Cluster-scoped, like every DevicePluginConfig.
    for (const config of configs) expect(config.metadata.namespace).toBeUndefined();
  });

  it("none by default, and none of config/samples unless samples.enabled", async () => {
    expect((await renderValues()).filter((o) => o.kind === "DevicePluginConfig")).toEqual([]);
    const both = await renderValues({ configs: [serial], samples: { enabled: true } });
    const names = both.filter((o) => o.kind === "DevicePluginConfig").map((o) => o.metadata.name);
    expect(names).toContain("serial");
    expect(names).toContain("example-mock");
  });

  it("refuses two configs of one name, naming both", async () => {
    const file = join(valuesDir, "dup.yaml");
    await writeFile(file, stringify({ configs: [serial, { ...serial }] }));
    const result = await helm(["template", RELEASE, chartDir, "-f", file], { allowFailure: true });
    expect(result.exitCode).not.toBe(0);
    expect(result.stderr).toContain("configs[1].name: serial is already the name of configs[0]");
  });
});

describe("fullnameOverride and nameOverride", () => {
  /** Every optional object on, so that every name the chart gives is rendered. */
  const everything = [
    "webhook.certManager.enabled=true",
    "networkPolicy.enabled=true",
    "metrics.serviceMonitor.enabled=true",
    "metrics.podMonitor.enabled=true",
    "metrics.prometheusRule.enabled=true",
    "metrics.dashboard.enabled=true",
    "crds.upgrade=true",
  ];
  const names = (objects: KubeObject[]) =>
    objects.filter((o) => o.kind !== "CustomResourceDefinition").map((o) => `${o.kind}/${o.metadata.name}`);
  /** The operator's Deployment, whatever its name. */
  const operator = (objects: KubeObject[]) => {
    const deployments = objects.filter((o) => o.kind === "Deployment") as V1Deployment[];
    expect(deployments).toHaveLength(1);
    const deployment = deployments[0]!;
    return { deployment, container: deployment.spec!.template.spec!.containers[0]! };
  };

  it("fullnameOverride: every object's name starts with it instead of dpo; labels stay as they are", async () => {
    const objects = (await renderChart([...everything, "fullnameOverride=gpu-dpo"], NAMESPACE)).objects;
    const defaults = (await renderChart(everything, NAMESPACE)).objects;
    expect(names(objects)).toEqual(names(defaults).map((n) => n.replace(/\/dpo(-|$)/, "/gpu-dpo$1")));
    expect(names(defaults).every((n) => /\/dpo(-|$)/.test(n))).toBe(true);
    const deployment = operator(objects).deployment;
    expect(deployment.metadata?.name).toBe("gpu-dpo-operator");
    expect(deployment.spec?.selector).toEqual(operator(defaults).deployment.spec?.selector);
    expect(deployment.metadata?.labels?.["app.kubernetes.io/name"]).toBe("dpo-operator");
  });

  it("fullnameOverride: the operator's flags, accounts, bindings, Secrets, policies and the CRD hook name the renamed objects", async () => {
    const objects = (await renderChart([...everything, "fullnameOverride=gpu-dpo"], NAMESPACE)).objects;
    const { deployment, container } = operator(objects);
    const args = container.args ?? [];
    const flag = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.split("=")[1];
    expect(flag("leader-election-id")).toBe("gpu-dpo-operator");
    expect(flag("plugin-service-account")).toBe("gpu-dpo-plugin");
    expect(flag("webhook-service")).toBe("gpu-dpo-webhook");
    expect(flag("webhook-secret")).toBe("gpu-dpo-webhook-cert");
    const has = (kind: string, name: string) =>
      objects.some((o) => o.kind === kind && o.metadata.name === name);
    expect(has("ServiceAccount", "gpu-dpo-plugin")).toBe(true);
    expect(has("Service", "gpu-dpo-webhook")).toBe(true);
    expect(has("Secret", "gpu-dpo-webhook-cert")).toBe(true);
    expect(deployment.spec?.template.spec?.serviceAccountName).toBe("gpu-dpo-operator");
    expect(has("ServiceAccount", "gpu-dpo-operator")).toBe(true);
    // Every binding names an account the chart renders, and every role it binds.
    for (const binding of objects.filter((o) => o.kind.endsWith("RoleBinding"))) {
      const b = binding as KubeObject & {
        roleRef: { kind: string; name: string };
        subjects: { name: string }[];
      };
      expect(has(b.roleRef.kind, b.roleRef.name), `${binding.metadata.name} binds ${b.roleRef.name}`).toBe(
        true,
      );
      for (const subject of b.subjects) expect(has("ServiceAccount", subject.name), subject.name).toBe(true);
    }
    const text = JSON.stringify(objects);
    // The operator's Role may update the webhook Secret of that name only.
    expect(text).toContain('"resourceNames":["gpu-dpo-webhook-cert"]');
    // The plugin admission policies match the plugins' renamed account, and no longer dpo-plugin.
    expect(text).toContain(":gpu-dpo-plugin'");
    expect(text).toContain(":gpu-dpo-plugin$')");
    expect(text).not.toMatch(/:dpo-plugin['$]/);
    // cert-manager's certificate is for the renamed Service, in the Secret the operator mounts.
    expect(text).toContain(`gpu-dpo-webhook.${NAMESPACE}.svc`);
    expect(deployment.spec?.template.spec?.volumes?.[0]?.secret?.secretName).toBe("gpu-dpo-webhook-tls");
    expect(text).toContain('"secretName":"gpu-dpo-webhook-tls"');
    // The CRD hook points the CRD's conversion at the renamed Service.
    const hook = objects.find((o) => o.kind === "Job") as unknown as {
      spec: { template: { spec: { containers: { args: string[] }[] } } };
    };
    expect(hook.spec.template.spec.containers[0]!.args).toContain("--webhook-service=gpu-dpo-webhook");
  });

  it("nameOverride: <release>-<nameOverride>, or the release alone when it holds it already", async () => {
    const objects = (await renderChart(["nameOverride=gpus"], NAMESPACE)).objects;
    expect(operator(objects).deployment.metadata?.name).toBe(`${RELEASE}-gpus-operator`);
    const within = (await renderChart(["nameOverride=chart"], NAMESPACE)).objects;
    expect(operator(within).deployment.metadata?.name).toBe(`${RELEASE}-operator`);
    const both = (await renderChart(["nameOverride=gpus", "fullnameOverride=gpu-dpo"], NAMESPACE)).objects;
    expect(operator(both).deployment.metadata?.name).toBe("gpu-dpo-operator");
  });

  it("by default: dpo, whatever the release's name, and no flag the operator's defaults already say", async () => {
    const objects = (await renderChart(everything, NAMESPACE)).objects;
    expect(operator(objects).deployment.metadata?.name).toBe("dpo-operator");
    const args = operator(objects).container.args ?? [];
    expect(args.some((a) => a.startsWith("--webhook-service") || a.startsWith("--webhook-secret"))).toBe(
      false,
    );
  });
});

describe("Chart.yaml", () => {
  it("has what chart indexes show: home, icon, sources, maintainers, keywords, all the project's own", async () => {
    const chart = parseDocument(await readFile(join(chartDir, "Chart.yaml"), "utf8")).toJS() as Record<
      string,
      unknown
    >;
    expect(chart["home"]).toBe("https://github.com/dpo-dev/dpo");
    expect(chart["sources"]).toEqual(["https://github.com/dpo-dev/dpo"]);
    // OperatorHub's validator (the OLM bundle's CSV takes the same) needs a maintainer's email.
    expect(chart["maintainers"]).toEqual([
      { name: "dpo-dev", email: "maintainers@dpo.dev", url: "https://github.com/dpo-dev" },
    ]);
    expect(chart["keywords"]).toEqual(expect.arrayContaining(["device-plugin", "operator", "dra"]));
    // The icon is a file of this repository, on its main branch.
    const icon = chart["icon"] as string;
    const prefix = "https://raw.githubusercontent.com/dpo-dev/dpo/main/";
    expect(icon.startsWith(prefix)).toBe(true);
    expect(await readFile(join(chartDir, "..", "..", icon.slice(prefix.length)), "utf8")).toContain("<svg");
    // helm lint --strict no longer asks for an icon.
    const lint = await helm(["lint", "--strict", chartDir]);
    expect(lint.stdout).not.toContain("icon is recommended");
  });
});

describe("values.schema.json for these values in helm lint --strict", () => {
  it("passes them set as documented", async () => {
    const file = join(valuesDir, "all.yaml");
    await writeFile(
      file,
      stringify({
        pluginDefaults: {
          tolerations: [
            gpuToleration,
            { key: "x", operator: "Equal", value: "ml", effect: "NoExecute", tolerationSeconds: 30 },
          ],
          priorityClassName: "gpu-plugins",
          labels: { team: "ml" },
          annotations: { owner: "platform" },
          resources: { requests: { cpu: "10m" }, limits: { memory: "64Mi" } },
        },
        kubeletRootDir: "/var/snap/microk8s/common/var/lib/kubelet",
        nameOverride: "gpus",
        fullnameOverride: "gpu-dpo",
        configs: [
          {
            name: "serial",
            labels: { a: "b" },
            spec: { resourceName: "example.com/serial", backend: { type: "Mock", mock: { devices: 2 } } },
          },
        ],
      }),
    );
    const result = await helm(["lint", "--strict", chartDir, "-f", file], { allowFailure: true });
    expect(result.exitCode, result.stdout + result.stderr).toBe(0);
  });

  it.each([
    ["a relative kubelet root", "kubeletRootDir=var/lib/kubelet", "/kubeletRootDir"],
    [
      "a default quantity that is none",
      "pluginDefaults.resources.limits.memory=lots",
      "/pluginDefaults/resources/limits/memory",
    ],
    [
      "a default toleration's unknown operator",
      "pluginDefaults.tolerations[0].operator=Maybe",
      "/pluginDefaults/tolerations/0/operator",
    ],
    ["a field the defaults do not have", "pluginDefaults.nodeSelector.a=b", "nodeSelector"],
    [
      "a PriorityClass that is no name",
      "pluginDefaults.priorityClassName=Gpu_Plugins",
      "/pluginDefaults/priorityClassName",
    ],
    ["a config without a spec", "configs[0].name=gpus", "/configs/0"],
    ["a name prefix that is none", "fullnameOverride=Gpu_Dpo", "/fullnameOverride"],
    ["a name prefix too long for its suffixes", `nameOverride=${"a".repeat(41)}`, "/nameOverride"],
    [
      "a config name that is none",
      "configs[0].name=GPUs,configs[0].spec.resourceName=a/b,configs[0].spec.backend.type=Mock",
      "/configs/0/name",
    ],
  ])("refuses %s, naming the value", async (_what, value, path) => {
    const result = await helm(["lint", "--strict", chartDir, "--set", value], { allowFailure: true });
    expect(result.exitCode, result.stdout + result.stderr).not.toBe(0);
    expect(result.stdout + result.stderr).toContain(path);
  });
});
