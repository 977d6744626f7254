// No silent capacity loss, on the real kubelet (the pinned 1.37.2: one endpoint per socket). A `dpo plugin`
// on the host serves 4 devices; then another device plugin registers the same resource name and sends an
// empty device list (a leftover or incumbent plugin). The kubelet's device manager replaces the resource's
// devices with each endpoint's last ListAndWatch answer (genericDeviceUpdateCallback), so its allocatable
// drops to 0 while dpo's stream, socket and registration stay as they were: nothing tells dpo. dpo reads the
// kubelet's GetAllocatableResources, and after --capacity-heal-after it registers again on a fresh socket,
// whose ListAndWatch gives the kubelet its 4 devices back.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEVICE_PLUGINS_DIR } from "../../src/contract/kubelet-paths.js";
import { uniqueName, waitFor } from "../cluster/helpers.js";
import { repo } from "../e2e/support.js";
import { ForeignDevicePlugin } from "../../tools/kubelet-sim/foreign-plugin.js";
import { imageNodeFlags } from "../../tools/kubelet-sim/plugin-pod.js";
import { KubeletAllocatablePoller, realNode } from "./support.js";

const RESOURCE = `heal.example/${uniqueName("dev")}`;
const DEVICES = 4;
// Short by default so the tier stays quick; the plugin's defaults (30 s, 10 s) for the figure in
// docs/benchmarks.md: DPO_TEST_HEAL_AFTER_S=30 DPO_TEST_READ_EVERY_S=10.
const HEAL_AFTER_S = Number(process.env["DPO_TEST_HEAL_AFTER_S"] ?? 3);
const READ_EVERY_S = Number(process.env["DPO_TEST_READ_EVERY_S"] ?? 0.5);
let work: string;
let plugin: ChildProcess | undefined;
const output: string[] = [];
const impostor = new ForeignDevicePlugin({
  dir: DEVICE_PLUGINS_DIR,
  socketName: `foreign-${uniqueName("p")}.sock`,
  resourceName: RESOURCE,
});

function startPlugin(): ChildProcess {
  const child = spawn(
    process.execPath,
    [
      ...imageNodeFlags(readFileSync(join(repo, "Dockerfile"), "utf8")),
      join(repo, "dist", "dpo.js"),
      "plugin",
      "--config",
      join(work, "config.yaml"),
      "--device-plugin-dir",
      DEVICE_PLUGINS_DIR,
      "--metrics-addr",
      "0",
      "--health-addr",
      "0",
      "--pod-resources-interval",
      String(READ_EVERY_S),
      "--capacity-heal-after",
      String(HEAL_AFTER_S),
    ],
    {
      env: { PATH: process.env.PATH, NODE_NAME: realNode(), DPO_LOG_LEVEL: "info" },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  child.stdout.setEncoding("utf8").on("data", (d: string) => output.push(d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => output.push(d));
  return child;
}

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "dpo-heal-"));
  writeFileSync(
    join(work, "config.yaml"),
    [
      "apiVersion: dpo.dev/v1beta1",
      "kind: DevicePluginConfig",
      "metadata: { name: heal }",
      "spec:",
      `  resourceName: ${RESOURCE}`,
      `  backend: { type: Mock, mock: { devices: ${DEVICES}, idPrefix: h } }`,
    ].join("\n"),
  );
});

afterAll(async () => {
  plugin?.kill("SIGKILL");
  await impostor.stop();
  rmSync(work, { recursive: true, force: true });
});

describe("the real kubelet drops a registered plugin's devices without telling it", () => {
  it(`the plugin registers again by itself within --capacity-heal-after (${HEAL_AFTER_S} s) and the devices come back`, async () => {
    plugin = startPlugin();
    const poller = new KubeletAllocatablePoller(RESOURCE);
    poller.start();
    let lost: number;
    let back: number;
    try {
      await waitFor(
        "the plugin's devices in the kubelet",
        (observe) => {
          observe({ changes: poller.changes.slice(-4), log: output.join("").slice(-800) });
          return poller.firstAnswer(DEVICES, 0) !== undefined;
        },
        { timeoutMs: 60_000, intervalMs: 50 },
      );
      const started = Date.now();
      await impostor.start();
      lost = await waitFor(
        "the kubelet to list 0 devices once the other plugin answered",
        (observe) => {
          observe({ changes: poller.changes.slice(-4) });
          return poller.firstAnswer(0, started);
        },
        { timeoutMs: 30_000, intervalMs: 20 },
      );
      back = await waitFor(
        "the plugin's devices in the kubelet again",
        (observe) => {
          observe({ changes: poller.changes.slice(-4), log: output.join("").slice(-1500) });
          return poller.firstAnswer(DEVICES, lost);
        },
        // The bound, a read either side, and the registration itself.
        { timeoutMs: (HEAL_AFTER_S + 4 * READ_EVERY_S) * 1000 + 5_000, intervalMs: 20 },
      );
    } finally {
      await poller.stop();
    }
    console.log(
      `kubelet at 0 -> devices back ${back - lost} ms later (--capacity-heal-after ${HEAL_AFTER_S}, --pod-resources-interval ${READ_EVERY_S})`,
    );
    const log = output.join("");
    expect(back - lost).toBeGreaterThanOrEqual(HEAL_AFTER_S * 1000 - 50);
    expect(back - lost).toBeLessThanOrEqual((HEAL_AFTER_S + 2 * READ_EVERY_S) * 1000 + 2_000);
    expect(log, log).toContain("fewer devices than the plugin advertises as healthy; registering again");
    expect(log, log).toContain("registering again on a fresh socket");
    await waitFor(
      "the plugin to log the heal",
      () => output.join("").includes("the kubelet lists every healthy device of the plugin again"),
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    expect(plugin.exitCode).toBeNull();
  });
});
