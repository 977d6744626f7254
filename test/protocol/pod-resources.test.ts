// The runtime reading the kubelet's PodResources API over a real unix socket (the kubelet simulator's
// server): per-device metrics with the pod, namespace and container holding each device, the allocated
// count for the node report, and a kubelet without the API or with a failing one never stopping the plugin.
import * as grpc from "@grpc/grpc-js";
import { rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { reportSourceOf } from "../../src/plugin-runtime/report/writer.js";
import { PodResourcesListerService } from "../../src/plugin-runtime/proto/index.js";
import { SimulatedPodResourcesServer, type PodResourcesPod } from "../../tools/kubelet-sim/pod-resources.js";
import { deviceTable, samplesOf } from "../metrics/exposition.js";
import { makeConfig, RESOURCE, startHarness, tempDir, waitFor, type Harness } from "./support.js";

let harness: Harness | undefined;
let podResources: SimulatedPodResourcesServer | undefined;
const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  await harness?.close();
  harness = undefined;
  await podResources?.stop();
  podResources = undefined;
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** A logger whose JSON lines the test can read. */
function capturedLogger(): { logger: pino.Logger; lines: () => { level: number; msg: string }[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  return {
    logger: pino({ level: "debug" }, stream),
    lines: () =>
      chunks
        .join("")
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l) as { level: number; msg: string }),
  };
}

async function metricsOf(h: Harness): Promise<string> {
  return h.runtime.metrics.render();
}

async function registered(h: Harness): Promise<void> {
  await waitFor(
    "the simulated kubelet to see the plugin's devices",
    (observe) => {
      const r = h.kubelet.resources.get(RESOURCE);
      observe({ connected: r?.connected, updates: r?.updates, refused: h.kubelet.refused });
      return r?.connected === true && r.updates > 0;
    },
    { timeoutMs: 10_000, intervalMs: 10 },
  );
}

/** Waits until the per-device allocated series read `want` (device → "ns/pod/container=value"). */
async function allocatedTable(h: Harness, description: string, want: Record<string, string>): Promise<void> {
  await waitFor(
    description,
    async (observe) => {
      const table = deviceTable(await metricsOf(h), "dpo_plugin_device_allocated");
      observe(table);
      return JSON.stringify(table) === JSON.stringify(want);
    },
    { timeoutMs: 10_000, intervalMs: 20 },
  );
}

/** The kubelet's ids of two physical devices shared by two containers each. */
const DEVICES = ["foo-0::0", "foo-0::1", "foo-1::0", "foo-1::1"];

describe("per-device metrics from the kubelet's PodResources API", () => {
  it("labels each device with the container holding it, follows releases, and counts them for the report", async () => {
    const tmp = tempDir("podres");
    cleanups.push(tmp.cleanup);
    const healthFile = join(tmp.dir, "health.json");
    const socketPath = join(tmp.dir, "pod-resources", "kubelet.sock");
    const pods: PodResourcesPod[] = [];
    harness = await startHarness(
      makeConfig({
        backend: { type: "Mock", mock: { devices: 2, idPrefix: "foo", numaNodes: 2, healthFile } },
        sharing: { strategy: "TimeSlicing", replicas: 2, failRequestsGreaterThanOne: false },
      }),
      { podResources: { socketPath, intervalMs: 50 } },
    );
    podResources = new SimulatedPodResourcesServer({
      socketPath,
      deviceManager: harness.kubelet,
      pods: () => pods,
    });
    await podResources.start();
    await registered(harness);
    const source = reportSourceOf(harness.runtime);

    // Learnt from the kubelet: every device free, and the report counts none.
    await allocatedTable(harness, "every device free", Object.fromEntries(DEVICES.map((id) => [id, "=0"])));
    expect(source.allocatedDevices?.()).toBe(0);

    // Two containers of two pods get devices, as the kubelet's admission would give them.
    pods.push(
      { uid: "uid-a", name: "trainer-0", namespace: "ml", containers: ["main", "logger"] },
      { uid: "uid-b", name: "render", namespace: "web", containers: ["app"] },
    );
    await harness.kubelet.allocate(RESOURCE, 2, { owner: "uid-a", container: "main" });
    const b = await harness.kubelet.allocate(RESOURCE, 1, { owner: "uid-b", container: "app" });
    const held = harness.kubelet.containerDevices("uid-a", "main").get(RESOURCE) ?? [];
    const want: Record<string, string> = Object.fromEntries(DEVICES.map((id) => [id, "=0"]));
    for (const id of held) want[id] = "ml/trainer-0/main=1";
    for (const id of b.deviceIds) want[id] = "web/render/app=1";
    await allocatedTable(harness, "three devices held by ml/trainer-0/main and web/render/app", want);
    await waitFor("the report's count to follow", () => source.allocatedDevices?.() === 3);

    // An unhealthy device names the pod that uses it.
    const sick = b.deviceIds[0]!.split("::")[0]!;
    await writeFile(`${healthFile}.tmp`, JSON.stringify({ [sick]: { health: "Unhealthy", reason: "Xid" } }));
    await rename(`${healthFile}.tmp`, healthFile);
    await waitFor("the unhealthy device's series to name its pod", async (observe) => {
      const unhealthy = samplesOf(await metricsOf(harness!), "dpo_plugin_device_healthy").filter(
        (s) => s.value === 0,
      );
      observe(unhealthy);
      return unhealthy.some((s) => s.labels.device === b.deviceIds[0] && s.labels.pod === "render");
    });

    // The pod goes: its devices are free again, and their pod labels gone.
    harness.kubelet.release("uid-b");
    pods.splice(1, 1);
    for (const id of b.deviceIds) want[id] = "=0";
    await allocatedTable(harness, "web/render's device free again", want);
    const text = await metricsOf(harness);
    expect(samplesOf(text, "dpo_plugin_device_allocated", { pod: "render" })).toEqual([]);
    expect(samplesOf(text, "dpo_plugin_device_healthy", { pod: "render" })).toEqual([]);
    // One series per device, whatever held it before.
    expect(samplesOf(text, "dpo_plugin_device_allocated")).toHaveLength(4);
    expect(samplesOf(text, "dpo_plugin_device_healthy")).toHaveLength(4);
    expect(source.allocatedDevices?.()).toBe(2);
    expect(samplesOf(text, "dpo_plugin_pod_resources_up")[0]?.value).toBe(1);
    expect(podResources.calls.list).toBeGreaterThan(0);
  });

  it("starts without the socket, logs it once, counts the errors, and reads the API once it appears", async () => {
    const tmp = tempDir("podres");
    cleanups.push(tmp.cleanup);
    const socketPath = join(tmp.dir, "pod-resources", "kubelet.sock");
    const log = capturedLogger();
    harness = await startHarness(makeConfig({}), {
      podResources: { socketPath, intervalMs: 20 },
      logger: log.logger,
    });
    await registered(harness);
    expect(harness.runtime.status()).toMatchObject({ serving: true, registered: true });
    await waitFor("three failed reads", async (observe) => {
      const errors = samplesOf(await metricsOf(harness!), "dpo_plugin_pod_resources_errors_total");
      observe(errors);
      return errors.some((s) => s.labels.code === "UNAVAILABLE" && s.value >= 3);
    });
    const text = await metricsOf(harness);
    expect(samplesOf(text, "dpo_plugin_pod_resources_up")[0]?.value).toBe(0);
    // While the kubelet has not answered, "free" would be a guess: no allocated series, health only.
    expect(samplesOf(text, "dpo_plugin_device_allocated")).toEqual([]);
    expect(samplesOf(text, "dpo_plugin_device_healthy")).toHaveLength(4);
    expect(harness.runtime.allocatedDevices()).toBeUndefined();
    const warnings = log
      .lines()
      .filter((l) => l.msg.startsWith("cannot read the kubelet's PodResources API"));
    expect(warnings).toHaveLength(1);

    podResources = new SimulatedPodResourcesServer({
      socketPath,
      deviceManager: harness.kubelet,
      pods: () => [],
    });
    await podResources.start();
    // Backoff doubles from 20 ms up to the cap (at least the interval): the next read comes soon.
    await allocatedTable(harness, "the devices, free, once the API answers", {
      "foo-0": "=0",
      "foo-1": "=0",
      "foo-2": "=0",
      "foo-3": "=0",
    });
    expect(harness.runtime.allocatedDevices()).toBe(0);
    expect(log.lines().some((l) => l.msg === "reading the kubelet's PodResources API again")).toBe(true);
  });

  it("keeps serving when the kubelet's API answers with an error, and counts it by gRPC status", async () => {
    const tmp = tempDir("podres");
    cleanups.push(tmp.cleanup);
    const socketPath = join(tmp.dir, "kubelet.sock");
    // A kubelet whose List fails (as one whose pod-resources server is broken or rate-limits).
    const server = new grpc.Server();
    server.addService(PodResourcesListerService, {
      list: (_call: unknown, callback: grpc.sendUnaryData<never>) =>
        callback({ code: grpc.status.RESOURCE_EXHAUSTED, details: "rate limited" }, null),
      getAllocatableResources: (_call: unknown, callback: grpc.sendUnaryData<never>) =>
        callback({ code: grpc.status.UNIMPLEMENTED }, null),
      get: (_call: unknown, callback: grpc.sendUnaryData<never>) =>
        callback({ code: grpc.status.UNIMPLEMENTED }, null),
    });
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`unix://${socketPath}`, grpc.ServerCredentials.createInsecure(), (e) =>
        e ? reject(e) : resolve(),
      ),
    );
    cleanups.unshift(() => void server.forceShutdown());
    harness = await startHarness(makeConfig({}), { podResources: { socketPath, intervalMs: 20 } });
    await registered(harness);
    await waitFor("errors counted as RESOURCE_EXHAUSTED", async (observe) => {
      const errors = samplesOf(await metricsOf(harness!), "dpo_plugin_pod_resources_errors_total");
      observe(errors);
      return errors.some((s) => s.labels.code === "RESOURCE_EXHAUSTED" && s.value >= 2);
    });
    expect(harness.runtime.status()).toMatchObject({ serving: true, registered: true });
    expect(harness.runtime.allocatedDevices()).toBeUndefined();
  });
});
