// On the real kubelet of the oldest supported release (1.35.4, one device-plugin endpoint per resource), two
// overlapping instances of a plugin: when the older one exits, the kubelet ends the newer one's ListAndWatch
// while its socket stays (kubernetes #121994). The newer plugin must register again, and the resource must
// come back, instead of staying at 0 until some other instance registers. Two `dpo plugin` processes run on
// the host against the kubelet's own device-plugin directory, as the image runs them.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { DEVICE_PLUGINS_DIR } from "../../src/contract/kubelet-paths.js";
import { uniqueName, waitFor } from "../cluster/helpers.js";
import { repo } from "../e2e/support.js";
import { imageNodeFlags } from "../../tools/kubelet-sim/plugin-pod.js";
import { core, KubeletAllocatablePoller, realNode, restartRealKubelet, waitForKubelet } from "./support.js";

const RESOURCE = `rereg.example/${uniqueName("dev")}`;
const DEVICES = 4;
let work: string;
let pinnedKubelet: string;
const plugins: ChildProcess[] = [];

/** A `dpo plugin` on the host, registering with the real kubelet; resolves once it logged its start. */
function startPlugin(name: string): { child: ChildProcess; output: string[] } {
  const config = join(work, "config.yaml");
  const output: string[] = [];
  const child = spawn(
    process.execPath,
    [
      ...imageNodeFlags(readFileSync(join(repo, "Dockerfile"), "utf8")),
      join(repo, "dist", "dpo.js"),
      "plugin",
      "--config",
      config,
      "--device-plugin-dir",
      DEVICE_PLUGINS_DIR,
      "--metrics-addr",
      "0",
      "--health-addr",
      "0",
      "--pod-resources-interval",
      "0",
    ],
    {
      env: { PATH: process.env.PATH, NODE_NAME: realNode(), DPO_LOG_LEVEL: "info" },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  child.stdout.setEncoding("utf8").on("data", (d: string) => output.push(`${name}: ${d}`));
  child.stderr.setEncoding("utf8").on("data", (d: string) => output.push(`${name}: ${d}`));
  plugins.push(child);
  return { child, output };
}

async function healthyInKubelet(): Promise<number> {
  const poller = new KubeletAllocatablePoller(RESOURCE);
  poller.start();
  await waitFor("one answer of the kubelet's PodResources API", () => poller.samples > 0, {
    timeoutMs: 10_000,
    intervalMs: 20,
  });
  return (await poller.stop()).min;
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "dpo-rereg-"));
  writeFileSync(
    join(work, "config.yaml"),
    [
      "apiVersion: dpo.dev/v1beta1",
      "kind: DevicePluginConfig",
      "metadata: { name: rereg }",
      "spec:",
      `  resourceName: ${RESOURCE}`,
      `  backend: { type: Mock, mock: { devices: ${DEVICES}, idPrefix: r } }`,
    ].join("\n"),
  );
  pinnedKubelet = (await core().readNode({ name: realNode() })).status!.nodeInfo!.kubeletVersion;
  await restartRealKubelet(inject("oldestKubeletBinary"));
  await waitForKubelet(inject("oldestKubeletVersion"));
}, 300_000);

afterAll(async () => {
  for (const child of plugins) child.kill("SIGKILL");
  rmSync(work, { recursive: true, force: true });
  await restartRealKubelet(`${inject("clusterBinDir")}/kubelet`);
  await waitForKubelet(pinnedKubelet);
}, 300_000);

describe(`two plugin instances overlapping on the real oldest kubelet`, () => {
  it("the newer one registers again when the kubelet ends its stream as the older one exits", async () => {
    const older = startPlugin("older");
    await waitFor(
      "the older plugin's devices in the kubelet",
      async (observe) => {
        const healthy = await healthyInKubelet();
        observe({ healthy, log: older.output.join("").slice(-800) });
        return healthy === DEVICES;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    const newer = startPlugin("newer");
    // The newer one registered: a 1.35 kubelet keeps one endpoint per resource, now the newer's.
    await waitFor(
      "the newer plugin to register",
      (observe) => {
        const log = newer.output.join("");
        observe(log.slice(-800));
        return /registered/i.test(log);
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    // The kubelet's own count, polled every 20 ms from before the older one stops.
    const poller = new KubeletAllocatablePoller(RESOURCE);
    poller.start();
    let dropped: number;
    let back: number;
    try {
      await waitFor("the poller to see all devices", () => poller.firstAnswer(DEVICES, 0), {
        timeoutMs: 10_000,
        intervalMs: 20,
      });
      const exited = new Promise((resolve) => older.child.once("exit", resolve));
      // The kubelet may see the older one's socket go before its process has exited.
      const stopped = Date.now();
      older.child.kill("SIGTERM");
      await exited;
      // The kubelet ends the newer plugin's stream too (the resource drops to 0); it must come back through
      // the newer plugin's new registration.
      dropped = await waitFor(
        "the kubelet to drop the resource to 0 as the older plugin exits",
        (observe) => {
          observe({ changes: poller.changes.slice(-4), log: newer.output.join("").slice(-800) });
          return poller.firstAnswer(0, stopped);
        },
        { timeoutMs: 30_000, intervalMs: 20 },
      );
      back = await waitFor(
        "the newer plugin's devices healthy in the kubelet again",
        (observe) => {
          observe({ changes: poller.changes.slice(-4), log: newer.output.join("").slice(-1200) });
          return poller.firstAnswer(DEVICES, dropped);
        },
        { timeoutMs: 60_000, intervalMs: 20 },
      );
      console.log(
        `older plugin stopped -> kubelet at 0 after ${dropped - stopped} ms -> resource back ${back - dropped} ms later`,
      );
    } finally {
      await poller.stop();
    }
    // docs/plugin-upgrades.md: the plugin registers again by itself within a second.
    expect(back - dropped).toBeLessThanOrEqual(1_000);
    expect(newer.child.exitCode).toBeNull();
    // The kubelet did end the newer plugin's stream, and it was the plugin's new registration that brought the
    // resource back (not a stream the kubelet kept).
    expect(newer.output.join(""), newer.output.join("")).toContain("registering again on a fresh socket");
  });
});
