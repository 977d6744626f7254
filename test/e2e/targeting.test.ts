// Node targeting on the real API server: a config's DaemonSet lands only on the KWOK nodes its
// matchExpressions select, and a default config plus a higher-priority override of one resource name serve
// disjoint node sets without a ResourceNameConflict, each status saying which serves which nodes.
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { configLabelValue } from "../../src/contract/names.js";
import {
  injectedCluster,
  kubeConfigFromInjected,
  kubectl,
  pluginDaemonSet,
  uniqueName,
  waitFor,
} from "../cluster/helpers.js";
import { installDpo, NAMESPACE, startOperator, type OperatorProcess } from "./support.js";

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const POOL = "targeting.example/pool";
const MEMORY = "targeting.example/memory-gb";

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const core = kc.makeApiClient(CoreV1Api);
let operator: OperatorProcess | undefined;
let nodes: string[];
const created: string[] = [];

async function labelNode(node: string, labels: Record<string, string | null>): Promise<void> {
  const args = Object.entries(labels).map(([k, v]) => (v === null ? `${k}-` : `${k}=${v}`));
  const r = await kubectl(["label", "node", node, "--overwrite", ...args]);
  if (r.exitCode !== 0) throw new Error(`labelling ${node}: ${r.stderr}`);
}

async function createConfig(name: string, spec: Record<string, unknown>): Promise<void> {
  await custom.createClusterCustomObject({
    ...GROUP,
    body: { apiVersion: "dpo.dev/v1beta1", kind: "DevicePluginConfig", metadata: { name }, spec },
  });
  created.push(name);
}

/** The nodes the config's plugin pods are bound to (pods being deleted left out), sorted. */
async function podNodes(name: string): Promise<string[]> {
  const pods = await core.listNamespacedPod({
    namespace: NAMESPACE,
    labelSelector: `dpo.dev/config=${configLabelValue(name)}`,
  });
  return pods.items
    .filter((p) => !p.metadata?.deletionTimestamp && p.spec?.nodeName)
    .map((p) => p.spec!.nodeName!)
    .sort();
}

async function statusOf(name: string): Promise<DevicePluginConfigStatus | undefined> {
  const c = (await custom.getClusterCustomObject({ ...GROUP, name })) as {
    status?: DevicePluginConfigStatus;
  };
  return c.status;
}

/** Waits until the config's pods are on exactly `want`; the timeout error shows the nodes last seen. */
async function podsLandOn(name: string, want: string[]): Promise<void> {
  const sorted = [...want].sort();
  await waitFor(
    `${name}: plugin pods on exactly ${sorted.join(", ") || "no node"}`,
    async (observe) => {
      const seen = await podNodes(name);
      observe({
        pods: seen,
        status: (await statusOf(name))?.conditions?.map((c) => `${c.type}=${c.reason}`),
      });
      return JSON.stringify(seen) === JSON.stringify(sorted) ? true : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 500 },
  );
}

async function statusWhere(
  name: string,
  description: string,
  check: (s: DevicePluginConfigStatus) => boolean,
): Promise<DevicePluginConfigStatus> {
  return waitFor(
    `${name}: ${description}`,
    async (observe) => {
      const s = await statusOf(name);
      observe(s);
      return s && check(s) ? s : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 500 },
  );
}

const mock = { type: "Mock", mock: { devices: 2 } };

beforeAll(async () => {
  nodes = injectedCluster().nodeNames;
  expect(nodes).toHaveLength(3);
  await installDpo();
  // node 0: pool a; nodes 1 and 2: pool b, with 48 and 96 GB.
  await labelNode(nodes[0]!, { [POOL]: "a", [MEMORY]: "16" });
  await labelNode(nodes[1]!, { [POOL]: "b", [MEMORY]: "48" });
  await labelNode(nodes[2]!, { [POOL]: "b", [MEMORY]: "96" });
  operator = await startOperator(["--status-write-interval", "500"]);
}, 180_000);

afterAll(async () => {
  for (const name of created)
    await custom.deleteClusterCustomObject({ ...GROUP, name }).catch(() => undefined);
  for (const name of created)
    await waitFor(`the DaemonSets of ${name} to be garbage-collected`, () =>
      pluginDaemonSet(kc, NAMESPACE, name).then((ds) => !ds),
    ).catch(() => undefined);
  await operator?.stop();
  for (const node of nodes ?? [])
    await labelNode(node, { [POOL]: null, [MEMORY]: null }).catch(() => undefined);
}, 180_000);

describe("spec.nodeSelectorTerm", () => {
  it("places the plugin only on the nodes that meet every matchExpression (In and Gt)", async () => {
    const name = uniqueName("e2e-term");
    await createConfig(name, {
      resourceName: "targeting.example/term",
      backend: mock,
      nodeSelectorTerm: {
        matchExpressions: [
          { key: POOL, operator: "In", values: ["b"] },
          { key: MEMORY, operator: "Gt", values: ["64"] },
        ],
      },
    });
    await podsLandOn(name, [nodes[2]!]);
    const status = await statusWhere(name, "one node desired", (s) => s.nodes?.desired === 1);
    expect(status.serving).toBeUndefined();
    const ds = await pluginDaemonSet(kc, NAMESPACE, name);
    const terms =
      ds?.spec?.template.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
        ?.nodeSelectorTerms;
    // Every placement term carries the config's expressions.
    expect(terms?.length).toBeGreaterThan(0);
    for (const term of terms ?? [])
      expect(term.matchExpressions).toEqual(
        expect.arrayContaining([
          { key: POOL, operator: "In", values: ["b"] },
          { key: MEMORY, operator: "Gt", values: ["64"] },
        ]),
      );

    // A node that comes to meet them gets the plugin too, with no change to the config.
    await labelNode(nodes[1]!, { [MEMORY]: "128" });
    try {
      await podsLandOn(name, [nodes[1]!, nodes[2]!]);
    } finally {
      await labelNode(nodes[1]!, { [MEMORY]: "48" });
    }
    await podsLandOn(name, [nodes[2]!]);
  });

  it("is refused by the API server with the field named when the operator and values disagree", async () => {
    const r = await kubectl(["apply", "-f", "-"], {
      allowFailure: true,
      input: JSON.stringify({
        apiVersion: "dpo.dev/v1beta1",
        kind: "DevicePluginConfig",
        metadata: { name: uniqueName("e2e-term-bad") },
        spec: {
          resourceName: "targeting.example/bad",
          backend: mock,
          nodeSelectorTerm: { matchExpressions: [{ key: POOL, operator: "Exists", values: ["b"] }] },
        },
      }),
    });
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toContain("spec.nodeSelectorTerm.matchExpressions[0].values");
    expect(r.stderr).toContain("must be empty when operator is Exists or DoesNotExist");
  });
});

describe("spec.priority: a default config and an override of one resource name", () => {
  it("serve disjoint node sets with no conflict, and their statuses say which serves which", async () => {
    const resourceName = "targeting.example/gpu";
    const base = uniqueName("e2e-default");
    const override = uniqueName("e2e-override");
    await createConfig(base, {
      resourceName,
      backend: mock,
      sharing: { strategy: "TimeSlicing", replicas: 4 },
      nodeSelector: { "feature.example/foo": "true" },
    });
    await podsLandOn(base, nodes);
    await createConfig(override, {
      resourceName,
      backend: mock,
      sharing: { strategy: "TimeSlicing", replicas: 8 },
      nodeSelectorTerm: { matchExpressions: [{ key: POOL, operator: "In", values: ["b"] }] },
      priority: 10,
    });
    await podsLandOn(override, [nodes[1]!, nodes[2]!]);
    await podsLandOn(base, [nodes[0]!]);

    const baseStatus = await statusWhere(
      base,
      "serving 1 of 3 nodes, 2 yielded",
      (s) => s.serving?.summary === "1/3",
    );
    expect(baseStatus.serving).toEqual({
      priority: 0,
      served: 1,
      yielded: 2,
      yieldedTo: [{ config: override, priority: 10, nodes: 2 }],
      summary: "1/3",
    });
    expect(baseStatus.nodes?.desired).toBe(1);
    const overrideStatus = await statusWhere(
      override,
      "serving 2 nodes",
      (s) => s.serving?.summary === "2/2",
    );
    expect(overrideStatus.serving).toEqual({
      priority: 10,
      served: 2,
      yielded: 0,
      overrides: [{ config: base, priority: 0, nodes: 2 }],
      summary: "2/2",
    });
    for (const s of [baseStatus, overrideStatus]) {
      const stalled = s.conditions?.find((c) => c.type === "Stalled");
      expect(stalled?.reason).not.toBe("ResourceNameConflict");
    }

    // kubectl shows it in the wide columns.
    const wide = await kubectl(["get", "dpc", base, "-o", "wide"]);
    expect(wide.stdout).toMatch(/SERVING/);
    expect(wide.stdout).toContain("1/3");

    // The same priority on shared nodes is still a conflict: the newer config yields.
    await custom.patchClusterCustomObject({
      ...GROUP,
      name: override,
      body: [{ op: "replace", path: "/spec/priority", value: 0 }],
    });
    await statusWhere(override, "ResourceNameConflict", (s) =>
      (s.conditions ?? []).some((c) => c.type === "Stalled" && c.reason === "ResourceNameConflict"),
    );
    await podsLandOn(override, []);
    await podsLandOn(base, nodes);
  });
});
