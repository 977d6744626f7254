// The real node: the plugin DaemonSet the operator renders runs as a real container (the image `make image`
// builds) under the real kubelet and containerd; the kubelet admits the seeds' example pod through the
// plugin's Allocate and containerd applies its CDI device; a device that fails shows on the Node, in the
// config's status and in the pod's status; a kubelet restart leaves running pods their devices and admits new
// ones once the plugin has registered again.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import * as grpc from "@grpc/grpc-js";
import { AppsV1Api, CustomObjectsApi, type V1Pod } from "@kubernetes/client-node";
import { parse } from "yaml";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { POD_RESOURCES_DIR, POD_RESOURCES_SOCKET_NAME } from "../../src/contract/kubelet-paths.js";
import { LABEL_CONFIG } from "../../src/contract/names.js";
import {
  PodResourcesListerClient,
  type ListPodResourcesResponse,
} from "../../src/plugin-runtime/proto/index.js";
import { kubeConfigFromInjected, kubectl, waitFor } from "../cluster/helpers.js";
import { kubectlTable } from "../cluster/kubectl-table.js";
import { deviceTable } from "../metrics/exposition.js";
import { configStatusWhere } from "../e2e/upgrade-support.js";
import { installDpo, NAMESPACE, repo, startOperator, type OperatorProcess } from "../e2e/support.js";
import {
  advertised,
  core,
  ctr,
  dpoImage,
  KubeletAllocatablePoller,
  ON_REAL_NODE,
  pluginMetrics,
  realNode,
  removeConfig,
  restartRealKubeletTimed,
  waitForAdvertised,
  waitForPodPhase,
  workloadImage,
  type KubeletBack,
} from "./support.js";

const RESOURCE = "hardware-vendor.example/foo";
const run = promisify(execFile);
/** A host path of this test's own, removed afterwards (the sample's /run/dpo is left alone). */
const HEALTH_FILE = "/run/dpo-node-test/health.json";

const custom = kubeConfigFromInjected().makeApiClient(CustomObjectsApi);
const apps = kubeConfigFromInjected().makeApiClient(AppsV1Api);
let operator: OperatorProcess;
let configName: string;

/** config/samples/mock-basic.yaml, placed on the real node, with CDI on and this test's health file. */
function sampleConfig(): Record<string, unknown> & { metadata: { name: string } } {
  const sample = parse(readFileSync(join(repo, "config/samples/mock-basic.yaml"), "utf8")) as {
    metadata: { name: string };
    spec: Record<string, unknown> & { backend: { mock: Record<string, unknown> } };
  };
  sample.spec.backend.mock.healthFile = HEALTH_FILE;
  return {
    ...sample,
    spec: { ...sample.spec, ...ON_REAL_NODE, cdi: { enabled: true } },
  };
}

/** config/samples/workloads/example-pod.yaml, placed on the real node. */
function samplePod(name: string): V1Pod {
  const pod = parse(readFileSync(join(repo, "config/samples/workloads/example-pod.yaml"), "utf8")) as V1Pod;
  return { ...pod, metadata: { ...pod.metadata, name }, spec: { ...pod.spec!, ...ON_REAL_NODE } };
}

function configStatus(
  description: string,
  check: (s: DevicePluginConfigStatus) => boolean,
): Promise<DevicePluginConfigStatus> {
  return configStatusWhere(custom, configName, description, check);
}

async function writeHealth(content: Record<string, unknown>): Promise<void> {
  await mkdir(dirname(HEALTH_FILE), { recursive: true });
  await writeFile(`${HEALTH_FILE}.tmp`, JSON.stringify(content));
  await rm(HEALTH_FILE, { force: true });
  await writeFile(HEALTH_FILE, JSON.stringify(content));
}

/** The env of a running container, read with kubectl exec through the kubelet. */
async function containerEnv(pod: string, namespace = "default"): Promise<Record<string, string>> {
  const { stdout } = await kubectl(["exec", "-n", namespace, pod, "--", "env"]);
  return Object.fromEntries(
    stdout
      .trim()
      .split("\n")
      .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
  );
}

/** This config's plugin pod on the real node, Running and ready. */
async function pluginPod(): Promise<V1Pod> {
  return waitFor(
    `a Running plugin pod of ${configName} on ${realNode()}`,
    async (observe) => {
      // This config's pod: another file's plugin pods may still be on their way out.
      const pods = await core().listNamespacedPod({
        namespace: NAMESPACE,
        fieldSelector: `spec.nodeName=${realNode()}`,
        labelSelector: `${LABEL_CONFIG}=${configName}`,
      });
      observe(
        pods.items.map((p) => ({
          name: p.metadata?.name,
          phase: p.status?.phase,
          c: p.status?.containerStatuses,
        })),
      );
      return pods.items.find((p) => p.status?.phase === "Running" && p.status.containerStatuses?.[0]?.ready);
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
}

/** The plugin container's env as the DaemonSet the operator rendered says, its field references read from `pod`. */
async function renderedPluginEnv(pod: V1Pod): Promise<Record<string, string>> {
  const owner = pod.metadata?.ownerReferences?.find((o) => o.kind === "DaemonSet");
  if (!owner) throw new Error(`${pod.metadata?.name} has no DaemonSet owner`);
  const ds = await apps.readNamespacedDaemonSet({ namespace: NAMESPACE, name: owner.name });
  const env = ds.spec!.template.spec!.containers[0]!.env ?? [];
  const field = (path: string): string => {
    const value = path.split(".").reduce<unknown>((o, k) => (o as Record<string, unknown>)?.[k], pod);
    if (typeof value !== "string")
      throw new Error(`the rendered env refers to ${path}, not a string on the pod`);
    return value;
  };
  return Object.fromEntries(
    env.map((e) => {
      if (e.value !== undefined) return [e.name, e.value];
      if (e.valueFrom?.fieldRef) return [e.name, field(e.valueFrom.fieldRef.fieldPath)];
      throw new Error(`the rendered env ${e.name} is neither a value nor a field reference`);
    }),
  );
}

/** A pod's devices of RESOURCE as the real kubelet records them (its PodResources API), sorted. */
async function kubeletDevices(pod: string): Promise<string[]> {
  const client = new PodResourcesListerClient(
    `unix://${POD_RESOURCES_DIR}/${POD_RESOURCES_SOCKET_NAME}`,
    grpc.credentials.createInsecure(),
  );
  try {
    const answer = await new Promise<ListPodResourcesResponse>((resolve, reject) =>
      client.list({}, (err, res) => (err ? reject(err) : resolve(res))),
    );
    return (answer.podResources.find((p) => p.name === pod && p.namespace === "default")?.containers ?? [])
      .flatMap((c) => c.devices)
      .filter((d) => d.resourceName === RESOURCE)
      .flatMap((d) => d.deviceIds)
      .sort();
  } finally {
    client.close();
  }
}

/** The env of the running plugin container, read by its own node (the image has no `env`). */
async function pluginEnv(pod: string): Promise<Record<string, string>> {
  const { stdout } = await kubectl([
    "exec",
    "-n",
    NAMESPACE,
    pod,
    "--",
    "node",
    "-e",
    "process.stdout.write(JSON.stringify(process.env))",
  ]);
  return JSON.parse(stdout) as Record<string, string>;
}

async function createPod(pod: V1Pod): Promise<void> {
  await core().createNamespacedPod({ namespace: pod.metadata?.namespace ?? "default", body: pod });
}

beforeAll(async () => {
  await writeHealth({});
  // The sample pod names busybox:1.36; the node has the project's busybox image under that name too.
  await ctr(["images", "tag", "--force", workloadImage(), "docker.io/library/busybox:1.36"]);
  await installDpo();
  operator = await startOperator([], {}, { pluginImage: dpoImage() });
  const config = sampleConfig();
  configName = config.metadata.name;
  await kubectl(["apply", "--server-side", "-f", "-"], { input: JSON.stringify(config) });
}, 300_000);

afterAll(async () => {
  await kubectl(["delete", "pod", "--all", "-n", "default", "--wait=false"], { allowFailure: true });
  await removeConfig(configName);
  await operator?.stop();
  await rm(dirname(HEALTH_FILE), { recursive: true, force: true });
});

describe("dpo on a real kubelet and containerd", () => {
  it("runs the plugin DaemonSet's pod as a real container that registers, and the real kubelet advertises its devices", async () => {
    const pod = await pluginPod();
    // The container runs the image's entrypoint under the rendered securityContext, as containerd started it.
    const container = pod.spec!.containers[0]!;
    expect(container.image).toBe(dpoImage());
    const { stdout: uid } = await kubectl([
      "exec",
      "-n",
      NAMESPACE,
      pod.metadata!.name!,
      "--",
      "node",
      "-e",
      "console.log(process.getuid())",
    ]);
    expect(Number(uid.trim())).toBe(container.securityContext?.runAsUser ?? 0);

    const node = await waitForAdvertised(RESOURCE, { capacity: 4, allocatable: 4 });
    expect(advertised(node, RESOURCE)).toEqual({ capacity: 4, allocatable: 4 });
    // The kubelet binary the node runs, and what it reports on the Node: the pinned release.
    const { stdout: kubeletVersion } = await run(join(inject("clusterBinDir"), "kubelet"), ["--version"]);
    expect(kubeletVersion.trim()).toBe(`Kubernetes ${inject("clusterKubernetesVersion")}`);
    expect(node.status?.nodeInfo?.kubeletVersion).toBe(inject("clusterKubernetesVersion"));
    await configStatus(
      "4/4 devices on 1/1 nodes",
      (s) => s.devices?.summary === "4/4" && s.nodes?.ready === 1,
    );
    const table = kubectlTable((await kubectl(["get", "dpc", configName])).stdout);
    expect(table[0]).toMatchObject({ NAME: configName, DEVICES: "4/4" });
  });

  it("admits the seeds' example pod through Allocate, with the plugin's env and the CDI device applied by containerd", async () => {
    await createPod(samplePod("example-workload"));
    await waitForPodPhase("default", "example-workload", "Running");
    const env = await containerEnv("example-workload");
    const ids = env.DPO_HARDWARE_VENDOR_EXAMPLE_FOO?.split(",") ?? [];
    expect(ids, JSON.stringify(env)).toHaveLength(2);
    expect(env.MOCK_DEVICE_IDS?.split(",").sort()).toEqual([...ids].sort());
    // Only a CDI-aware runtime sets this: the plugin answered Allocate with CDI names, containerd read the spec.
    for (const id of ids) expect(env[`MOCK_DEVICE_${id.toUpperCase().replace(/[^A-Z0-9]/g, "_")}`]).toBe(id);
    // The plugin names the pod holding each device in its metrics, from the real kubelet's PodResources API.
    await waitFor(
      "the plugin's per-device series to name example-workload",
      async (observe) => {
        const table = deviceTable(await pluginMetrics(configName), "dpo_plugin_device_allocated");
        observe(table);
        const held = Object.entries(table).filter(([, v]) => v === "default/example-workload/app=1");
        return (
          held
            .map(([id]) => id)
            .sort()
            .join(",") === [...ids].sort().join(",")
        );
      },
      { timeoutMs: 60_000, intervalMs: 1_000 },
    );
    await waitForAdvertised(RESOURCE, { capacity: 4, allocatable: 4 });
  });

  it("shows a device that fails on the Node, in the config's status and in the status of the pod that holds it", async () => {
    const env = await containerEnv("example-workload");
    const held = env.DPO_HARDWARE_VENDOR_EXAMPLE_FOO!.split(",")[0]!;
    await writeHealth({ [held]: { health: "Unhealthy", reason: "Overheated" } });

    await waitForAdvertised(RESOURCE, { capacity: 4, allocatable: 3 });
    const status = await configStatus(`${held} named unhealthy`, (s) =>
      (s.problems ?? []).some((p) => p.node === realNode() && (p.devices ?? []).includes(held)),
    );
    expect(status.devices?.unhealthy).toBe(1);
    // KEP-4680: the kubelet reports the health of a container's devices in its status (1.37: on by default).
    const pod = await waitFor(
      `example-workload's status to show ${held} unhealthy`,
      async (observe) => {
        const p = await core().readNamespacedPod({ namespace: "default", name: "example-workload" });
        const statuses = p.status?.containerStatuses?.[0]?.allocatedResourcesStatus;
        observe(statuses);
        const mine = statuses?.find((s) => s.name === `${RESOURCE}`);
        return mine?.resources?.some((r) => r.resourceID === held && r.health === "Unhealthy")
          ? p
          : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    expect(pod.status?.phase).toBe("Running");

    await writeHealth({});
    await waitForAdvertised(RESOURCE, { capacity: 4, allocatable: 4 });
    await configStatus("healthy again", (s) => s.devices?.unhealthy === 0);
  });

  it("re-registers within 1 s of a kubelet restart: the running pods keep their devices, and a new pod is admitted", async () => {
    const plugin = await pluginPod();
    const held = await kubeletDevices("example-workload");
    expect(held, "example-workload's devices in the kubelet before the restart").toHaveLength(2);
    const poller = new KubeletAllocatablePoller(RESOURCE);
    poller.start();
    let back: KubeletBack;
    try {
      back = await restartRealKubeletTimed();
      await waitFor(
        "the restarted kubelet to count all 4 devices healthy",
        () => poller.firstAnswer(4, back.startedAt),
        { timeoutMs: 60_000, intervalMs: 20 },
      );
    } finally {
      await poller.stop();
    }
    // Created once the plugin is registered with the new kubelet: one the kubelet admits before that is
    // rejected for good ("no healthy devices present", kubernetes#125579), as after a reboot
    // (test/node/reboot.test.ts, docs/troubleshooting.md); how soon the plugin is back is asserted below.
    await createPod(samplePod("example-workload-after-restart"));
    const registeredAt = poller.firstAnswer(4, back.startedAt)!;
    await waitForPodPhase("default", "example-workload-after-restart", "Running", 120_000);
    const runningAt = Date.now();
    console.log(
      `kubelet restart: /healthz ok ${back.healthyAt - back.startedAt} ms and kubelet.sock back ` +
        `${back.socketAt - back.startedAt} ms after the new process started; plugin registered and its 4 devices ` +
        `healthy in the kubelet ${registeredAt - back.socketAt} ms after kubelet.sock was back ` +
        `(${registeredAt - back.healthyAt} ms after /healthz); new pod Running ${runningAt - back.healthyAt} ms after /healthz`,
    );
    // docs/benchmarks.md (make chaos-kubelet): kubelet.sock back -> registered and advertised within 1 s.
    expect(registeredAt - back.socketAt).toBeLessThanOrEqual(1_000);

    // The running workload keeps its devices: the new kubelet's own record (its checkpoint) names the ones the
    // pod was given, and its container did not restart.
    expect(await kubeletDevices("example-workload")).toEqual(held);
    const first = await core().readNamespacedPod({ namespace: "default", name: "example-workload" });
    expect(first.status?.containerStatuses?.[0]?.restartCount).toBe(0);
    const env = await containerEnv("example-workload");
    expect(env.DPO_HARDWARE_VENDOR_EXAMPLE_FOO?.split(",").sort()).toEqual(held);
    // The new pod got the two devices the first one does not hold, as the kubelet records them.
    const secondHeld = await kubeletDevices("example-workload-after-restart");
    expect([...held, ...secondHeld].sort()).toEqual(["foo-0", "foo-1", "foo-2", "foo-3"]);
    const secondEnv = await containerEnv("example-workload-after-restart");
    expect(secondEnv.DPO_HARDWARE_VENDOR_EXAMPLE_FOO?.split(",").sort()).toEqual(secondHeld);

    // The plugin pod kept running through the restart, and its container's env is the one the operator rendered
    // into the DaemonSet (the fields it names resolved for this pod).
    const pluginAfter = await pluginPod();
    expect(pluginAfter.metadata?.uid).toBe(plugin.metadata?.uid);
    expect(pluginAfter.status?.containerStatuses?.[0]?.restartCount).toBe(0);
    const rendered = await renderedPluginEnv(pluginAfter);
    const running = await pluginEnv(pluginAfter.metadata!.name!);
    expect(Object.keys(rendered).length).toBeGreaterThan(3);
    expect(Object.fromEntries(Object.keys(rendered).map((k) => [k, running[k]]))).toEqual(rendered);
    await waitForAdvertised(RESOURCE, { capacity: 4, allocatable: 4 });
  });
});
