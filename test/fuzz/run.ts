// `make fuzz`: the full-size run against the built plugin process. The seed comes from FUZZ_SEED, or is
// random and printed first, so any failure can be replayed with FUZZ_SEED=<seed> make fuzz.
import { formatCounts, fuzz } from "./grpc-fuzz.js";
import {
  fdCount,
  FUZZ_RESOURCE,
  NEAR_BASELINE,
  rssBytes,
  startPluginUnderFuzz,
} from "./plugin-under-fuzz.js";

const seed = process.env["FUZZ_SEED"]
  ? Number(process.env["FUZZ_SEED"]) >>> 0
  : (Math.random() * 2 ** 32) >>> 0;
const requests = Number(process.env["FUZZ_REQUESTS"] ?? 10_000);
process.stdout.write(`grpc fuzz: seed ${seed}, ${requests} requests (replay: FUZZ_SEED=${seed} make fuzz)\n`);

const plugin = await startPluginUnderFuzz();
let kubeletDisconnects = 0;
plugin.kubelet.on("disconnected", () => kubeletDisconnects++);
let failed = false;
try {
  const before = { fds: fdCount(plugin.pid), rss: rssBytes(plugin.pid) };
  const started = performance.now();
  const result = await fuzz({
    seed,
    requests,
    endpoint: plugin.endpoint,
    registrationSocket: plugin.registrationSocket,
  });
  const seconds = (performance.now() - started) / 1000;
  process.stdout.write(`${formatCounts(result)}\n`);
  process.stdout.write(`${requests} cases in ${seconds.toFixed(1)} s\n`);
  const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);
  const after = { fds: fdCount(plugin.pid), rss: rssBytes(plugin.pid) };
  process.stdout.write(
    `plugin fds ${before.fds} -> ${after.fds}, rss ${mib(before.rss)} -> ${mib(after.rss)} MiB\n`,
  );
  // Then back near baseline within 20 s, as the protocol test requires after its smaller storm.
  let settled = after;
  const settleStart = performance.now();
  const near = (): boolean =>
    settled.fds <= before.fds + NEAR_BASELINE.fds && settled.rss <= before.rss + NEAR_BASELINE.rssBytes;
  while (!near() && performance.now() - settleStart < 20_000 && !plugin.exit) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    settled = { fds: fdCount(plugin.pid), rss: rssBytes(plugin.pid) };
  }
  process.stdout.write(
    `settled after ${((performance.now() - settleStart) / 1000).toFixed(1)} s: fds ${settled.fds}, rss ${mib(settled.rss)} MiB${near() ? "" : " (NOT near baseline)"}\n`,
  );
  if (!near()) failed = true;
  // The kubelet simulator kept its own connection to the plugin through the storm.
  const kubelet = plugin.kubelet.resources.get(FUZZ_RESOURCE);
  process.stdout.write(
    `kubelet: connected ${kubelet?.connected}, disconnects during the run ${kubeletDisconnects}\n`,
  );
  if (!kubelet?.connected || kubeletDisconnects > 0) failed = true;
  for (const u of result.unexpected.slice(0, 20)) process.stdout.write(`UNEXPECTED ${JSON.stringify(u)}\n`);
  if (result.unexpected.length > 0) failed = true;
  if (plugin.exit) {
    process.stdout.write(`plugin exited: ${JSON.stringify(plugin.exit)}\n${plugin.stderr.join("")}\n`);
    failed = true;
  }
} finally {
  await plugin.stop();
}
if (failed) {
  process.stdout.write(`grpc fuzz FAILED with seed ${seed}\n`);
  process.exitCode = 1;
}
