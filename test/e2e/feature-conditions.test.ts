// Version-dependent features say in the status why they are off, on a live cluster: a config with Auto
// upgrades on nodes whose kubelets report v1.35.4 shows SurgeUpgrades=False with the reason and stays
// Ready (kstatus Current, Argo CD Healthy), turns True once the kubelets report v1.37.2, and drops the
// condition under Replace; a DRA config whose operator finds no resource.k8s.io/v1 is Stalled with
// ResourceAPIUnavailable (kstatus Failed, Argo CD Degraded, kubectl's Reason column) until the group is
// served, which the operator notices by itself. The operator reaches the API server through a proxy that
// can hide the group (test/cluster/api-group-proxy.ts); the plugins and the test reach it directly.
//
// DPO_GITOPS_HEALTH_FIXTURES=<dir> writes the captured objects there, as test/e2e/gitops-health.test.ts
// does, for test/unit/tools/gitops-health/health.test.ts.
import { CustomObjectsApi } from "@kubernetes/client-node";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Condition, DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { RESOURCE_API_PROBE_INTERVAL_MS } from "../../src/operator/manager.js";
import { kubeRequest } from "../../src/kube/request.js";
import { buildGitopsHealth, gitopsHealth } from "../../tools/gitops-health/harness.js";
import { startApiGroupProxy, type ApiGroupProxy } from "../cluster/api-group-proxy.js";
import {
  apiStatusCode,
  injectedCluster,
  kubeConfigFromInjected,
  kubectl,
  SIMULATED_NODE_LABEL,
  uniqueName,
  waitFor,
} from "../cluster/helpers.js";
import { kubectlTable } from "../cluster/kubectl-table.js";
import { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import { installDpo, startOperator, type OperatorProcess } from "./support.js";

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const RESOURCE_API = "/apis/resource.k8s.io/v1";
const SURGE = uniqueName("e2e-features");
const DRA = uniqueName("e2e-features-dra");
const DRA_DRIVER = `${DRA}.features.example`;
/** Fixtures name the configs as the gitops-health ones do. */
const FIXTURE_NAMES: [string, string][] = [
  [DRA, "example"],
  [SURGE, "example"],
];

/** The kubelet that cannot surge (no per-socket endpoints), and the one that can. */
const OLD_KUBELET = "v1.35.4";
const NEW_KUBELET = "v1.37.2";

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);

interface Config {
  metadata: { name: string; generation?: number; managedFields?: unknown };
  status?: DevicePluginConfigStatus;
}

let nodes: string[] = [];
let sim: KubeletSimulator | undefined;
let proxy: ApiGroupProxy | undefined;
let operator: OperatorProcess | undefined;
let harness: string;
const captured: { fixture: string; object: Config }[] = [];

function condition(c: Config | undefined, type: string): Condition | undefined {
  return c?.status?.conditions?.find((x) => x.type === type);
}

async function get(name: string): Promise<Config> {
  return (await custom.getClusterCustomObject({ ...GROUP, name })) as Config;
}

/** The config once `pred` holds for its status, written for its current generation. */
async function configWhere(
  name: string,
  what: string,
  pred: (c: Config) => boolean,
  timeoutMs = 60_000,
): Promise<Config> {
  return waitFor(
    `${name}: ${what}`,
    async (observe) => {
      const c = await get(name);
      observe({ generation: c.metadata.generation, conditions: c.status?.conditions });
      return c.status?.observedGeneration === c.metadata.generation && pred(c) ? c : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  ).catch((err: unknown) => {
    // What the operator was doing is the first thing to read when it did not get there.
    console.log(`operator log, last lines:\n${operator?.logs.join("").split("\n").slice(-40).join("\n")}`);
    throw err;
  });
}

async function setKubeletVersion(node: string, version: string): Promise<void> {
  await kubeRequest(kc, {
    method: "PATCH",
    path: `/api/v1/nodes/${encodeURIComponent(node)}/status`,
    body: { status: { nodeInfo: { kubeletVersion: version } } },
    contentType: "application/strategic-merge-patch+json",
  });
}

beforeAll(async () => {
  nodes = injectedCluster().nodeNames;
  expect(nodes.length).toBeGreaterThanOrEqual(3);
  [harness] = await Promise.all([buildGitopsHealth(), installDpo()]);
  // Two kubelets before per-socket endpoints, the rest after.
  sim = await KubeletSimulator.start({
    kubeconfig: kc,
    nodes,
    gracePeriodMs: 60_000,
    kubeletVersions: Object.fromEntries(nodes.map((n, i) => [n, i < 2 ? OLD_KUBELET : NEW_KUBELET])),
  });
  proxy = await startApiGroupProxy(kc, [RESOURCE_API]);
  operator = await startOperator(["--status-write-interval", "250"], {}, { apiServer: proxy.url });
}, 300_000);

afterAll(async () => {
  for (const name of [SURGE, DRA]) {
    await custom.deleteClusterCustomObject({ ...GROUP, name }).catch(() => undefined);
  }
  // The garbage collector removes the config's DeviceClass too; this is for a run that stopped halfway.
  await kubeRequest(kc, { method: "DELETE", path: `${RESOURCE_API}/deviceclasses/${DRA_DRIVER}` }).catch(
    () => undefined,
  );
  await operator?.stop();
  await proxy?.close();
  // Puts back the versions the nodes had before this file, also those this file changed.
  await sim?.stop();
  const dir = process.env.DPO_GITOPS_HEALTH_FIXTURES;
  if (dir) {
    mkdirSync(dir, { recursive: true });
    for (const { fixture, object } of captured) {
      const { managedFields: _, ...metadata } = object.metadata;
      let text = `${JSON.stringify({ ...object, metadata }, null, 2)}\n`;
      for (const [from, to] of FIXTURE_NAMES) text = text.replaceAll(from, to);
      writeFileSync(join(dir, `${fixture}.json`), text);
    }
  }
}, 120_000);

describe("SurgeUpgrades: whether the kubelets let a plugin upgrade surge, and why not", () => {
  const replaceMessage = (total: number) =>
    `2 of ${total} nodes replace instead of surging: their kubelets (${OLD_KUBELET}) are older than v1.37.0, which per-socket device-plugin endpoints need`;

  it("is False with the reason on kubelets v1.35.4, and the config stays Ready for kstatus and Argo CD", async () => {
    await custom.createClusterCustomObject({
      ...GROUP,
      body: {
        apiVersion: "dpo.dev/v1beta1",
        kind: "DevicePluginConfig",
        metadata: { name: SURGE },
        spec: {
          resourceName: `features.example/${SURGE}`,
          backend: { type: "Mock", mock: { devices: 2, idPrefix: "f" } },
          nodeSelector: { [SIMULATED_NODE_LABEL]: "true" },
          upgrade: { strategy: "Auto" },
        },
      },
    });
    const ready = await configWhere(
      SURGE,
      "Ready on every node, SurgeUpgrades=False",
      (c) =>
        condition(c, "Ready")?.status === "True" &&
        c.status?.nodes?.summary === `${nodes.length}/${nodes.length}` &&
        condition(c, "SurgeUpgrades")?.status === "False",
      120_000,
    );
    expect(condition(ready, "SurgeUpgrades")).toMatchObject({
      status: "False",
      reason: "KubeletWithoutPerSocketEndpoints",
      message: replaceMessage(nodes.length),
      observedGeneration: ready.metadata.generation,
    });
    // Informational: not Stalled, not Degraded, nothing in flight.
    expect(condition(ready, "Stalled")?.status).toBe("False");
    expect(condition(ready, "Degraded")?.status).toBe("False");
    expect(condition(ready, "Reconciling")?.status).toBe("False");
    const [health] = await gitopsHealth(harness, [ready]);
    expect(health).toMatchObject({
      kstatus: { status: "Current", message: "Resource is Ready" },
      argocd: { status: "Healthy", message: `${nodes.length}/${nodes.length} nodes ready` },
    });
    captured.push({ fixture: "ready-kubelets-without-surge", object: ready });

    // kubectl describe shows it to a user who asks why the rollout replaces.
    const described = (await kubectl(["describe", "dpc", SURGE])).stdout;
    expect(described).toContain("KubeletWithoutPerSocketEndpoints");
    expect(described).toContain("SurgeUpgrades");
  });

  it("turns True once the kubelets report v1.37.2", async () => {
    for (const node of nodes.slice(0, 2)) await setKubeletVersion(node, NEW_KUBELET);
    const upgraded = await configWhere(
      SURGE,
      "SurgeUpgrades=True",
      (c) => condition(c, "SurgeUpgrades")?.status === "True",
    );
    expect(condition(upgraded, "SurgeUpgrades")).toMatchObject({
      reason: "KubeletsSupportSurge",
      message: `${nodes.length} of ${nodes.length} nodes surge: their kubelets (${NEW_KUBELET}) keep one device-plugin endpoint per socket`,
    });
    expect(condition(upgraded, "Ready")?.status).toBe("True");
  });

  it("is removed under Replace, where no node surges by choice", async () => {
    await custom.patchClusterCustomObject({
      ...GROUP,
      name: SURGE,
      body: [{ op: "replace", path: "/spec/upgrade/strategy", value: "Replace" }],
    });
    const replacing = await configWhere(
      SURGE,
      "no SurgeUpgrades condition",
      (c) => condition(c, "SurgeUpgrades") === undefined,
    );
    expect(replacing.status?.conditions?.map((c) => c.type)).toEqual([
      "Ready",
      "Reconciling",
      "Stalled",
      "Degraded",
      "ExtendedResourceMapping",
    ]);
  });
});

describe("DRAPublishing: whether the API server serves resource.k8s.io/v1", () => {
  const unavailable =
    "the API server does not serve resource.k8s.io/v1, which ResourceSlices and DeviceClasses need: enable it (kube-apiserver --runtime-config=resource.k8s.io/v1=true; on by default from Kubernetes 1.34) or set spec.publish to DevicePlugin";

  it("stalls a DRA config with ResourceAPIUnavailable while the operator's API server hides the group", async () => {
    await custom.createClusterCustomObject({
      ...GROUP,
      body: {
        apiVersion: "dpo.dev/v1beta1",
        kind: "DevicePluginConfig",
        metadata: { name: DRA },
        spec: {
          resourceName: `features.example/${DRA}`,
          backend: { type: "Mock", mock: { devices: 2 } },
          // No node: the condition is about the cluster's API, not about a node.
          nodeSelector: { [`features.example/${DRA}`]: "true" },
          publish: "DRA",
          dra: { driverName: DRA_DRIVER },
        },
      },
    });
    const stalled = await configWhere(DRA, "Stalled", (c) => condition(c, "Stalled")?.status === "True");
    expect(stalled.status?.conditions?.map((c) => `${c.type}=${c.status}/${c.reason}`)).toEqual([
      "Ready=False/ResourceAPIUnavailable",
      "Reconciling=False/ResourceAPIUnavailable",
      "Stalled=True/ResourceAPIUnavailable",
      "Degraded=False/NoProblems",
      "SurgeUpgrades=Unknown/NoMatchingNodes",
      "DRAPublishing=False/ResourceAPIUnavailable",
      // Shares the reason, but only DRAPublishing stalls the config.
      "ExtendedResourceMapping=False/ResourceAPIUnavailable",
    ]);
    expect(condition(stalled, "DRAPublishing")?.message).toBe(unavailable);
    expect(proxy!.hiddenRequests).toContain(RESOURCE_API);
    const [health] = await gitopsHealth(harness, [stalled]);
    expect(health).toMatchObject({
      kstatus: { status: "Failed", message: unavailable },
      argocd: { status: "Degraded", message: `ResourceAPIUnavailable: ${unavailable}` },
    });
    captured.push({ fixture: "stalled-resource-api-unavailable", object: stalled });

    const [row] = kubectlTable((await kubectl(["get", "dpc", DRA, "-o", "wide"])).stdout);
    expect(row).toMatchObject({ READY: "False", REASON: "ResourceAPIUnavailable", MODE: "DRA" });
  });

  it("publishes once the group is served, without an operator restart", async () => {
    proxy!.hide([]);
    const served = await configWhere(
      DRA,
      "DRAPublishing=True and Ready after the operator probed again",
      (c) => condition(c, "DRAPublishing")?.status === "True" && condition(c, "Ready")?.status === "True",
      RESOURCE_API_PROBE_INTERVAL_MS + 60_000,
    );
    expect(served.status?.conditions?.map((c) => `${c.type}=${c.status}/${c.reason}`)).toEqual([
      "Ready=True/NoMatchingNodes",
      "Reconciling=False/RolloutComplete",
      "Stalled=False/NoErrors",
      "Degraded=False/NoProblems",
      "SurgeUpgrades=Unknown/NoMatchingNodes",
      "DRAPublishing=True/ResourceAPIServed",
      // The operator probed DeviceClass spec.extendedResourceName once the group was served (1.37 keeps it).
      "ExtendedResourceMapping=True/ExtendedResourceMapped",
    ]);
    // The DRA side runs now: the config's DeviceClass exists.
    await waitFor(`DeviceClass ${DRA_DRIVER}`, async (observe) => {
      try {
        return await kubeRequest(kc, { method: "GET", path: `${RESOURCE_API}/deviceclasses/${DRA_DRIVER}` });
      } catch (err) {
        observe(err);
        if (apiStatusCode(err) === 404 || (err as { code?: number }).code === 404) return undefined;
        throw err;
      }
    });
  });
});
