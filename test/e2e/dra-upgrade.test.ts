// A DRA config's plugin upgrade end to end, on three simulated nodes whose kubelets differ: v1.34 and
// v1.33 keep both instances of a driver registered (kubernetes#129832), so the operator surges there and
// the new instance takes over the node's ResourceSlices from the old one; v1.32 does not, so that node is
// replaced. Throughout, the kubelet keeps preparing a claim on each Surge node, and not one call may fail,
// and the Surge nodes' pools never lose a device. Afterwards every slice shows the new spec's attribute.
// Then a second config on the same three nodes switches spec.publish from DevicePlugin to DRA and back
// (its spec asks for Surge, which a switch never does): at every observation of the Nodes and the
// slices, no node advertises the name through both paths; each node ends on the target path.
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { V1Node } from "@kubernetes/client-node";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { kubeRequest } from "../../src/kube/request.js";
import {
  createWorkloadNamespace,
  injectedCluster,
  kubeConfigFromInjected,
  kubectl,
  uniqueName,
  waitFor,
} from "../cluster/helpers.js";
import type { DraClaimRef } from "../../tools/kubelet-sim/dra-manager.js";
import { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import { installDpo, NAMESPACE, startOperator, type OperatorProcess } from "./support.js";
import { configStatusWhere, LiveWatch, RolloutWatch, type WatchHealth } from "./upgrade-support.js";

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const NAME = uniqueName("e2e-draupg");
const DRIVER = `${NAME}.dra-upgrade.example`;
const DEVICES = 2;
const SWITCH = uniqueName("e2e-draswitch");
const SWITCH_DRIVER = `${SWITCH}.dra-switch.example`;
const SWITCH_RESOURCE = `dra-switch.example/${SWITCH}`;
const SLICES = "/apis/resource.k8s.io/v1/resourceslices";

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const core = kc.makeApiClient(CoreV1Api);

let nodes: string[] = [];
let surgeNodes: string[] = [];
let sim: KubeletSimulator;
let operator: OperatorProcess;
let namespace: string;

interface Slice {
  metadata: { name: string };
  spec: {
    nodeName: string;
    devices?: { name: string; attributes?: Record<string, { string?: string }> }[];
  };
}

function spec(model: string) {
  return {
    resourceName: `dra-upgrade.example/${NAME}`,
    backend: { type: "Mock", mock: { devices: DEVICES, idPrefix: "g", attributes: { model } } },
    publish: "DRA",
    dra: { driverName: DRIVER },
    upgrade: { maxUnavailable: 1, progressDeadlineSeconds: 60 },
  };
}

const statusWhere = (
  what: string,
  pred: (s: DevicePluginConfigStatus) => boolean,
  timeoutMs?: number,
): Promise<DevicePluginConfigStatus> => configStatusWhere(custom, NAME, what, pred, timeoutMs);

async function slices(): Promise<Slice[]> {
  return (
    await kubeRequest<{ items: Slice[] }>(kc, {
      method: "GET",
      path: SLICES,
      query: { fieldSelector: `spec.driver=${DRIVER}` },
    })
  ).items;
}

/** Models in each node's slices, e.g. { node-0: "X100,X100" }. */
async function modelsByNode(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const s of await slices()) {
    out[s.spec.nodeName] = (s.spec.devices ?? []).map((d) => d.attributes?.["model"]?.string ?? "").join(",");
  }
  return out;
}

/** A pod on `node` with a claim of the driver, prepared by the simulated kubelet; its claim's reference. */
async function preparedClaim(node: string, index: number): Promise<DraClaimRef> {
  const pod = `holder-${index}`;
  await kubectl(["apply", "--server-side", "-f", "-"], {
    input: JSON.stringify({
      apiVersion: "v1",
      kind: "List",
      items: [
        {
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name: pod, namespace },
          spec: {
            // Through the scheduler (which allocates the claim), onto this node.
            affinity: {
              nodeAffinity: {
                requiredDuringSchedulingIgnoredDuringExecution: {
                  nodeSelectorTerms: [
                    { matchFields: [{ key: "metadata.name", operator: "In", values: [node] }] },
                  ],
                },
              },
            },
            terminationGracePeriodSeconds: 0,
            containers: [
              {
                name: "main",
                image: "registry.example/workload:1",
                resources: { claims: [{ name: "gpu" }] },
              },
            ],
            resourceClaims: [{ name: "gpu", resourceClaimTemplateName: "one-gpu" }],
          },
        },
      ],
    }),
  });
  const admitted = await waitFor(
    `${pod} prepared on ${node}`,
    async (observe) => {
      const found = sim.admittedPods(node).find((p) => p.pod === `${namespace}/${pod}`);
      const live = await core.readNamespacedPod({ name: pod, namespace });
      observe({ phase: live.status?.phase, claims: live.status?.resourceClaimStatuses });
      return found !== undefined && Object.keys(found.cdiDeviceIds).length > 0 ? live : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 250 },
  );
  const claimName = admitted.status?.resourceClaimStatuses?.[0]?.resourceClaimName ?? "";
  const claim = await kubeRequest<{ metadata: { uid: string } }>(kc, {
    method: "GET",
    path: `/apis/resource.k8s.io/v1/namespaces/${namespace}/resourceclaims/${claimName}`,
  });
  return { namespace, name: claimName, uid: claim.metadata.uid };
}

/**
 * What the kubelet does whenever a pod with the claim starts on the node: NodePrepareResources, to the
 * instance it uses now, again and again until stopped. Every failed call is kept.
 */
function prepareLoop(claims: ReadonlyMap<string, DraClaimRef>): {
  stop: () => Promise<{ calls: number; failures: string[] }>;
} {
  const failures: string[] = [];
  let calls = 0;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      for (const [node, ref] of claims) {
        calls++;
        try {
          const answer = await sim.draManager(node).prepare(DRIVER, [ref]);
          const error = answer.get(ref.uid)?.error;
          if (error !== "") failures.push(`${node}: ${error ?? "no answer for the claim"}`);
        } catch (err) {
          failures.push(`${node}: ${(err as Error).message}`);
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      return { calls, failures };
    },
  };
}

/**
 * Every moment a watched node's pool held fewer devices than it should (or lost its slice), and what the
 * watch saw: per node, the slice updates it delivered (the samples the gaps were looked for in).
 */
async function watchPools(watched: readonly string[]): Promise<{
  gaps: string[];
  liveness: () => string[];
  health: () => WatchHealth;
  stop: () => void;
}> {
  const gaps: string[] = [];
  const samples = new Map<string, number>();
  const watch = new LiveWatch<Slice>(
    kc,
    SLICES,
    { fieldSelector: `spec.driver=${DRIVER}` },
    (type, slice) => {
      const node = slice.spec.nodeName;
      if (!watched.includes(node)) return;
      if (type === "MODIFIED") samples.set(node, (samples.get(node) ?? 0) + 1);
      const devices = slice.spec.devices?.length ?? 0;
      if (type === "DELETED") gaps.push(`${node}: slice ${slice.metadata.name} deleted`);
      else if (devices < DEVICES) gaps.push(`${node}: ${devices} devices published`);
    },
  );
  await watch.start();
  return {
    gaps,
    liveness: () => [
      ...watch.gaps,
      ...watched.filter((n) => (samples.get(n) ?? 0) === 0).map((n) => `${n}: no slice update seen`),
    ],
    health: () => watch.health(),
    stop: () => watch.stop(),
  };
}

beforeAll(async () => {
  nodes = injectedCluster().nodeNames;
  expect(nodes.length).toBeGreaterThanOrEqual(3);
  surgeNodes = [nodes[0]!, nodes[1]!];
  await installDpo();
  sim = await KubeletSimulator.start({
    kubeconfig: kc,
    nodes,
    gracePeriodMs: 60_000,
    kubeletVersions: { [nodes[0]!]: "v1.34.4", [nodes[1]!]: "v1.33.4", [nodes[2]!]: "v1.32.13" },
  });
  operator = await startOperator(["--status-write-interval", "250"]);
  namespace = uniqueName("e2e-draupg");
  await createWorkloadNamespace(core, namespace);
  await custom.createClusterCustomObject({
    ...GROUP,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: NAME },
      spec: spec("X100"),
    },
  });
  await kubectl(["apply", "--server-side", "-f", "-"], {
    input: JSON.stringify({
      apiVersion: "resource.k8s.io/v1",
      kind: "ResourceClaimTemplate",
      metadata: { name: "one-gpu", namespace },
      spec: { spec: { devices: { requests: [{ name: "gpu", exactly: { deviceClassName: DRIVER } }] } } },
    }),
  });
}, 180_000);

afterAll(async () => {
  await core.deleteNamespace({ name: namespace }).catch(() => undefined);
  await custom.deleteClusterCustomObject({ ...GROUP, name: NAME }).catch(() => undefined);
  await custom.deleteClusterCustomObject({ ...GROUP, name: SWITCH }).catch(() => undefined);
  await operator?.stop();
  await sim?.stop();
}, 120_000);

describe("a DRA config's plugin upgrade", () => {
  it("surges on v1.33+ kubelets with no failed prepare and no gap in the pool, and replaces on v1.32", async () => {
    const first = await statusWhere(
      "Ready on every node, upgrade Complete",
      (s) =>
        s.conditions?.find((c) => c.type === "Ready")?.status === "True" &&
        s.upgrade?.phase === "Complete" &&
        s.nodes?.desired === 3 &&
        s.devices?.summary === `${3 * DEVICES}/${3 * DEVICES}`,
    );
    const from = first.upgrade!.updateRevision;
    expect(await modelsByNode()).toEqual(Object.fromEntries(nodes.slice(0, 3).map((n) => [n, "X100,X100"])));
    const claims = new Map<string, DraClaimRef>();
    for (const [i, node] of surgeNodes.entries()) claims.set(node, await preparedClaim(node, i));

    const rollout = new RolloutWatch(1);
    await rollout.start(kc, NAMESPACE, NAME);
    const pools = await watchPools(surgeNodes);
    const kubelet = prepareLoop(claims);
    let prepared: { calls: number; failures: string[] } | undefined;
    try {
      await custom.patchClusterCustomObject({
        ...GROUP,
        name: NAME,
        body: [{ op: "replace", path: "/spec/backend/mock/attributes/model", value: "X200" }],
      });
      await statusWhere(
        "the new revision on every node, Complete",
        (s) =>
          s.upgrade?.phase === "Complete" && s.upgrade.updateRevision !== from && s.upgrade.updated === 3,
        240_000,
      );
      // The old instances stop after the gate; the new ones publish the new attribute everywhere.
      await waitFor(
        "every node's slice with the new model",
        async (observe) => {
          const models = await modelsByNode();
          observe(models);
          return nodes.slice(0, 3).every((n) => models[n] === "X200,X200") ? true : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      );
    } finally {
      prepared = await kubelet.stop();
      pools.stop();
      rollout.stop();
    }
    console.log(
      `DRA upgrade: ${prepared.calls} NodePrepareResources calls on the Surge nodes, ${prepared.failures.length} failed; ${pools.gaps.length} pool gaps; ` +
        `watches: pools ${JSON.stringify(pools.health())}, rollout ${JSON.stringify(rollout.health())}`,
    );
    expect(pools.liveness(), "the pool watch saw every Surge node's slices change").toEqual([]);
    expect(rollout.liveness(nodes.slice(0, 3)), "the rollout's watches were alive").toEqual([]);
    expect(rollout.violations).toEqual([]);
    expect(rollout.maxBetween, "nodes between revisions at once").toBe(1);
    expect([...rollout.surged].sort()).toEqual([...surgeNodes].sort());
    expect([...rollout.replaced]).toEqual([nodes[2]!]);
    expect(prepared.calls).toBeGreaterThan(0);
    expect(prepared.failures).toEqual([]);
    expect(pools.gaps).toEqual([]);
    // Each Surge node's kubelet ends with one instance: the new one (the old deregistered on stopping).
    for (const node of surgeNodes) expect(sim.draManager(node).instances(DRIVER)).toHaveLength(1);
  });
});

/**
 * Both paths of the switch config as watches show them: per node, Node.status.allocatable[name] and the
 * devices its slices of the driver publish. Every event checks that no node has both above 0.
 */
async function watchAdvertising(): Promise<{
  violations: string[];
  allocatable: Map<string, number>;
  sliceDevices: () => Map<string, number>;
  observations: () => number;
  /** Why the observations cannot be trusted for `moved`: errors, a node never updated, no slice seen. */
  liveness: (moved: readonly string[]) => string[];
  health: () => Record<string, WatchHealth>;
  stop: () => void;
}> {
  const allocatable = new Map<string, number>();
  const slicesByName = new Map<string, { node: string; devices: number }>();
  const violations: string[] = [];
  let observations = 0;
  const sliceDevices = () => {
    const out = new Map<string, number>();
    for (const { node, devices } of slicesByName.values()) out.set(node, (out.get(node) ?? 0) + devices);
    return out;
  };
  const check = (what: string) => {
    observations++;
    const published = sliceDevices();
    for (const [node, count] of allocatable) {
      const devices = published.get(node) ?? 0;
      if (count > 0 && devices > 0)
        violations.push(`${what}: ${node} has allocatable ${count} and ${devices} devices in slices`);
    }
  };
  const nodeUpdates = new Map<string, number>();
  const nodesWatch = new LiveWatch<V1Node>(kc, "/api/v1/nodes", {}, (type, n) => {
    const name = n.metadata?.name ?? "";
    const value = Number(n.status?.allocatable?.[SWITCH_RESOURCE] ?? "0");
    if (type === "MODIFIED") nodeUpdates.set(name, (nodeUpdates.get(name) ?? 0) + 1);
    if (type === "DELETED") allocatable.delete(name);
    else allocatable.set(name, value);
    check(`Node ${name} ${type}`);
  });
  const slicesWatch = new LiveWatch<Slice>(
    kc,
    SLICES,
    { fieldSelector: `spec.driver=${SWITCH_DRIVER}` },
    (type, slice) => {
      if (type === "DELETED") slicesByName.delete(slice.metadata.name);
      else
        slicesByName.set(slice.metadata.name, {
          node: slice.spec.nodeName,
          devices: slice.spec.devices?.length ?? 0,
        });
      check(`ResourceSlice ${slice.metadata.name} ${type}`);
    },
  );
  await Promise.all([nodesWatch.start(), slicesWatch.start()]);
  return {
    violations,
    allocatable,
    sliceDevices,
    observations: () => observations,
    liveness: (moved) => [
      ...nodesWatch.gaps,
      ...slicesWatch.gaps,
      ...moved.filter((n) => (nodeUpdates.get(n) ?? 0) === 0).map((n) => `${n}: no Node update seen`),
      ...(slicesWatch.events === 0 ? ["no ResourceSlice event seen"] : []),
    ],
    health: () => ({ nodes: nodesWatch.health(), slices: slicesWatch.health() }),
    stop: () => {
      nodesWatch.stop();
      slicesWatch.stop();
    },
  };
}

describe("a config's switch between DevicePlugin and DRA", () => {
  it("goes node by node, never advertising the name through both paths on a node, and back", async () => {
    const switchNodes = nodes.slice(0, 3);
    await custom.createClusterCustomObject({
      ...GROUP,
      body: {
        apiVersion: "dpo.dev/v1beta1",
        kind: "DevicePluginConfig",
        metadata: { name: SWITCH },
        spec: {
          resourceName: SWITCH_RESOURCE,
          backend: { type: "Mock", mock: { devices: DEVICES, idPrefix: "s" } },
          publish: "DevicePlugin",
          dra: { driverName: SWITCH_DRIVER },
          upgrade: { strategy: "Surge", maxUnavailable: 1, progressDeadlineSeconds: 120 },
        },
      },
    });
    const switchStatus = (what: string, pred: (s: DevicePluginConfigStatus) => boolean, timeoutMs?: number) =>
      configStatusWhere(custom, SWITCH, what, pred, timeoutMs);
    const first = await switchStatus(
      "the device plugin Ready on every node",
      (s) =>
        s.conditions?.find((c) => c.type === "Ready")?.status === "True" &&
        s.upgrade?.phase === "Complete" &&
        s.nodes?.desired === 3 &&
        s.devices?.summary === `${3 * DEVICES}/${3 * DEVICES}`,
    );
    expect(first.conditions?.find((c) => c.type === "ExtendedResourceMapping")?.status).toBe("True");
    const watch = await watchAdvertising();
    const messages = new Set<string>();
    let rollout: RolloutWatch | undefined;
    try {
      for (const target of ["DRA", "DevicePlugin"] as const) {
        rollout = new RolloutWatch(1);
        await rollout.start(kc, NAMESPACE, SWITCH);
        const before = await switchStatus("a revision", (s) => s.upgrade !== undefined);
        await custom.patchClusterCustomObject({
          ...GROUP,
          name: SWITCH,
          body: [{ op: "replace", path: "/spec/publish", value: target }],
        });
        await switchStatus(
          `the switch to ${target} Complete on every node`,
          (s) => {
            if (s.upgrade?.message?.startsWith("switching spec.publish")) messages.add(s.upgrade.message);
            return (
              s.upgrade?.phase === "Complete" &&
              s.upgrade.updateRevision !== before.upgrade!.updateRevision &&
              s.upgrade.updated === 3
            );
          },
          300_000,
        );
        // Each node ends on the target path alone: devices in its slices, or in its allocatable.
        await waitFor(
          `every node on ${target} alone`,
          (observe) => {
            const published = watch.sliceDevices();
            const seen = switchNodes.map((n) => ({
              node: n,
              allocatable: watch.allocatable.get(n) ?? 0,
              sliceDevices: published.get(n) ?? 0,
            }));
            observe(seen);
            const onTarget = seen.every((x) =>
              target === "DRA"
                ? x.allocatable === 0 && x.sliceDevices === DEVICES
                : x.allocatable === DEVICES && x.sliceDevices === 0,
            );
            return Promise.resolve(onTarget ? true : undefined);
          },
          { timeoutMs: 60_000, intervalMs: 250 },
        );
        rollout.stop();
        expect(rollout.liveness(switchNodes), `${target}: the rollout's watches were alive`).toEqual([]);
        expect(rollout.violations, target).toEqual([]);
        expect(rollout.maxBetween, `${target}: nodes between paths at once`).toBe(1);
        expect([...rollout.surged], `${target}: a switch never surges`).toEqual([]);
        expect([...rollout.replaced].sort(), target).toEqual([...switchNodes].sort());
      }
    } finally {
      watch.stop();
      rollout?.stop();
    }
    const done = await switchStatus(
      "Ready on the device plugin again",
      (s) =>
        s.conditions?.find((c) => c.type === "Ready")?.status === "True" &&
        s.devices?.summary === `${3 * DEVICES}/${3 * DEVICES}`,
    );
    console.log(
      `publish switch: ${watch.observations()} observations of Nodes and slices, ${watch.violations.length} with both paths advertising; status messages seen: ${[...messages].slice(0, 3).join(" | ")}; watches ${JSON.stringify(watch.health())}`,
    );
    expect(watch.liveness(switchNodes), "the watches of both paths were alive").toEqual([]);
    expect(watch.violations).toEqual([]);
    expect(watch.observations()).toBeGreaterThan(0);
    expect(messages.size, "the status said which node was where").toBeGreaterThan(0);
    expect(done.upgrade?.phase).toBe("Complete");
  });
});
