// The Helm chart (charts/dpo) against config/ and a real API server: helm lint, the same objects as kustomize
// renders, a server-side dry run, and an install whose operator (run here, under the chart's ServiceAccount)
// becomes Ready and reconciles a sample, and an uninstall that leaves only the CRDs.
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import type { V1Deployment, V1Service } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments, stringify } from "yaml";
import { diffRenderings, objectKey, withoutLabels, type KubeObject } from "../../tools/manifests/compare.js";
import { setClientConfig, SERVICE_CLIENT_CONFIG } from "../cluster/conversion-webhook.js";
import {
  injectedCluster,
  kubeConfigFromInjected,
  kubectl,
  pluginDaemonSet,
  waitFor,
  type KubectlResult,
} from "../cluster/helpers.js";
import { OPERATOR_SA, startOperator, type OperatorProcess } from "../e2e/support.js";

const repoRoot = join(import.meta.dirname, "..", "..");
const chartDir = join(repoRoot, "charts", "dpo");
const configDir = join(repoRoot, "config");
const NAMESPACE = "dpo-system";
const FIELD_MANAGER = "dpo-helm-chart-test";
/** The release under test; Helm keeps its record in `default`, the chart puts dpo in dpo-system. */
const RELEASE = "dpo-chart-test";
const RELEASE_NAMESPACE = "default";
const packageVersion = (
  JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version: string }
).version;

/**
 * The labels Helm adds and kustomize does not: which chart rendered an object, and that Helm manages it.
 * The comparison with config/ ignores these and nothing else.
 */
const HELM_OWN_LABELS = ["helm.sh/chart", "app.kubernetes.io/managed-by"] as const;

let helmHome = "";

/** Runs the helm built next to kubectl, with its config, cache and data in a directory of this run. */
async function helm(args: string[], options: { allowFailure?: boolean } = {}): Promise<KubectlResult> {
  const executable = join(injectedCluster().binDir, "helm");
  const env = {
    ...process.env,
    HELM_CONFIG_HOME: join(helmHome, "config"),
    HELM_CACHE_HOME: join(helmHome, "cache"),
    HELM_DATA_HOME: join(helmHome, "data"),
  };
  const result = await new Promise<KubectlResult>((resolve, reject) => {
    execFile(executable, args, { env, timeout: 180_000, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      if (error && typeof error.code !== "number") {
        reject(new Error(`cannot run ${executable}: ${error.message}`, { cause: error }));
        return;
      }
      resolve({ stdout, stderr, exitCode: typeof error?.code === "number" ? error.code : 0 });
    });
  });
  if (result.exitCode !== 0 && !options.allowFailure) {
    throw new Error(`helm ${args.join(" ")} exited with ${result.exitCode}: ${result.stderr.trim()}`);
  }
  return result;
}

/** Cluster flags for helm: the test cluster's admin kubeconfig, never $KUBECONFIG. */
function onCluster(): string[] {
  return ["--kubeconfig", injectedCluster().kubeconfigPath];
}

function parseObjects(text: string): KubeObject[] {
  return parseAllDocuments(text)
    .map((doc) => doc.toJS() as KubeObject | null)
    .filter((object): object is KubeObject => object !== null);
}

/** `helm template` of the chart, CRDs included, with `--set` values. */
async function renderChart(values: string[] = []): Promise<{ text: string; objects: KubeObject[] }> {
  const sets = values.flatMap((value) => ["--set", value]);
  const { stdout } = await helm(["template", RELEASE, chartDir, "--include-crds", ...sets]);
  return { text: stdout, objects: parseObjects(stdout) };
}

async function renderKustomize(dir: string): Promise<KubeObject[]> {
  return parseObjects((await kubectl(["kustomize", dir])).stdout);
}

function withoutHelmLabels(objects: KubeObject[]): KubeObject[] {
  return objects.map((object) => withoutLabels(object, HELM_OWN_LABELS));
}

function find<T>(objects: KubeObject[], kind: string, name: string): T {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind}/${name} among ${objects.map(objectKey).join(", ")}`);
  return found as T;
}

function managerContainer(objects: KubeObject[]) {
  const deployment = find<V1Deployment>(objects, "Deployment", "dpo-operator");
  const container = deployment.spec?.template.spec?.containers.find((c) => c.name === "manager");
  if (!container) throw new Error("the operator Deployment has no 'manager' container");
  return { deployment, container };
}

beforeAll(async () => {
  helmHome = await mkdtemp(join(tmpdir(), "dpo-helm-home-"));
});

afterAll(async () => {
  if (helmHome !== "") await rm(helmHome, { recursive: true, force: true });
});

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
        "samples.enabled=true,webhook.certManager.enabled=true,metrics.serviceMonitor.enabled=true",
      ],
      { allowFailure: true },
    );
    expect(everything.exitCode, everything.stdout + everything.stderr).toBe(0);
  });

  it("renders with default values the objects config/default renders, equal but for Helm's own labels", async () => {
    const chart = (await renderChart()).objects;
    const kustomize = await renderKustomize(join(configDir, "default"));
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
    const kustomize = await renderKustomize(join(configDir, "default"));
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
    const overlayDir = await mkdtemp(join(tmpdir(), "dpo-helm-cert-manager-"));
    try {
      await writeFile(
        join(overlayDir, "kustomization.yaml"),
        stringify({
          apiVersion: "kustomize.config.k8s.io/v1beta1",
          kind: "Kustomization",
          resources: [relative(overlayDir, join(configDir, "default"))],
          components: [relative(overlayDir, join(configDir, "components", "cert-manager"))],
        }),
      );
      const kustomize = await renderKustomize(overlayDir);
      const chart = (await renderChart(["webhook.certManager.enabled=true"])).objects;
      // Helm never templates crds/, so this one annotation is the user's (NOTES.txt and docs/deploy.md say so).
      expect(diffRenderings(kustomize, withoutHelmLabels(chart))).toEqual([
        "CustomResourceDefinition devicepluginconfigs.dpo.dev: metadata.annotations: " +
          `expected {"cert-manager.io/inject-ca-from":"${NAMESPACE}/dpo-webhook"}, got nothing`,
      ]);
      const notes = readFileSync(join(chartDir, "templates", "NOTES.txt"), "utf8");
      expect(notes).toContain(
        `kubectl annotate crd devicepluginconfigs.dpo.dev cert-manager.io/inject-ca-from=${NAMESPACE}/dpo-webhook`,
      );
    } finally {
      await rm(overlayDir, { recursive: true, force: true });
    }
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

describe("charts/dpo on the API server", () => {
  /** The chart as installed below: default values plus the samples. */
  const INSTALL_VALUES = ["samples.enabled=true"];
  let rendered: { text: string; objects: KubeObject[] } = { text: "", objects: [] };
  let operator: OperatorProcess | undefined;
  let installed = false;

  /** The chart's objects but its CRDs, which Helm keeps: what an uninstall must remove. */
  const removable = (): KubeObject[] => rendered.objects.filter((o) => o.kind !== "CustomResourceDefinition");
  const manifest = (objects: KubeObject[]): string => objects.map((o) => stringify(o)).join("---\n");

  /** Those of `objects` the API server still has (Terminating included), as `kind/name`. */
  async function stillThere(objects: KubeObject[]): Promise<string[]> {
    const { stdout } = await kubectl(["get", "--ignore-not-found", "-o", "name", "-f", "-"], {
      input: manifest(objects),
    });
    return stdout.split("\n").filter((line) => line !== "");
  }

  async function waitUntilGone(objects: KubeObject[], what: string): Promise<void> {
    await waitFor(
      what,
      async (observe) => {
        const left = await stillThere(objects);
        observe(left);
        return left.length === 0;
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
  }

  beforeAll(async () => {
    rendered = await renderChart(INSTALL_VALUES);
    // The CRDs for real, so the dry run can resolve the samples' kind; the webhook's clientConfig back to
    // what the files name first (an earlier test may have pointed it at a URL).
    await setClientConfig(SERVICE_CLIENT_CONFIG);
    await kubectl(
      ["apply", "--server-side", "--force-conflicts", `--field-manager=${FIELD_MANAGER}`, "-f", "-"],
      { input: manifest(rendered.objects.filter((o) => o.kind === "CustomResourceDefinition")) },
    );
    await kubectl([
      "wait",
      "--for=condition=Established",
      "--timeout=60s",
      "crd/devicepluginconfigs.dpo.dev",
      "crd/devicenodestates.dpo.dev",
    ]);
  });

  afterAll(async () => {
    await operator?.stop();
    if (installed) {
      await helm(
        ["uninstall", RELEASE, "--namespace", RELEASE_NAMESPACE, "--ignore-not-found", ...onCluster()],
        {
          allowFailure: true,
        },
      );
    }
  });

  it("is accepted by the API server as a whole (server-side apply, dry run)", async () => {
    // A dry run creates no Namespace, and nothing can be created in a missing one.
    const existing = await kubectl(["get", "namespace", NAMESPACE], { allowFailure: true });
    if (existing.exitCode !== 0) await kubectl(["create", "namespace", NAMESPACE]);
    const result = await kubectl(
      [
        "apply",
        "--server-side",
        "--dry-run=server",
        "--force-conflicts",
        `--field-manager=${FIELD_MANAGER}`,
        "-f",
        "-",
      ],
      { input: rendered.text, allowFailure: true },
    );
    expect(result.exitCode, result.stderr).toBe(0);
    const applied = result.stdout.split("\n").filter((line) => line.includes("(server dry run)"));
    expect(applied).toHaveLength(rendered.objects.length);
  });

  it("installs with helm; the operator, run with the chart's ServiceAccount and flags, gets Ready and renders a sample's DaemonSet", async () => {
    // Earlier files install config/default with kubectl; Helm adopts nothing it did not create, so start
    // from a cluster without dpo's objects (the CRDs, which Helm skips when present, stay).
    await kubectl(["delete", "--ignore-not-found", "--wait=false", "-f", "-"], {
      input: manifest(removable()),
    });
    await waitUntilGone(removable(), "objects of an earlier dpo install to go before helm install");

    // Set first: whatever happens below, afterAll uninstalls what the release holds by then.
    installed = true;
    // Helm's --wait reads kstatus: the samples' configs are Current only once their plugins registered
    // on every node, which needs the operator (started below, outside the cluster) and kubelets (none in
    // this file). So the release is installed and waited for without them, then upgraded to add them.
    const install = await helm(
      [
        "install",
        RELEASE,
        chartDir,
        "--namespace",
        RELEASE_NAMESPACE,
        "--wait",
        "--timeout",
        "2m",
        ...onCluster(),
      ],
      { allowFailure: true },
    );
    expect(install.exitCode, install.stderr).toBe(0);
    const withSamples = await helm(
      [
        "upgrade",
        RELEASE,
        chartDir,
        "--namespace",
        RELEASE_NAMESPACE,
        ...INSTALL_VALUES.flatMap((value) => ["--set", value]),
        ...onCluster(),
      ],
      { allowFailure: true },
    );
    expect(withSamples.exitCode, withSamples.stderr).toBe(0);
    // Helm owns every object of the chart: its release annotations are on each.
    const { stdout } = await kubectl(["get", "-f", "-", "-o", "json"], { input: manifest(removable()) });
    const live = JSON.parse(stdout) as { items: KubeObject[] };
    expect(live.items.map(objectKey).sort()).toEqual(removable().map(objectKey).sort());
    for (const object of live.items) {
      expect(object.metadata.annotations?.["meta.helm.sh/release-name"], objectKey(object)).toBe(RELEASE);
    }

    // No container runtime here: the Deployment's pods exist (KWOK runs them) but run nothing, so the
    // operator runs as a local process, with a token of the chart's ServiceAccount (TokenRequest) and the
    // container's own flags and environment, but for its listen addresses.
    const { deployment, container } = managerContainer(rendered.objects);
    expect(deployment.spec?.template.spec?.serviceAccountName).toBe(OPERATOR_SA);
    const flags = (container.args ?? []).filter(
      (arg) => arg !== "operator" && !/^--(metrics|health|webhook)-addr=/.test(arg),
    );
    const env = Object.fromEntries(
      (container.env ?? [])
        .filter((e) => e.value !== undefined && e.name !== "DPO_PLUGIN_IMAGE")
        .map((e) => [e.name, e.value ?? ""]),
    );
    const pluginImage = container.env?.find((e) => e.name === "DPO_PLUGIN_IMAGE")?.value ?? "";
    expect(env).toEqual({
      DPO_LEADER_ELECT: "true",
      MALLOC_ARENA_MAX: "2",
      MALLOC_MMAP_THRESHOLD_: "131072",
    });
    operator = await startOperator(
      [...flags, "--webhook-addr", "127.0.0.1:0"],
      { ...env, POD_NAMESPACE: deployment.metadata?.namespace ?? "" },
      { pluginImage },
    );
    const metricsPort = operator.metricsPort;
    await waitFor(
      "the operator's /readyz to answer 200",
      async (observe) => {
        const response = await fetch(`http://127.0.0.1:${metricsPort}/readyz`);
        observe(`${response.status} ${await response.text()}`);
        return response.status === 200;
      },
      { timeoutMs: 60_000 },
    );

    const daemonSet = await waitFor(
      "a DaemonSet for the sample example-mock",
      async (observe) => {
        const found = await pluginDaemonSet(kubeConfigFromInjected(), NAMESPACE, "example-mock");
        // The config's conditions say why there is none (a refused write shows up as Stalled).
        const conditions = await kubectl([
          "get",
          "devicepluginconfig",
          "example-mock",
          "-o",
          "jsonpath={range .status.conditions[*]}{.type}={.status} {.reason}: {.message}; {end}",
        ]);
        observe({ daemonSet: found?.metadata?.name ?? "none", conditions: conditions.stdout });
        return found;
      },
      { timeoutMs: 60_000 },
    );
    // The sample names no image, so its plugins run the operator's, which the chart set.
    expect(daemonSet.spec?.template.spec?.containers[0]?.image).toBe(`ghcr.io/dpo-dev/dpo:${packageVersion}`);
    expect(daemonSet.spec?.template.spec?.serviceAccountName).toBe("dpo-plugin");

    expect(await operator.stop()).toBe(0);
    operator = undefined;
  }, 420_000);

  it("helm uninstall leaves nothing of the chart behind but its CRDs", async () => {
    expect(installed).toBe(true);
    await helm([
      "uninstall",
      RELEASE,
      "--namespace",
      RELEASE_NAMESPACE,
      "--wait",
      "--timeout",
      "3m",
      ...onCluster(),
    ]);
    installed = false;
    // The namespace goes last, once the namespace controller has emptied it (the plugin DaemonSets too).
    await waitUntilGone(removable(), "every object of the chart but the CRDs to be deleted");
    const releases = await kubectl([
      "get",
      "secrets",
      "--namespace",
      RELEASE_NAMESPACE,
      "--selector",
      `owner=helm,name=${RELEASE}`,
      "-o",
      "name",
    ]);
    expect(releases.stdout.trim()).toBe("");
    const crds = rendered.objects.filter((o) => o.kind === "CustomResourceDefinition");
    expect(crds).toHaveLength(2);
    expect(await stillThere(crds)).toHaveLength(2);
  });
});
