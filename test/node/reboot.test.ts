// A node reboot on the real node (issue 32, item 2), in both publish modes: pods holding devices (two of a
// Deployment and one naked pod, all asking `resources.limits: {<resourceName>: 1}`) run on the node; then
// the kubelet and containerd stop, every container and shim goes, their run-time state is removed
// (tools/real-node/reboot.ts), and both start again. The kubelet admits the pods bound to it again.
// - publish: DRA with the extended-resource mapping: the device manager leaves the pods' resource to DRA
//   (they carry status.extendedResourceClaimStatus) and DRA prepares their claims while syncing them,
//   retrying until the driver registers: not one admission fails and every pod, the naked one too, runs
//   again under its uid with its device.
// - publish: DevicePlugin: a pod the kubelet admits before the plugin has registered fails for good with
//   UnexpectedAdmissionError (devicemanager devicesToAllocate); the Deployment replaces its pods, a naked
//   pod stays failed. The operator reports what the kubelet rejected: the config's status names the node
//   (problem AdmissionRejected, with the pods), an Event names the pods and dpo_admission_rejected_pods
//   counts them.
// The figures (failed admissions, seconds until the pods run again, start to registered) go to
// docs/benchmarks.md.
import type { V1Pod } from "@kubernetes/client-node";
import { AppsV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { rebootRealNode, type RebootTimes } from "../../tools/real-node/reboot.js";
import { injectedCluster, kubeConfigFromInjected, kubectl, uniqueName, waitFor } from "../cluster/helpers.js";
import { configStatusWhere } from "../e2e/upgrade-support.js";
import { installDpo, startOperator, type OperatorProcess } from "../e2e/support.js";
import { PodWatch } from "./pod-watch.js";
import {
  core,
  dpoImage,
  KubeletAllocatablePoller,
  ON_REAL_NODE,
  removeConfig,
  waitForAdvertised,
  workloadImage,
} from "./support.js";

const DEVICES = 4;
const NS = "default";
const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const apps = kc.makeApiClient(AppsV1Api);
let operator: OperatorProcess | undefined;

beforeAll(async () => {
  await installDpo();
  operator = await startOperator(["--status-write-interval", "250"], {}, { pluginImage: dpoImage() });
}, 300_000);

afterAll(async () => {
  await operator?.stop();
}, 60_000);

interface Scenario {
  name: string;
  resource: string;
  publish: "DevicePlugin" | "DRA";
}

function scenario(publish: Scenario["publish"]): Scenario {
  const name = uniqueName(publish === "DRA" ? "node-reboot-dra" : "node-reboot-dp");
  return { name, resource: `${name}.example/dev`, publish };
}

function podSpec(s: Scenario): V1Pod["spec"] {
  return {
    ...ON_REAL_NODE,
    terminationGracePeriodSeconds: 0,
    containers: [
      {
        name: "main",
        image: workloadImage(),
        command: ["sleep", "3600"],
        resources: { limits: { [s.resource]: "1" } },
      },
    ],
  };
}

async function create(s: Scenario): Promise<void> {
  await kubectl(["apply", "--server-side", "-f", "-"], {
    input: JSON.stringify({
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: s.name },
      spec: {
        resourceName: s.resource,
        publish: s.publish,
        dra: { driverName: `drv.${s.name}.example` },
        cdi: { enabled: true },
        backend: { type: "Mock", mock: { devices: DEVICES, idPrefix: "r" } },
        ...ON_REAL_NODE,
      },
    }),
  });
  await configStatusWhere(
    custom,
    s.name,
    "Ready, with the extended resource mapping possible",
    (st) =>
      st.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true &&
      st.conditions.some((c) => c.type === "ExtendedResourceMapping" && c.status === "True"),
  );
  if (s.publish === "DevicePlugin")
    await waitForAdvertised(s.resource, { capacity: DEVICES, allocatable: DEVICES });
  await apps.createNamespacedDeployment({
    namespace: NS,
    body: {
      metadata: { name: s.name, labels: { app: s.name } },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: s.name } },
        template: { metadata: { labels: { app: s.name } }, spec: podSpec(s) },
      },
    },
  });
  await core().createNamespacedPod({
    namespace: NS,
    body: { metadata: { name: `${s.name}-naked`, labels: { app: s.name } }, spec: podSpec(s) },
  });
}

async function remove(s: Scenario): Promise<void> {
  await kubectl(["delete", "deployment", s.name, "-n", NS, "--ignore-not-found", "--wait=true"], {
    allowFailure: true,
  });
  await kubectl(["delete", "pod", "-n", NS, "-l", `app=${s.name}`, "--wait=true"], { allowFailure: true });
  await removeConfig(s.name);
}

async function pods(s: Scenario): Promise<V1Pod[]> {
  return (await core().listNamespacedPod({ namespace: NS, labelSelector: `app=${s.name}` })).items;
}

const runningReady = (p: V1Pod): boolean =>
  p.status?.phase === "Running" && p.status.containerStatuses?.every((c) => c.ready) === true;

/** The device the CDI edit gave the pod's container (MOCK_DEVICE_R_<n>=<id>); undefined if none. */
async function deviceOf(pod: string): Promise<string | undefined> {
  const { stdout } = await kubectl(["exec", "-n", NS, pod, "--", "env"]);
  return /^MOCK_DEVICE_R_\d+=(.+)$/m.exec(stdout)?.[1];
}

/** Waits until 3 pods (2 of the Deployment, the naked one unless it failed) run, ready; returns them. */
async function running(s: Scenario, since: number, timeoutMs = 240_000): Promise<V1Pod[]> {
  return waitFor(
    `the pods of ${s.name} to run again`,
    async (observe) => {
      const all = await pods(s);
      observe(
        all.map((p) => ({
          name: p.metadata?.name,
          phase: p.status?.phase,
          reason: p.status?.reason,
          state: p.status?.containerStatuses?.[0]?.state,
        })),
      );
      const live = all.filter((p) => p.status?.phase !== "Failed" && !p.metadata?.deletionTimestamp);
      const started = live.filter(
        (p) =>
          runningReady(p) &&
          p.status!.containerStatuses!.every(
            (c) => Date.parse(String(c.state?.running?.startedAt ?? 0)) >= since - 1_000,
          ),
      );
      return live.length === started.length && started.length >= 2 ? started : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

interface Measured {
  times: RebootTimes;
  failed: string[];
  registeredMs: number | undefined;
  runningMs: number;
  before: V1Pod[];
  after: V1Pod[];
}

async function rebootWith(s: Scenario): Promise<Measured> {
  await create(s);
  const before = await running(s, 0);
  expect(before).toHaveLength(3);
  const devicesBefore = new Map<string, string | undefined>();
  for (const p of before) devicesBefore.set(p.metadata!.uid!, await deviceOf(p.metadata!.name!));
  for (const [uid, device] of devicesBefore) expect(device, uid).toBeDefined();
  const watch = new PodWatch(kc, NS, s.name);
  await watch.start();
  const poller = new KubeletAllocatablePoller(s.resource);
  poller.start();
  try {
    const times = await rebootRealNode(injectedCluster().stateDir);
    const after = await running(s, times.downAt);
    const runningAt = Date.now();
    await watch.sweep();
    // The device plugin's registration, as the kubelet's PodResources API first lists its devices.
    const registeredAt =
      s.publish === "DevicePlugin" ? poller.firstAnswer(DEVICES, times.kubeletAt) : undefined;
    const measured: Measured = {
      times,
      // One pod per name: the watch sees a rejection on the pod and in its Event.
      failed: [
        ...new Set([...watch.admissionFailures].map((f) => f.replace(/^Pod /, "").split(":")[0]!)),
      ].sort(),
      registeredMs: registeredAt === undefined ? undefined : registeredAt - times.kubeletAt,
      runningMs: runningAt - times.downAt,
      before,
      after,
    };
    for (const p of after) {
      const device = await deviceOf(p.metadata!.name!);
      expect(device, p.metadata?.name).toBeDefined();
      // A pod that ran before the reboot holds the same device after it.
      if (devicesBefore.has(p.metadata!.uid!)) expect(device).toBe(devicesBefore.get(p.metadata!.uid!));
    }
    console.log(
      `reboot, publish ${s.publish}: down in ${times.downAt - times.stoppingAt} ms, containerd back ${times.containerdAt - times.downAt} ms, kubelet started ${times.kubeletAt - times.downAt} ms after; plugin registered (PodResources allocatable) ${measured.registeredMs ?? "n/a"} ms after the kubelet started; every pod running with its device ${(measured.runningMs / 1000).toFixed(1)} s after the node came back; ${measured.failed.length} failed admissions: ${JSON.stringify(measured.failed)}; running now: ${JSON.stringify(after.map((p) => p.metadata?.name))}`,
    );
    return measured;
  } finally {
    watch.stop();
    await poller.stop();
  }
}

describe("a node reboot on the real node", () => {
  it("publish DRA with the extended-resource mapping: 0 failed admissions, every pod runs again with its device under its uid", async () => {
    const s = scenario("DRA");
    try {
      const m = await rebootWith(s);
      expect(m.failed).toEqual([]);
      const uids = (list: V1Pod[]): string[] => list.map((p) => p.metadata!.uid!).sort();
      expect(uids(m.after)).toEqual(uids(m.before));
      for (const p of m.after) expect(p.status?.extendedResourceClaimStatus, p.metadata?.name).toBeDefined();
    } finally {
      await remove(s);
    }
  }, 900_000);

  it("publish DevicePlugin: the pods the kubelet rejects before the plugin registers are reported in the status, an Event and a metric", async () => {
    const s = scenario("DevicePlugin");
    try {
      const m = await rebootWith(s);
      const rejected = (await pods(s)).filter((p) => p.status?.reason === "UnexpectedAdmissionError");
      console.log(
        `device plugin reboot: rejected ${JSON.stringify(rejected.map((p) => `${p.metadata?.name}: ${p.status?.message}`))}`,
      );
      // Every failure the watch saw is a pod the kubelet rejected with UnexpectedAdmissionError.
      const names = rejected.map((p) => p.metadata!.name!).sort();
      expect(m.failed).toEqual(names);
      if (names.length === 0) return;
      await assertReported(s, names);
    } finally {
      await remove(s);
    }
  }, 900_000);
});

/** The status names the node and the pods, an Event names them, the metric counts them. */
async function assertReported(s: Scenario, names: string[]): Promise<void> {
  const status: DevicePluginConfigStatus = await configStatusWhere(
    custom,
    s.name,
    `problem AdmissionRejected naming ${names.join(", ")}`,
    (st) =>
      st.problems?.some(
        (p) => p.reason === "AdmissionRejected" && names.every((n) => p.message?.includes(n) === true),
      ) === true,
    60_000,
  );
  console.log(`status problems: ${JSON.stringify(status.problems)}`);
  await waitFor(
    "an Event of the config naming the rejected pods",
    async (observe) => {
      const events = await core().listNamespacedEvent({
        namespace: NS,
        fieldSelector: `involvedObject.name=${s.name},reason=AdmissionRejected`,
      });
      observe(events.items.map((e) => e.message));
      return events.items.some((e) => names.every((n) => e.message?.includes(n) === true));
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
  await waitFor(
    "dpo_admission_rejected_pods of the config",
    async (observe) => {
      const text = await (await fetch(`http://127.0.0.1:${operator!.metricsPort}/metrics`)).text();
      const line = text
        .split("\n")
        .find((l) => l.startsWith("dpo_admission_rejected_pods{") && l.includes(`config="${s.name}"`));
      observe(line);
      return line !== undefined && Number(line.split(" ").at(-1)) === names.length;
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
}
