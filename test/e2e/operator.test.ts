// End to end: the operator (under its own ServiceAccount), KWOK nodes, the kubelet simulator and real
// `dpo plugin` processes. What a platform team sees with kubectl is what these tests assert.
import { AppsV1Api, CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import {
  apiStatusCode,
  injectedCluster,
  kubeConfigFromInjected,
  kubectl,
  pluginConfigMap,
  pluginDaemonSet,
  waitFor,
} from "../cluster/helpers.js";
import { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import {
  deleteConfigsAndWait,
  installDpo,
  NAMESPACE,
  startOperator,
  type OperatorProcess,
} from "./support.js";

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const NAME = "e2e-foo";
const RESOURCE = "e2e.example/foo";
const HEALTH_FILE = "/run/dpo/e2e-foo-health.json";

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);

let operator: OperatorProcess;
let sim: KubeletSimulator;
let nodes: string[];

interface StoredConfig {
  metadata: { generation: number; uid: string };
  status?: DevicePluginConfigStatus;
}

async function getConfig(name = NAME): Promise<StoredConfig> {
  return (await custom.getClusterCustomObject({ ...GROUP, name })) as StoredConfig;
}

function condition(status: DevicePluginConfigStatus | undefined, type: string) {
  return status?.conditions?.find((c) => c.type === type);
}

/** Waits until the config's status satisfies `check`; the timeout error shows the last status seen. */
async function statusWhere(
  description: string,
  check: (s: DevicePluginConfigStatus, c: StoredConfig) => boolean,
  name = NAME,
  timeoutMs = 60_000,
): Promise<DevicePluginConfigStatus> {
  return waitFor(
    `${name}: ${description}`,
    async (observe) => {
      const c = await getConfig(name);
      observe({ status: c.status, simulator: sim.plugins().map((p) => [p.node, p.running]) });
      return c.status && check(c.status, c) ? c.status : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

function writeHealth(node: string, content: Record<string, unknown>): void {
  const path = sim.hostPath(node, HEALTH_FILE);
  mkdirSync(dirname(path), { recursive: true });
  // Atomic, like a monitoring agent replacing the file.
  writeFileSync(`${path}.tmp`, JSON.stringify(content));
  renameSync(`${path}.tmp`, path);
}

function manifest(name: string, spec: Record<string, unknown>) {
  return { apiVersion: "dpo.dev/v1beta1", kind: "DevicePluginConfig", metadata: { name }, spec };
}

const baseSpec = {
  resourceName: RESOURCE,
  backend: { type: "Mock", mock: { devices: 4, idPrefix: "e2e", numaNodes: 2, healthFile: HEALTH_FILE } },
  nodeSelector: { "feature.example/foo": "true" },
};

/**
 * Brings the shared config to its starting point: present with `baseSpec`, every device healthy, every
 * plugin running, and Ready with 3/3 nodes and 12/12 devices for its current generation. Each test starts
 * from there, so none depends on what an earlier one left (a changed spec, a deleted config, a killed
 * plugin) and each can run alone with -t.
 */
async function ensureBaseConfig(): Promise<void> {
  const existing = await getConfig().catch((err: unknown) => {
    if (apiStatusCode(err) === 404) return undefined;
    throw err;
  });
  if (!existing) {
    await custom.createClusterCustomObject({ ...GROUP, body: manifest(NAME, baseSpec) });
  } else {
    // A JSON merge patch would keep fields a test added; replacing /spec restores it whole.
    await custom.patchClusterCustomObject({
      ...GROUP,
      name: NAME,
      body: [{ op: "replace", path: "/spec", value: baseSpec }],
    });
  }
  for (const node of nodes) writeHealth(node, {});
  // A plugin killed by an earlier test stays down until restarted (the simulator has no restart policy).
  for (const p of sim.plugins())
    if (!p.running && p.slot.startsWith(`${NAMESPACE}/${NAME}/`)) sim.restartPlugin(p.node, p.slot);
  await statusWhere(
    "back at the starting point: 3/3 nodes, 12/12 devices, Ready, current generation",
    (s, c) =>
      s.observedGeneration === c.metadata.generation &&
      s.nodes?.summary === "3/3" &&
      s.nodes.updated === 3 &&
      s.devices?.summary === "12/12" &&
      (s.problems ?? []).length === 0 &&
      condition(s, "Ready")?.status === "True",
    NAME,
    120_000,
  );
}

beforeAll(async () => {
  nodes = injectedCluster().nodeNames;
  expect(nodes).toHaveLength(3);
  await installDpo();
  sim = await KubeletSimulator.start({ kubeconfig: kc, nodes, gracePeriodMs: 60_000 });
  operator = await startOperator(["--status-write-interval", "500"]);
}, 120_000);

beforeEach(ensureBaseConfig, 180_000);

afterAll(async () => {
  // The next file's simulator must not find this file's plugin pods still on the shared nodes.
  await deleteConfigsAndWait(kc, [NAME]).finally(async () => {
    await operator?.stop();
    await sim?.stop();
  });
}, 120_000);

describe("a DevicePluginConfig on three simulated device nodes", () => {
  it("shows node counts and device totals from the kubelet's capacity, and becomes Ready", async () => {
    const status = await statusWhere(
      "3/3 nodes and 12/12 devices, Ready",
      (s) =>
        s.nodes?.summary === "3/3" &&
        s.devices?.summary === "12/12" &&
        condition(s, "Ready")?.status === "True",
    );
    expect(status.nodes).toEqual({ desired: 3, ready: 3, available: 3, updated: 3, summary: "3/3" });
    expect(status.devices).toEqual({
      capacity: 12,
      allocatable: 12,
      unhealthy: 0,
      allocated: 0,
      summary: "12/12",
    });
    expect(condition(status, "Reconciling")?.status).toBe("False");
    expect(condition(status, "Stalled")?.status).toBe("False");
    expect(condition(status, "Degraded")?.status).toBe("False");
    expect(status.observedGeneration).toBe((await getConfig()).metadata.generation);
    for (const node of nodes) {
      const n = await core.readNode({ name: node });
      expect(n.status?.capacity?.[RESOURCE]).toBe("4");
    }
  });

  it("applies a ConfigMap and a DaemonSet owned by the config, with the pod a device plugin needs", async () => {
    const uid = (await getConfig()).metadata.uid;
    const cm = await pluginConfigMap(kc, NAMESPACE, NAME);
    const ds = await pluginDaemonSet(kc, NAMESPACE, NAME);
    if (cm === undefined || ds === undefined) throw new Error("the plugin ConfigMap or DaemonSet is missing");
    // One revision, one DaemonSet and one ConfigMap, named after it.
    expect(ds.metadata?.name).toBe(`dpo-${NAME}-${ds.metadata?.labels?.["dpo.dev/revision"]}`);
    expect(cm.metadata?.name).toBe(ds.metadata?.name);
    for (const obj of [cm, ds]) {
      expect(obj.metadata?.ownerReferences).toEqual([
        expect.objectContaining({ kind: "DevicePluginConfig", name: NAME, uid, controller: true }),
      ]);
    }
    expect(cm.data?.["config.yaml"]).toContain(`resourceName: ${RESOURCE}`);
    const pod = ds.spec!.template.spec!;
    expect(pod.nodeSelector).toEqual({ "feature.example/foo": "true" });
    expect(pod.priorityClassName).toBe("system-node-critical");
    expect(pod.serviceAccountName).toBe("dpo-plugin");
    const container = pod.containers[0]!;
    expect(container.image).toBe("dpo:e2e");
    expect(container.args?.slice(0, 3)).toEqual(["plugin", "--config", "/etc/dpo/config.yaml"]);
    expect(container.env?.find((e) => e.name === "NODE_NAME")?.valueFrom?.fieldRef?.fieldPath).toBe(
      "spec.nodeName",
    );
    expect(container.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
    });
    expect(container.securityContext?.privileged ?? false).toBe(false);
    expect(container.readinessProbe?.httpGet?.path).toBe("/readyz");
    expect(pod.volumes?.find((v) => v.hostPath?.path === "/var/lib/kubelet/device-plugins")).toBeDefined();
    // The mock backend's health file directory, and nothing like /dev or /sys it does not need.
    expect(pod.volumes?.find((v) => v.hostPath?.path === "/run/dpo")).toBeDefined();
    expect(pod.volumes?.some((v) => v.hostPath?.path === "/dev" || v.hostPath?.path === "/sys")).toBe(false);
    expect(ds.spec!.template.metadata?.annotations?.["dpo.dev/config-hash"]).toMatch(/^[0-9a-f]{16}$/);
  });

  it("answers kubectl wait --for=condition=Ready and prints the columns", async () => {
    const wait = await kubectl(["wait", "--for=condition=Ready", `dpc/${NAME}`, "--timeout=60s"]);
    expect(wait.stdout).toContain("condition met");
    const table = (await kubectl(["get", "dpc", NAME])).stdout.trim().split("\n");
    expect(table[0]!.split(/\s{2,}/)).toEqual([
      "NAME",
      "RESOURCE",
      "BACKEND",
      "NODES",
      "DEVICES",
      "UNHEALTHY",
      "UPDATED",
      "READY",
      "AGE",
    ]);
    expect(table[1]!.split(/\s{2,}/).slice(0, 8)).toEqual([
      NAME,
      RESOURCE,
      "Mock",
      "3/3",
      "12/12",
      "0",
      "3/3",
      "True",
    ]);
    const states = (
      await kubectl(["get", "devicenodestates", "-n", NAMESPACE, "-l", `dpo.dev/config=${NAME}`])
    ).stdout;
    expect(states.trim().split("\n")).toHaveLength(1 + nodes.length);
    expect(states).toContain("Registered");
  });

  it("shows an unhealthy device as a problem node with the device id, Degraded, and clears it on recovery", async () => {
    const node = nodes[1]!;
    writeHealth(node, { "e2e-1": { health: "Unhealthy", reason: "XidError" } });
    const degraded = await statusWhere("UnhealthyDevices on the node", (s) =>
      (s.problems ?? []).some((p) => p.node === node && p.reason === "UnhealthyDevices"),
    );
    expect(degraded.problems).toEqual([
      expect.objectContaining({ node, reason: "UnhealthyDevices", devices: ["e2e-1"] }),
    ]);
    expect(condition(degraded, "Degraded")).toMatchObject({ status: "True", reason: "UnhealthyDevices" });
    const settled = await statusWhere("allocatable 11 of 12", (s) => s.devices?.summary === "11/12");
    expect(settled.devices).toMatchObject({ capacity: 12, allocatable: 11, unhealthy: 1 });
    const row = (await kubectl(["get", "dpc", NAME, "--no-headers"])).stdout.trim().split(/\s{2,}/);
    expect(row[5]).toBe("1");

    writeHealth(node, {});
    const recovered = await statusWhere(
      "no problems after recovery",
      (s) => (s.problems ?? []).length === 0 && s.devices?.summary === "12/12",
    );
    expect(condition(recovered, "Degraded")?.status).toBe("False");
    // The operator records a transition's Event after the status write's answer, so the Event can come after
    // the status this test read.
    await waitFor("the Degraded and Recovered Events", async (observe) => {
      const events = (
        await kubectl(["get", "events", "-n", "default", "--field-selector", `involvedObject.name=${NAME}`])
      ).stdout;
      observe(events);
      return events.includes("Degraded") && events.includes("Recovered");
    });
  });

  it("reports a stopped plugin and recovers when it is back", async () => {
    const node = nodes[2]!;
    // This config's plugin: the cluster is shared by the tier's files, and a node may run others' too.
    const slot = `${NAMESPACE}/${NAME}`;
    await sim.killPlugin(node, "SIGKILL", slot);
    // Whichever the operator sees first: the kubelet's capacity going (NoCapacity), or the pod's
    // container exited and the pod not ready, as the kubelet writes it at once (PluginNotReady). The
    // pod's status can reach the operator before the Node's allocatable does, so a status may name the
    // problem while the node still counts its 4 devices: wait for both.
    const broken = await statusWhere(
      "a problem on the stopped plugin's node, and its devices out of allocatable",
      (s) =>
        s.devices?.allocatable === 8 &&
        (s.problems ?? []).some(
          (p) =>
            p.node === node &&
            (p.reason === "PluginNotRegistered" ||
              p.reason === "NoCapacity" ||
              p.reason === "PluginNotReady"),
        ),
    );
    expect(condition(broken, "Degraded")?.status).toBe("True");
    sim.restartPlugin(node, slot);
    await statusWhere(
      "recovered after the plugin restarted",
      (s) => (s.problems ?? []).length === 0 && s.devices?.summary === "12/12",
    );
  });

  it("rolls the plugin pods when the spec changes", async () => {
    const before = await pluginDaemonSet(kc, NAMESPACE, NAME);
    const oldHash = before?.spec?.template.metadata?.annotations?.["dpo.dev/config-hash"];
    const podsBefore = (
      await core.listNamespacedPod({ namespace: NAMESPACE, labelSelector: `dpo.dev/config=${NAME}` })
    ).items.map((p) => p.metadata!.uid);
    await custom.patchClusterCustomObject({
      ...GROUP,
      name: NAME,
      body: [{ op: "replace", path: "/spec/backend/mock/devices", value: 6 }],
    });
    // Ready once every new plugin pod passed its readiness probe, which may come a probe period after
    // the rollout completed (the gate waits for registration and capacity, not for the probe).
    const status = await statusWhere(
      "18 devices after the change, all nodes updated, Ready",
      (s, c) =>
        s.observedGeneration === c.metadata.generation &&
        condition(s, "Ready")?.status === "True" &&
        s.devices?.summary === "18/18" &&
        s.nodes?.updated === 3 &&
        s.upgrade?.phase === "Complete" &&
        s.upgrade.currentRevision === s.upgrade.updateRevision,
      NAME,
      120_000,
    );
    expect(status.upgrade).toMatchObject({ updated: 3, total: 3, summary: "3/3" });
    const after = await waitFor("the old revision's DaemonSet to be gone", async () => {
      const list = await apps.listNamespacedDaemonSet({
        namespace: NAMESPACE,
        labelSelector: `dpo.dev/config=${NAME}`,
      });
      return list.items.length === 1 ? list.items[0] : undefined;
    });
    expect(after.metadata?.name).not.toBe(before?.metadata?.name);
    expect(after.metadata?.labels?.["dpo.dev/revision"]).toBe(status.upgrade?.updateRevision);
    expect(after.spec?.template.metadata?.annotations?.["dpo.dev/config-hash"]).not.toBe(oldHash);
    const podsAfter = (
      await core.listNamespacedPod({ namespace: NAMESPACE, labelSelector: `dpo.dev/config=${NAME}` })
    ).items.map((p) => p.metadata!.uid);
    expect(podsAfter.filter((uid) => podsBefore.includes(uid))).toEqual([]);
  });

  it("rolls spec.plugin's pod fields out as a new revision whose DaemonSet and pods carry them", async () => {
    // A pod naming a RuntimeClass that does not exist is refused by admission; runc is any node's handler.
    await kubectl(["apply", "--server-side", "-f", "-"], {
      input: JSON.stringify({
        apiVersion: "node.k8s.io/v1",
        kind: "RuntimeClass",
        metadata: { name: "dpo-e2e" },
        handler: "runc",
      }),
    });
    const before = await pluginDaemonSet(kc, NAMESPACE, NAME);
    const fields = {
      imagePullSecrets: [{ name: "e2e-regcred" }],
      imagePullPolicy: "Never",
      runtimeClassName: "dpo-e2e",
      podAnnotations: { "example.com/team": "e2e" },
      env: [{ name: "E2E_NODE", value: "$(NODE_NAME)" }],
    };
    await custom.patchClusterCustomObject({
      ...GROUP,
      name: NAME,
      body: Object.entries(fields).map(([field, value]) => ({
        op: "add",
        path: `/spec/plugin/${field}`,
        value,
      })),
    });
    const status = await statusWhere(
      "the new revision on every node, Ready",
      (s, c) =>
        s.observedGeneration === c.metadata.generation &&
        condition(s, "Ready")?.status === "True" &&
        s.nodes?.updated === 3 &&
        s.upgrade?.phase === "Complete" &&
        s.upgrade.currentRevision === s.upgrade.updateRevision &&
        s.upgrade.currentRevision !== before?.metadata?.labels?.["dpo.dev/revision"],
      NAME,
      120_000,
    );
    const revision = status.upgrade!.currentRevision;
    const ds = await waitFor("one DaemonSet, of the new revision", async (observe) => {
      const list = await apps.listNamespacedDaemonSet({
        namespace: NAMESPACE,
        labelSelector: `dpo.dev/config=${NAME}`,
      });
      observe(list.items.map((d) => d.metadata?.name));
      return list.items.length === 1 && list.items[0]!.metadata?.labels?.["dpo.dev/revision"] === revision
        ? list.items[0]
        : undefined;
    });
    const pods = await waitFor("a running pod of the new revision on every node", async (observe) => {
      const list = await core.listNamespacedPod({
        namespace: NAMESPACE,
        labelSelector: `dpo.dev/config=${NAME},dpo.dev/revision=${revision}`,
      });
      observe(list.items.map((p) => [p.spec?.nodeName, p.status?.phase]));
      const running = list.items.filter((p) => p.status?.phase === "Running");
      return running.length === nodes.length ? running : undefined;
    });
    for (const template of [ds.spec!.template, ...pods]) {
      expect(template.metadata?.annotations).toMatchObject({ "example.com/team": "e2e" });
      expect(template.metadata?.annotations?.["dpo.dev/config-hash"]).toMatch(/^[0-9a-f]{16}$/);
      const pod = template.spec!;
      expect(pod.runtimeClassName).toBe("dpo-e2e");
      expect(pod.imagePullSecrets).toEqual([{ name: "e2e-regcred" }]);
      const container = pod.containers[0]!;
      expect(container.imagePullPolicy).toBe("Never");
      expect(container.env?.find((e) => e.name === "E2E_NODE")).toEqual({
        name: "E2E_NODE",
        value: "$(NODE_NAME)",
      });
    }
  });

  it("refuses a second config for the same resource on the same nodes: ResourceNameConflict, no DaemonSet", async () => {
    const second = "e2e-foo-duplicate";
    await custom.createClusterCustomObject({ ...GROUP, body: manifest(second, baseSpec) });
    try {
      const status = await statusWhere(
        "Ready=False ResourceNameConflict",
        (s) => condition(s, "Ready")?.reason === "ResourceNameConflict",
        second,
      );
      expect(condition(status, "Ready")?.status).toBe("False");
      expect(condition(status, "Stalled")).toMatchObject({ status: "True", reason: "ResourceNameConflict" });
      // Not found, rather than any error (a refused or failed request would also throw).
      expect(await pluginDaemonSet(kc, NAMESPACE, second)).toBeUndefined();
      // The older config keeps running.
      const first = await getConfig();
      expect(condition(first.status, "Ready")?.status).toBe("True");
      expect(await pluginDaemonSet(kc, NAMESPACE, NAME)).toBeDefined();
    } finally {
      await custom.deleteClusterCustomObject({ ...GROUP, name: second });
    }
  });

  it("makes no API requests while nothing changes", async () => {
    await statusWhere("settled", (s) => condition(s, "Ready")?.status === "True");
    // Let any write caused by the last test land and come back through the watch.
    const idleFrom = await waitFor("the request counter to settle", async () => {
      const a = await operator.metric("dpo_operator_api_requests_total");
      await new Promise<void>((r) => setImmediate(r));
      const status = await getConfig();
      const b = await operator.metric("dpo_operator_api_requests_total");
      return a === b && condition(status.status, "Ready")?.status === "True" ? b : undefined;
    });
    const writesBefore = await operator.metric("dpo_operator_status_writes_total");
    // A window with KWOK heartbeats on every node (they arrive every ~10 s) and plugin reports unchanged.
    const windowEnd = Date.now() + 15_000;
    await waitFor("a 15 s observation window", () => Date.now() >= windowEnd, {
      timeoutMs: 20_000,
      intervalMs: 500,
    });
    expect(await operator.metric("dpo_operator_api_requests_total")).toBe(idleFrom);
    expect(await operator.metric("dpo_operator_status_writes_total")).toBe(writesBefore);
  });

  it("removes the DaemonSet, ConfigMap and DeviceNodeStates when the config is deleted", async () => {
    await custom.deleteClusterCustomObject({ ...GROUP, name: NAME });
    await waitFor(
      "DaemonSet, ConfigMap and DeviceNodeStates to be garbage-collected",
      async (observe) => {
        const ds = await pluginDaemonSet(kc, NAMESPACE, NAME);
        const cm = await pluginConfigMap(kc, NAMESPACE, NAME);
        const states = (
          await kubectl([
            "get",
            "devicenodestates",
            "-n",
            NAMESPACE,
            "-l",
            `dpo.dev/config=${NAME}`,
            "-o",
            "name",
          ])
        ).stdout.trim();
        observe({ ds, cm, states });
        return !ds && !cm && states === "";
      },
      { timeoutMs: 60_000 },
    );
    await waitFor("the plugin processes to stop", (observe) => {
      const running = sim.plugins().filter((p) => p.running);
      observe(running.map((p) => p.pod));
      return running.length === 0;
    });
  });
});
