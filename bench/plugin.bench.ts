// `make bench-plugin`: the built plugin process with 8 mock devices x 100 replicas, driven by the simulated
// kubelet: start → registered, Allocate latency at 1 and 16 in flight, health change → ListAndWatch, RSS;
// the upstream Go sample device plugin under the same load in the same run, with dpo / Go ratios; bare Node
// with node:http2 as the floor of dpo's idle RSS; and, in this process, the GetPreferredAllocation policies
// on the same 800 devices. Ends with the missed targets, or "every target met", and exits 1 on a miss or a
// failed step (bench/targets.ts).
import { execFileSync } from "node:child_process";
import { lstatSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SimulatedDeviceManager } from "../tools/kubelet-sim/device-manager.js";
import { formatRatio, percentile } from "../tools/stats.js";
import {
  DEVICES,
  dpo,
  dpoUnbundled,
  GO_DEVICES,
  GO_FAKE_DEVICE_DIR,
  GO_RESOURCE,
  NODE_FLAGS,
  REPLICAS,
  repo,
  RESOURCE,
  STARTS,
} from "./plugin/knobs.js";
import { connectedAllocationPerCall } from "./plugin/connected-allocation.js";
import { preferredAllocationPerCall } from "./plugin/preferred-allocation.js";
import { startDpo, startGoPlugin, startToRegistered, type Launch, type Plugin } from "./plugin/processes.js";
import { judgePlugin, printReport, type Result } from "./plugin/report.js";
import { runSteadyState } from "./plugin/steady-state.js";
import { printVerdict } from "./targets.js";

async function main(): Promise<void> {
  const goBinary = execFileSync(join(repo, "tools", "cluster", "build-sample-device-plugin.sh"), {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  }).trim();
  const work = mkdtempSync(join(tmpdir(), "dpo-bench-"));
  const dir = join(work, "dp");
  const healthFile = join(work, "health.json");
  const config = join(work, "config.yaml");
  writeFileSync(healthFile, "{}");
  writeFileSync(
    config,
    [
      "apiVersion: dpo.dev/v1beta1",
      "kind: DevicePluginConfig",
      "metadata: { name: bench }",
      "spec:",
      `  resourceName: ${RESOURCE}`,
      `  backend: { type: Mock, mock: { devices: ${DEVICES}, idPrefix: dev, numaNodes: 2, healthFile: ${healthFile} } }`,
      `  sharing: { strategy: TimeSlicing, replicas: ${REPLICAS} }`,
      "  topology: { allocationPolicy: Packed }",
    ].join("\n"),
  );
  const kubelet = new SimulatedDeviceManager({ dir });
  await kubelet.start();
  const results: Result[] = [];
  const preferred = preferredAllocationPerCall();
  const connected = connectedAllocationPerCall();
  const running: Plugin[] = [];
  let failed = false;

  try {
    // The code cache the image ships, made the way the Dockerfile makes it.
    const compileCache = join(work, "compile-cache");
    execFileSync(process.execPath, [...NODE_FLAGS, dpo, "plugin", "--help"], {
      env: { ...process.env, NODE_COMPILE_CACHE: compileCache },
      stdio: "ignore",
    });
    const dpoLaunch = (name: string, entry: string, cache?: string): Launch => ({
      name,
      resource: RESOURCE,
      devices: DEVICES * REPLICAS,
      start: () => startDpo(dir, config, entry, cache),
    });
    const image = dpoLaunch("bundled + code cache, as the image runs", dpo, compileCache);
    const go: Launch = {
      name: "Go sample device plugin",
      resource: GO_RESOURCE,
      devices: GO_DEVICES,
      start: () => startGoPlugin(dir, goBinary),
    };
    const launches = [
      dpoLaunch("unbundled (dist/cli/main.js)", dpoUnbundled),
      dpoLaunch("bundled (dist/dpo.js)", dpo),
      image,
      go,
    ];
    // Start → registered with the full device list; the launches take turns so machine noise falls on
    // each alike. The last start of the image and of the Go plugin go on to the steady-state figures.
    const startTimes = new Map<Launch, number[]>(launches.map((l) => [l, []]));
    const steady = new Map<Launch, Plugin>();
    for (let i = 0; i < STARTS; i++) {
      for (const launch of launches) {
        const { plugin, ms } = await startToRegistered(kubelet, launch);
        running.push(plugin);
        startTimes.get(launch)!.push(ms);
        if (i === STARTS - 1 && (launch === image || launch === go)) {
          steady.set(launch, plugin);
        } else {
          await plugin.stop();
          running.splice(running.indexOf(plugin), 1);
        }
      }
    }
    await runSteadyState(
      kubelet,
      steady.get(image)!,
      steady.get(go)!,
      join(work, "floor.mjs"),
      healthFile,
      results,
    );

    const p50 = (launch: Launch): number => percentile(startTimes.get(launch)!, 50);
    const startRow = (launch: Launch): string => {
      const times = startTimes.get(launch)!;
      return `p50 ${p50(launch).toFixed(0)} ms, max ${Math.max(...times).toFixed(0)} ms`;
    };
    const dpoOnly = launches.filter((l) => l !== go && l !== image);
    results.unshift(
      ...dpoOnly.map((launch) => ({
        metric: `process start → registered, ${launch.name} (${STARTS} starts)`,
        value: `${startRow(launch)} (image / this: ${formatRatio(p50(image), p50(launch))})`,
        target: "(reported)",
        missed: [],
      })),
      {
        metric: `process start → registered, ${image.name} (${STARTS} starts)`,
        value: startRow(image),
        go: startRow(go),
        ratio: `p50 ${formatRatio(p50(image), p50(go))}`,
        target: "≤ 500 ms",
        missed: Math.max(...startTimes.get(image)!) <= 500 ? [] : ["≤ 500 ms"],
      },
    );
    results.push(preferred, connected);
  } catch (err) {
    // What was measured before the failure is still printed and judged below; the run exits 1.
    console.error(err);
    failed = true;
  } finally {
    for (const plugin of running) await plugin.stop();
    await kubelet.stop();
    rmSync(work, { recursive: true, force: true });
    // The empty files the Go plugin's Allocate made for its two devices.
    for (let i = 1; i <= GO_DEVICES; i++) {
      const file = join(GO_FAKE_DEVICE_DIR, `Dev-${i}`);
      const st = (() => {
        try {
          return lstatSync(file);
        } catch {
          return undefined;
        }
      })();
      if (st?.isFile() && st.size === 0) rmSync(file, { force: true });
    }
  }

  printReport(results);
  process.exitCode = printVerdict("bench-plugin", judgePlugin(results), failed);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
