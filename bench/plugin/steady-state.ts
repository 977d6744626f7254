// The two plugins once registered, side by side: Allocate at 1 and 16 in flight, dpo's health change to
// the kubelet's ListAndWatch, and their RSS idle (dpo's also over bare Node's) and after the calls.
import * as grpc from "@grpc/grpc-js";
import { renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DevicePluginClient } from "../../src/plugin-runtime/proto/index.js";
import type { SimulatedDeviceManager, SimulatedResource } from "../../tools/kubelet-sim/device-manager.js";
import { waitFor } from "../../tools/cluster/wait.js";
import { percentile } from "../../tools/stats.js";
import { rssMiB, type Rss } from "../proc.js";
import {
  allocateLatencies,
  allocateRatio,
  blockSizes,
  formatAllocates,
  type AllocateRun,
} from "./allocate.js";
import { DEFAULT_PLUGIN_RESOURCES } from "../../src/operator/render/daemonset.js";
import { ALLOCATES, BLOCKS, GO_RESOURCE, HEALTH_CHANGES, IDLE_SETTLE_S, RESOURCE, WARMUP } from "./knobs.js";
import { startNodeFloor, type Plugin } from "./processes.js";
import { formatRss, rssRatio, type Result } from "./report.js";

/** How far above bare Node with node:http2 (same flags, same run) dpo's idle plugin may be. */
export const IDLE_RSS_OVER_FLOOR = 1.1;
/** The memory request plugin pods get by default (render/daemonset.ts), in MiB: RSS after the calls stays under it. */
const REQUEST_MIB = Number(/^(\d+)Mi$/.exec(DEFAULT_PLUGIN_RESOURCES.requests.memory)?.[1]);

export async function runSteadyState(
  kubelet: SimulatedDeviceManager,
  dpoPlugin: Plugin,
  goPlugin: Plugin,
  floorScript: string,
  healthFile: string,
  results: Result[],
): Promise<void> {
  const connect = (resource: string): { client: DevicePluginClient; ids: string[]; r: SimulatedResource } => {
    const r = kubelet.resources.get(resource)!;
    const client = new DevicePluginClient(
      `unix://${join(kubelet.socketPath, "..", r.endpoint)}`,
      grpc.credentials.createInsecure(),
    );
    return { client, ids: r.devices.map((d) => d.ID), r };
  };
  const dpoSide = { ...connect(RESOURCE), pid: dpoPlugin.child.pid! };
  const goSide = { ...connect(GO_RESOURCE), pid: goPlugin.child.pid! };
  const sides = [dpoSide, goSide];

  // Idle: registered and serving, no call made yet; read two seconds on and again IDLE_SETTLE_S on. The
  // floor starts now and idles as long, so machine load and memory pressure fall on both alike.
  const floor = startNodeFloor(floorScript);
  let floorIdle: Rss;
  let floorSettled: Rss;
  let dpoIdle: Rss;
  let goIdle: Rss;
  let dpoSettled: Rss;
  try {
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    floorIdle = rssMiB(floor.child.pid!);
    [dpoIdle, goIdle] = sides.map((s) => rssMiB(s.pid)) as [Rss, Rss];
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, IDLE_SETTLE_S * 1000 - 2_000)));
    floorSettled = rssMiB(floor.child.pid!);
    dpoSettled = rssMiB(dpoSide.pid);
  } finally {
    await floor.stop();
  }
  for (const s of sides) await allocateLatencies(s.client, s.ids, WARMUP, 1);

  // The two plugins take turns, block by block, so a burst of machine load falls on both alike.
  const turns = async (total: number, inFlight: number): Promise<[AllocateRun, AllocateRun]> => {
    const runs: [AllocateRun, AllocateRun] = [
      { latencies: [], seconds: 0 },
      { latencies: [], seconds: 0 },
    ];
    for (const size of blockSizes(total, BLOCKS)) {
      for (const [i, s] of sides.entries()) await allocateLatencies(s.client, s.ids, size, inFlight, runs[i]);
    }
    return runs;
  };
  const [dpoOne, goOne] = await turns(Math.floor(ALLOCATES / 2), 1);
  const [dpoSixteen, goSixteen] = await turns(ALLOCATES - Math.floor(ALLOCATES / 2), 16);
  const [dpoAfter, goAfter] = sides.map((s) => rssMiB(s.pid)) as [Rss, Rss];

  const oneMissed: string[] = [];
  if (percentile(dpoOne.latencies, 99) > 2) oneMissed.push("p99 ≤ 2 ms");
  if (percentile(dpoOne.latencies, 99) > 3 * percentile(goOne.latencies, 99)) oneMissed.push("p99 ratio ≤ 3");
  results.push({
    metric: `Allocate, 1 in flight (${dpoOne.latencies.length} calls each)`,
    value: formatAllocates(dpoOne),
    go: formatAllocates(goOne),
    ratio: allocateRatio(dpoOne, goOne),
    target: "p99 ≤ 2 ms, p99 ratio ≤ 3",
    missed: oneMissed,
  });
  results.push({
    metric: `Allocate, 16 in flight (${dpoSixteen.latencies.length} calls each)`,
    value: formatAllocates(dpoSixteen),
    go: formatAllocates(goSixteen),
    ratio: allocateRatio(dpoSixteen, goSixteen),
    target: "(reported)",
    missed: [],
  });

  // Health change → the kubelet's ListAndWatch stream shows it (the Go sample plugin has no health source).
  const latencies: number[] = [];
  for (let i = 0; i < HEALTH_CHANGES; i++) {
    const unhealthy = i % 2 === 0;
    const want = unhealthy ? "Unhealthy" : "Healthy";
    const tmp = `${healthFile}.tmp`;
    writeFileSync(tmp, JSON.stringify(unhealthy ? { "dev-3": "Unhealthy" } : {}));
    const written = performance.now();
    renameSync(tmp, healthFile);
    await waitFor(
      `dev-3 to become ${want} on the stream`,
      () => dpoSide.r.devices.find((d) => d.ID === "dev-3::0")?.health === want,
      { timeoutMs: 5_000, intervalMs: 1 },
    );
    latencies.push(performance.now() - written);
  }
  results.push({
    metric: `health change → ListAndWatch (${HEALTH_CHANGES} changes)`,
    value: `p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms`,
    target: "p99 ≤ 100 ms",
    missed: percentile(latencies, 99) <= 100 ? [] : ["p99 ≤ 100 ms"],
  });
  const overFloor = dpoIdle.total / floorIdle.total;
  results.push({
    metric: "RSS idle (registered, no call yet)",
    value: formatRss(dpoIdle),
    go: formatRss(goIdle),
    ratio: rssRatio(dpoIdle, goIdle),
    target: "≤ 75 MiB",
    missed: dpoIdle.total <= 75 ? [] : ["≤ 75 MiB"],
  });
  results.push({
    metric: "RSS idle over bare Node with node:http2, same flags and run",
    value: `${overFloor.toFixed(3)}× of ${formatRss(floorIdle)}`,
    target: `≤ ${IDLE_RSS_OVER_FLOOR}×`,
    missed: overFloor <= IDLE_RSS_OVER_FLOOR ? [] : [`≤ ${IDLE_RSS_OVER_FLOOR}× Node + http2`],
  });
  const settledOverFloor = dpoSettled.total / floorSettled.total;
  results.push({
    metric: `the same, ${IDLE_SETTLE_S} s on, both idle all along`,
    value: `${formatRss(dpoSettled)}: ${settledOverFloor.toFixed(3)}× of ${formatRss(floorSettled)}`,
    target: `≤ ${IDLE_RSS_OVER_FLOOR}×`,
    missed:
      settledOverFloor <= IDLE_RSS_OVER_FLOOR
        ? []
        : [`≤ ${IDLE_RSS_OVER_FLOOR}× Node + http2, ${IDLE_SETTLE_S} s on`],
  });
  results.push({
    metric: `RSS after ${WARMUP + ALLOCATES} Allocates (${WARMUP} warm-up)`,
    value: formatRss(dpoAfter),
    go: formatRss(goAfter),
    ratio: rssRatio(dpoAfter, goAfter),
    target: `≤ ${REQUEST_MIB} MiB, the pods' default memory request`,
    missed: dpoAfter.total <= REQUEST_MIB ? [] : [`≤ ${REQUEST_MIB} MiB`],
  });
  for (const s of sides) s.client.close();
}
