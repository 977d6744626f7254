// The Helm chart (charts/dpo) against a real API server: a server-side dry run, an install into a namespace of
// the user's choice whose operator (run here, under the chart's ServiceAccount) becomes Ready and reconciles a
// sample, an uninstall that leaves only the CRDs and that namespace, and the CRD upgrade hook's command run with
// the hook's own RBAC. test/integration/helm-chart-render.test.ts compares the rendered chart with config/;
// test/integration/helm-values.test.ts renders each value.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { V1Container, V1Job } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { objectKey, type KubeObject } from "../../tools/manifests/compare.js";
import { setClientConfig, SERVICE_CLIENT_CONFIG } from "../cluster/conversion-webhook.js";
import { kubeConfigFromInjected, kubectl, pluginDaemonSet, waitFor } from "../cluster/helpers.js";
import {
  dpoEntrypoint,
  OPERATOR_SA,
  serviceAccountKubeconfig,
  startOperator,
  type OperatorProcess,
} from "../e2e/support.js";
import {
  chartDir,
  CONFIG_NAMESPACE as NAMESPACE,
  configDir,
  find,
  helm,
  managerContainer,
  onCluster,
  RELEASE,
  renderChart,
  renderKustomize,
  repoRoot,
  useHelmHome,
} from "./helm-support.js";

const FIELD_MANAGER = "dpo-helm-chart-test";
/** The namespace a user chose for the release: Helm's record, the operator and its plugins all live there. */
const INSTALL_NAMESPACE = "gpu-operators";
const packageVersion = (
  JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version: string }
).version;

useHelmHome();

describe("charts/dpo on the API server", () => {
  /** The chart as installed below: default values plus the samples. */
  const INSTALL_VALUES = ["samples.enabled=true"];
  /** Every value that renders more objects or fields of built-in kinds (no ServiceMonitor, no cert-manager). */
  const EVERY_BUILT_IN_VALUE = [
    ...INSTALL_VALUES,
    "crds.upgrade=true",
    "networkPolicy.enabled=true",
    "imagePullSecrets[0]=regcred",
    "priorityClassName=system-cluster-critical",
    "podLabels.team=gpu",
    "podAnnotations.example\\.com/owner=gpu-team",
    "serviceAccount.annotations.example\\.com/role=dpo",
    "logLevel=debug",
    "extraArgs[0]=--concurrency=8",
    "topologySpreadConstraints[0].maxSkew=1",
    "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
    "topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
    "topologySpreadConstraints[0].labelSelector.matchLabels.app\\.kubernetes\\.io/name=dpo-operator",
  ];
  let rendered: { text: string; objects: KubeObject[] } = { text: "", objects: [] };
  let operator: OperatorProcess | undefined;
  let installed = false;

  /** The chart's objects but its CRDs, which Helm keeps: what an uninstall must remove. */
  const removable = (): KubeObject[] => rendered.objects.filter((o) => o.kind !== "CustomResourceDefinition");
  const manifest = (objects: KubeObject[]): string => objects.map((o) => stringify(o)).join("---\n");
  const isHook = (o: KubeObject): boolean => o.metadata.annotations?.["helm.sh/hook"] !== undefined;

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

  /** Server-side dry run of a rendering: every object checked against the API server's schemas. */
  async function dryRun(text: string): Promise<{ exitCode: number; stderr: string; applied: string[] }> {
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
      { input: text, allowFailure: true },
    );
    const applied = result.stdout.split("\n").filter((line) => line.includes("(server dry run)"));
    return { exitCode: result.exitCode, stderr: result.stderr, applied };
  }

  beforeAll(async () => {
    rendered = await renderChart(INSTALL_VALUES, INSTALL_NAMESPACE);
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
    // The user's namespace, made before the chart as the NOTES say (a dry run creates none either).
    const existing = await kubectl(["get", "namespace", INSTALL_NAMESPACE], { allowFailure: true });
    if (existing.exitCode !== 0) await kubectl(["create", "namespace", INSTALL_NAMESPACE]);
  });

  afterAll(async () => {
    await operator?.stop();
    if (installed) {
      await helm(
        ["uninstall", RELEASE, "--namespace", INSTALL_NAMESPACE, "--ignore-not-found", ...onCluster()],
        { allowFailure: true },
      );
    }
    await setClientConfig(SERVICE_CLIENT_CONFIG);
    await kubectl(["delete", "namespace", INSTALL_NAMESPACE, "--ignore-not-found", "--wait=false"], {
      allowFailure: true,
    });
  });

  it("is accepted by the API server as a whole, with every value of built-in kinds set (server-side apply, dry run)", async () => {
    const plain = await dryRun(rendered.text);
    expect(plain.exitCode, plain.stderr).toBe(0);
    expect(plain.applied).toHaveLength(rendered.objects.length);

    const everything = await renderChart(EVERY_BUILT_IN_VALUE, INSTALL_NAMESPACE);
    // The hook objects are there too: helm template renders hooks.
    expect(everything.objects.filter(isHook).map(objectKey).sort()).toEqual(
      [
        "ClusterRole dpo-crd-upgrade",
        "ClusterRoleBinding dpo-crd-upgrade",
        `Job ${INSTALL_NAMESPACE}/dpo-crd-upgrade`,
        `ServiceAccount ${INSTALL_NAMESPACE}/dpo-crd-upgrade`,
      ].sort(),
    );
    const all = await dryRun(everything.text);
    expect(all.exitCode, all.stderr).toBe(0);
    expect(all.applied).toHaveLength(everything.objects.length);

    // And it can fail: a field the schema does not have is refused, naming it.
    const broken = everything.text.replace("enableServiceLinks: false", "enableServiceLink: false");
    expect(broken).not.toBe(everything.text);
    const refused = await dryRun(broken);
    expect(refused.exitCode).not.toBe(0);
    expect(refused.stderr).toContain("enableServiceLink");
  });

  it("installs with helm into the user's namespace; the operator, run with the chart's ServiceAccount and flags, gets Ready there and renders a sample's DaemonSet", async () => {
    // Earlier files install config/default with kubectl; Helm adopts nothing it did not create, so start
    // from a cluster without dpo's objects (the CRDs, which Helm skips when present, stay).
    const earlier = (await renderKustomize(join(configDir, "default"))).filter(
      (o) => o.kind !== "CustomResourceDefinition",
    );
    await kubectl(["delete", "--ignore-not-found", "--wait=false", "-f", "-"], { input: manifest(earlier) });
    await waitUntilGone(earlier, "objects of an earlier dpo install to go before helm install");

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
        INSTALL_NAMESPACE,
        "--create-namespace",
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
        INSTALL_NAMESPACE,
        ...INSTALL_VALUES.flatMap((value) => ["--set", value]),
        ...onCluster(),
      ],
      { allowFailure: true },
    );
    expect(withSamples.exitCode, withSamples.stderr).toBe(0);
    // Helm owns every object of the chart: its release annotations are on each, and every namespaced one
    // is in the user's namespace.
    const { stdout } = await kubectl(["get", "-f", "-", "-o", "json"], { input: manifest(removable()) });
    const live = JSON.parse(stdout) as { items: KubeObject[] };
    expect(live.items.map(objectKey).sort()).toEqual(removable().map(objectKey).sort());
    for (const object of live.items) {
      expect(object.metadata.annotations?.["meta.helm.sh/release-name"], objectKey(object)).toBe(RELEASE);
      expect(object.metadata.annotations?.["meta.helm.sh/release-namespace"], objectKey(object)).toBe(
        INSTALL_NAMESPACE,
      );
      if (object.metadata.namespace !== undefined) {
        expect(object.metadata.namespace, objectKey(object)).toBe(INSTALL_NAMESPACE);
      }
    }
    expect(live.items.map(objectKey)).toContain(`Deployment ${INSTALL_NAMESPACE}/dpo-operator`);
    const dpoSystem = await kubectl(["get", "namespace", NAMESPACE, "--ignore-not-found", "-o", "name"]);
    expect(dpoSystem.stdout.trim()).toBe("");

    // No container runtime here: the Deployment's pods exist (KWOK runs them) but run nothing, so the
    // operator runs as a local process, with a token of the chart's ServiceAccount (TokenRequest) and the
    // container's own flags and environment, but for its listen addresses.
    const { deployment, container } = managerContainer(rendered.objects);
    expect(deployment.metadata?.namespace).toBe(INSTALL_NAMESPACE);
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
    // POD_NAMESPACE, from the downward API in the cluster, is the Deployment's namespace.
    operator = await startOperator(
      [...flags, "--webhook-addr", "127.0.0.1:0"],
      { ...env, POD_NAMESPACE: INSTALL_NAMESPACE },
      { pluginImage, namespace: INSTALL_NAMESPACE },
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

    // The CRD of crds/ names the webhook Service in dpo-system; the operator points it at its own namespace.
    await waitFor(
      `the CRD's conversion webhook to name the Service in ${INSTALL_NAMESPACE}`,
      async (observe) => {
        const { stdout } = await kubectl([
          "get",
          "crd",
          "devicepluginconfigs.dpo.dev",
          "-o",
          "jsonpath={.spec.conversion.webhook.clientConfig.service}",
        ]);
        observe(stdout);
        const service = JSON.parse(stdout || "{}") as { namespace?: string; name?: string };
        return service.namespace === INSTALL_NAMESPACE && service.name === "dpo-webhook";
      },
      { timeoutMs: 60_000 },
    );

    const daemonSet = await waitFor(
      `a DaemonSet in ${INSTALL_NAMESPACE} for the sample example-mock`,
      async (observe) => {
        const found = await pluginDaemonSet(kubeConfigFromInjected(), INSTALL_NAMESPACE, "example-mock");
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

  it("helm uninstall leaves nothing of the chart behind but its CRDs, and the user's namespace in place", async () => {
    expect(installed).toBe(true);
    await helm([
      "uninstall",
      RELEASE,
      "--namespace",
      INSTALL_NAMESPACE,
      "--wait",
      "--timeout",
      "3m",
      ...onCluster(),
    ]);
    installed = false;
    await waitUntilGone(removable(), "every object of the chart but the CRDs to be deleted");
    const releases = await kubectl([
      "get",
      "secrets",
      "--namespace",
      INSTALL_NAMESPACE,
      "--selector",
      `owner=helm,name=${RELEASE}`,
      "-o",
      "name",
    ]);
    expect(releases.stdout.trim()).toBe("");
    const crds = rendered.objects.filter((o) => o.kind === "CustomResourceDefinition");
    expect(crds).toHaveLength(2);
    expect(await stillThere(crds)).toHaveLength(2);
    // The namespace is the user's: still there, and not on its way out.
    const namespace = JSON.parse(
      (await kubectl(["get", "namespace", INSTALL_NAMESPACE, "-o", "json"])).stdout,
    ) as { metadata: { deletionTimestamp?: string }; status?: { phase?: string } };
    expect(namespace.metadata.deletionTimestamp).toBeUndefined();
    expect(namespace.status?.phase).toBe("Active");
  });

  it("the CRD hook's own command, with only the hook's ServiceAccount and RBAC, applies the CRDs with the webhook in the release's namespace", async () => {
    const hookObjects = (await renderChart(["crds.upgrade=true"], INSTALL_NAMESPACE)).objects.filter(isHook);
    const job = find<V1Job>(hookObjects, "Job", "dpo-crd-upgrade");
    const rbac = hookObjects.filter((o) => o.kind !== "Job");
    await kubectl(["apply", "--server-side", `--field-manager=${FIELD_MANAGER}`, "-f", "-"], {
      input: manifest(rbac),
    });
    try {
      const as = `--as=system:serviceaccount:${INSTALL_NAMESPACE}:dpo-crd-upgrade`;
      // Its ClusterRole reaches dpo's CRDs and nothing else.
      const canPatch = await kubectl(
        ["auth", "can-i", "patch", "customresourcedefinitions/devicepluginconfigs.dpo.dev", as],
        { allowFailure: true },
      );
      expect(canPatch.stdout.trim()).toBe("yes");
      const other = await kubectl(
        ["auth", "can-i", "patch", "customresourcedefinitions/certificates.cert-manager.io", as],
        { allowFailure: true },
      );
      expect(other.stdout.trim()).toBe("no");

      const hookContainer: V1Container | undefined = job.spec?.template.spec?.containers[0];
      // The image runs `node /app/dist/dpo.js`; here the same program is this checkout's build.
      expect(hookContainer?.command).toEqual(["node", "/app/dist/dpo.js"]);
      const kubeconfig = await serviceAccountKubeconfig("dpo-crd-upgrade", INSTALL_NAMESPACE);
      const run = await new Promise<{ code: number | null; output: string }>((resolve) => {
        const child = spawn(
          process.execPath,
          [dpoEntrypoint, ...(hookContainer?.args ?? []), "--kubeconfig", kubeconfig],
          { stdio: ["ignore", "pipe", "pipe"] },
        );
        let output = "";
        child.stdout.on("data", (d: Buffer) => (output += d.toString()));
        child.stderr.on("data", (d: Buffer) => (output += d.toString()));
        child.once("close", (code) => resolve({ code, output }));
      });
      expect(run.code, run.output).toBe(0);
      expect(run.output).toContain("devicepluginconfigs.dpo.dev serverside-applied");
      const service = await kubectl([
        "get",
        "crd",
        "devicepluginconfigs.dpo.dev",
        "-o",
        "jsonpath={.spec.conversion.webhook.clientConfig.service.namespace}",
      ]);
      expect(service.stdout).toBe(INSTALL_NAMESPACE);
    } finally {
      await setClientConfig(SERVICE_CLIENT_CONFIG);
      await kubectl(["delete", "--ignore-not-found", "-f", "-"], { input: manifest(rbac) });
    }
  });
});
