// The kubelet simulator is held to the real kubelet: one scenario runs on the real node and on a simulated node
// of the same cluster, with the same config, and what a user or the plugin can observe must agree: the
// kubelet's registration verdicts and messages, the capacity and allocatable a Node watch shows on the way through
// each step, admission errors, the PodResources answers and the device health in pod status. Where they
// disagree, the simulator is wrong.
import * as grpc from "@grpc/grpc-js";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { CoreV1Api, type V1Pod } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEVICE_PLUGINS_DIR } from "../../src/contract/kubelet-paths.js";
import {
  PodResourcesListerClient,
  RegistrationClient,
  type ListPodResourcesResponse,
  type RegisterRequest,
} from "../../src/plugin-runtime/proto/index.js";
import { injectedCluster, kubeConfigFromInjected, kubectl, uniqueName, waitFor } from "../cluster/helpers.js";
import { installDpo, startOperator, type OperatorProcess } from "../e2e/support.js";
import {
  HOST_DEVICE_PLUGINS_DIR,
  HOST_POD_RESOURCES_DIR,
  KubeletSimulator,
} from "../../tools/kubelet-sim/node-simulator.js";
import { NodeWatch } from "./node-watch.js";
import { advertised, dpoImage, ON_REAL_NODE, realNode, removeConfig, workloadImage } from "./support.js";

const NAME = uniqueName("parity");
const RESOURCE = `parity.example/${NAME}`;
const HEALTH_FILE = `/run/dpo-parity/${NAME}.json`;
const DEVICES = 4;

const kc = kubeConfigFromInjected();
const core = kc.makeApiClient(CoreV1Api);
let operator: OperatorProcess;
let sim: KubeletSimulator;
let simNode: string;

/** The two nodes under comparison, and how each one's host is reached from here. */
interface Side {
  node: string;
  /** What a Node watch showed of the resource from before the config existed: each change, in order. */
  shown: string[];
  watch: NodeWatch;
  devicePluginDir: string;
  podResourcesSocket: string;
  writeHealth(content: Record<string, unknown>): Promise<void>;
}
let sides: { real: Side; sim: Side };

async function unary<Req, Res>(
  call: (req: Req, cb: (err: grpc.ServiceError | null, res: Res) => void) => unknown,
  req: Req,
): Promise<{ error?: string; code?: string; answer?: Res }> {
  return new Promise((resolve) =>
    call(req, (err, res) =>
      resolve(err ? { error: err.details, code: grpc.status[err.code] } : { answer: res }),
    ),
  );
}

/** A pod's devices as the PodResources API lists them: per container, resource → sorted ids and NUMA nodes. */
async function podResourcesOf(side: Side, pod: string): Promise<unknown> {
  const client = new PodResourcesListerClient(
    `unix://${side.podResourcesSocket}`,
    grpc.credentials.createInsecure(),
  );
  try {
    const { answer, error } = await unary<object, ListPodResourcesResponse>(client.list.bind(client), {});
    if (error !== undefined) throw new Error(`PodResources List on ${side.node}: ${error}`);
    const mine = answer!.podResources.find((p) => p.name === pod);
    return mine?.containers.map((c) => ({
      name: c.name,
      devices: c.devices
        .filter((d) => d.resourceName === RESOURCE)
        .map((d) => ({ ids: [...d.deviceIds].sort(), numa: d.topology?.nodes.map((n) => n.ID) ?? [] }))
        .sort((a, b) => (a.ids[0]! < b.ids[0]! ? -1 : 1)),
    }));
  } finally {
    client.close();
  }
}

/** What the kubelet answers to a registration it must refuse, before it would dial the plugin back. */
async function registrationVerdict(side: Side, request: RegisterRequest): Promise<unknown> {
  const client = new RegistrationClient(
    `unix://${join(side.devicePluginDir, "kubelet.sock")}`,
    grpc.credentials.createInsecure(),
  );
  try {
    return await unary(client.register.bind(client), request);
  } finally {
    client.close();
  }
}

function pod(name: string, node: string, count: number): V1Pod {
  return {
    metadata: { name, namespace: "default", labels: { "dpo.dev/test": NAME } },
    spec: {
      // Straight to the node, past the scheduler, so the kubelet's own admission decides.
      nodeName: node,
      tolerations: ON_REAL_NODE.tolerations,
      terminationGracePeriodSeconds: 0,
      containers: [
        {
          name: "app",
          image: workloadImage(),
          command: ["sleep", "3600"],
          resources: { limits: { [RESOURCE]: String(count) } },
        },
      ],
    },
  };
}

/** A pod's phase, reason and message once the kubelet decided, with the node's and pod's names made alike. */
async function settledPod(
  side: Side,
  name: string,
): Promise<{ phase?: string; reason?: string; message?: string }> {
  const p = await waitFor(
    `${name} on ${side.node} to be admitted or rejected`,
    async (observe) => {
      const live = await core.readNamespacedPod({ namespace: "default", name });
      observe(live.status);
      return live.status?.phase === "Running" || live.status?.phase === "Failed" ? live : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 250 },
  );
  const scrub = (text?: string): string | undefined =>
    text?.replaceAll(side.node, "<node>").replaceAll(name, "<pod>");
  return { phase: p.status?.phase, reason: p.status?.reason, message: scrub(p.status?.message) };
}

/**
 * Waits until a side advertises `want`, then returns the sequence of capacity/allocatable its Node watch has
 * shown since before the config existed (the watch caught up with the Node as it is now), so what is compared
 * is each node's path there and not the value waited for.
 */
async function settledAdvertised(
  side: Side,
  want: { capacity: number; allocatable: number },
): Promise<string[]> {
  await waitFor(
    `${side.node} to advertise ${JSON.stringify(want)}`,
    async (observe) => {
      const seen = advertised(await core.readNode({ name: side.node }), RESOURCE);
      observe(seen);
      return seen.capacity === want.capacity && seen.allocatable === want.allocatable ? seen : undefined;
    },
    // The real kubelet writes node status every 10 s.
    { timeoutMs: 60_000, intervalMs: 250 },
  );
  await side.watch.caughtUp();
  expect(side.watch.gaps, `the watch of ${side.node}`).toEqual([]);
  return [...side.shown];
}

/** A side whose Node is watched from now on, its resource's capacity/allocatable kept on each change. */
async function watchedSide(node: string, rest: Omit<Side, "node" | "shown" | "watch">): Promise<Side> {
  const shown: string[] = [];
  const watch = new NodeWatch(node, (n) => {
    const { capacity, allocatable } = advertised(n, RESOURCE);
    const now = `${capacity}/${allocatable}`;
    if (shown.at(-1) !== now) shown.push(now);
  });
  await watch.start();
  return { node, shown, watch, ...rest };
}

beforeAll(async () => {
  simNode = injectedCluster().nodeNames[0]!;
  const realVersion = (await core.readNode({ name: realNode() })).status!.nodeInfo!.kubeletVersion;
  await installDpo();
  sim = await KubeletSimulator.start({
    kubeconfig: kc,
    nodes: [simNode],
    kubeletVersions: { [simNode]: realVersion },
  });
  sides = {
    real: await watchedSide(realNode(), {
      devicePluginDir: DEVICE_PLUGINS_DIR,
      podResourcesSocket: "/var/lib/kubelet/pod-resources/kubelet.sock",
      writeHealth: async (content) => {
        await mkdir(dirname(HEALTH_FILE), { recursive: true });
        await writeFile(HEALTH_FILE, JSON.stringify(content));
      },
    }),
    sim: await watchedSide(simNode, {
      devicePluginDir: sim.hostPath(simNode, HOST_DEVICE_PLUGINS_DIR),
      podResourcesSocket: join(sim.hostPath(simNode, HOST_POD_RESOURCES_DIR), "kubelet.sock"),
      writeHealth: (content) =>
        Promise.resolve(sim.writeHostFile(simNode, HEALTH_FILE, JSON.stringify(content))),
    }),
  };
  await sides.real.writeHealth({});
  await sides.sim.writeHealth({});
  operator = await startOperator([], {}, { pluginImage: dpoImage() });
  await kubectl(["apply", "--server-side", "-f", "-"], {
    input: JSON.stringify({
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: NAME },
      spec: {
        resourceName: RESOURCE,
        backend: {
          type: "Mock",
          mock: { devices: DEVICES, idPrefix: "p", numaNodes: 2, healthFile: HEALTH_FILE },
        },
        topology: { allocationPolicy: "Packed" },
        nodeSelector: { "feature.example/foo": "true" },
        tolerations: ON_REAL_NODE.tolerations,
      },
    }),
  });
}, 300_000);

afterAll(async () => {
  await kubectl(["delete", "pod", "-n", "default", "-l", `dpo.dev/test=${NAME}`, "--wait=true"], {
    allowFailure: true,
  });
  await removeConfig(NAME);
  sides?.real.watch.stop();
  sides?.sim.watch.stop();
  await operator?.stop();
  await sim?.stop();
  await rm(dirname(HEALTH_FILE), { recursive: true, force: true });
}, 120_000);

describe("the simulator agrees with the real kubelet", () => {
  it("advertises the plugin's devices once it registered, by the same steps", async () => {
    const want = { capacity: DEVICES, allocatable: DEVICES };
    const real = await settledAdvertised(sides.real, want);
    console.log(`the real node's capacity/allocatable, as a Node watch showed them: ${real.join(" -> ")}`);
    // From nothing to all devices: the watch saw the node before the config existed.
    expect(real[0]).toBe("0/0");
    expect(await settledAdvertised(sides.sim, want)).toEqual(real);
  });

  it("answers registrations it refuses with the same verdicts and messages", async () => {
    const requests: RegisterRequest[] = [
      { version: "v1alpha1", endpoint: "parity.sock", resourceName: RESOURCE },
      { version: "v1beta1", endpoint: "parity.sock", resourceName: "no-domain" },
      { version: "v1beta1", endpoint: "parity.sock", resourceName: "kubernetes.io/parity" },
      { version: "v1beta1", endpoint: "parity.sock", resourceName: "requests.example/parity" },
    ];
    for (const request of requests) {
      const real = await registrationVerdict(sides.real, request);
      expect(await registrationVerdict(sides.sim, request), JSON.stringify(request)).toEqual(real);
    }
  });

  it("admits a pod through Allocate, lists its devices in PodResources alike, and rejects one asking for more than is free alike", async () => {
    for (const side of [sides.real, sides.sim])
      await core.createNamespacedPod({
        namespace: "default",
        body: pod(`two-${side === sides.real ? "r" : "s"}`, side.node, 2),
      });
    const real = await settledPod(sides.real, "two-r");
    expect(real.phase).toBe("Running");
    expect(await settledPod(sides.sim, "two-s")).toEqual(real);
    expect(await podResourcesOf(sides.sim, "two-s")).toEqual(await podResourcesOf(sides.real, "two-r"));

    for (const side of [sides.real, sides.sim])
      await core.createNamespacedPod({
        namespace: "default",
        body: pod(`three-${side === sides.real ? "r" : "s"}`, side.node, 3),
      });
    const tooMany = await settledPod(sides.real, "three-r");
    expect(tooMany.phase).toBe("Failed");
    expect(await settledPod(sides.sim, "three-s")).toEqual(tooMany);
  });

  it("takes an unhealthy device out of allocatable and names it in the holding pod's status alike", async () => {
    const held = ((await podResourcesOf(sides.real, "two-r")) as { devices: { ids: string[] }[] }[])[0]!
      .devices[0]!.ids[0]!;
    for (const side of [sides.real, sides.sim])
      await side.writeHealth({ [held.split("::")[0]!]: { health: "Unhealthy", reason: "Parity" } });
    const want = { capacity: DEVICES, allocatable: DEVICES - 1 };
    const real = await settledAdvertised(sides.real, want);
    console.log(`the real node's capacity/allocatable, as a Node watch showed them: ${real.join(" -> ")}`);
    expect(await settledAdvertised(sides.sim, want)).toEqual(real);
    const healthOf = async (name: string): Promise<unknown> =>
      waitFor(
        `${name}'s allocatedResourcesStatus to name an unhealthy device`,
        async (observe) => {
          const p = await core.readNamespacedPod({ namespace: "default", name });
          // The kubelet lists resources and devices in map order: compare them sorted.
          const statuses = p.status?.containerStatuses?.[0]?.allocatedResourcesStatus
            ?.map((s) => ({
              ...s,
              resources: [...(s.resources ?? [])].sort((a, b) => (a.resourceID < b.resourceID ? -1 : 1)),
            }))
            .sort((a, b) => (a.name < b.name ? -1 : 1));
          observe(statuses);
          return statuses?.some((s) => s.resources.some((r) => r.health === "Unhealthy"))
            ? statuses
            : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 500 },
      );
    expect(await healthOf("two-s")).toEqual(await healthOf("two-r"));
  });
});
