// Allocate as the kubelet calls it: latencies at a given number in flight, in blocks the two plugins take
// turns on, and how a run is written in the table.
import type { DevicePluginClient, AllocateResponse } from "../../src/plugin-runtime/proto/index.js";
import { formatRatio, percentile } from "../../tools/stats.js";

function allocateOnce(client: DevicePluginClient, id: string): Promise<AllocateResponse> {
  return new Promise((resolve, reject) =>
    client.allocate({ containerRequests: [{ devicesIds: [id] }] }, (err, res) =>
      err ? reject(err) : resolve(res),
    ),
  );
}

export interface AllocateRun {
  latencies: number[];
  seconds: number;
}

/** `total` Allocates with `inFlight` at a time, one device id per request, the ids in turn; appended to `into`. */
export async function allocateLatencies(
  client: DevicePluginClient,
  ids: string[],
  total: number,
  inFlight: number,
  into: AllocateRun = { latencies: [], seconds: 0 },
): Promise<AllocateRun> {
  let next = 0;
  const offset = into.latencies.length;
  async function worker(): Promise<void> {
    while (next < total) {
      const i = next++;
      const started = performance.now();
      await allocateOnce(client, ids[(offset + i) % ids.length]!);
      into.latencies.push(performance.now() - started);
    }
  }
  const started = performance.now();
  await Promise.all(Array.from({ length: inFlight }, () => worker()));
  into.seconds += (performance.now() - started) / 1000;
  return into;
}

export function formatAllocates(run: AllocateRun): string {
  const p50 = percentile(run.latencies, 50);
  const p99 = percentile(run.latencies, 99);
  return `p50 ${p50.toFixed(3)} ms, p99 ${p99.toFixed(3)} ms (${(run.latencies.length / run.seconds).toFixed(0)}/s)`;
}

export function allocateRatio(a: AllocateRun, b: AllocateRun): string {
  return (
    `p50 ${formatRatio(percentile(a.latencies, 50), percentile(b.latencies, 50))}, ` +
    `p99 ${formatRatio(percentile(a.latencies, 99), percentile(b.latencies, 99))}`
  );
}

/** The block sizes that split `total` calls into `blocks` turns. */
export function blockSizes(total: number, blocks: number): number[] {
  return Array.from(
    { length: blocks },
    (_, i) => Math.floor(((i + 1) * total) / blocks) - Math.floor((i * total) / blocks),
  );
}
