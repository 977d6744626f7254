// `make fuzz`: the full-size run against the built plugin process. The seed comes from FUZZ_SEED, or is
// random and printed first, so any failure can be replayed with FUZZ_SEED=<seed> make fuzz.
import { formatCounts, fuzz } from "./grpc-fuzz.js";
import { fdCount, rssBytes, startPluginUnderFuzz } from "./plugin-under-fuzz.js";

const seed = process.env["FUZZ_SEED"]
  ? Number(process.env["FUZZ_SEED"]) >>> 0
  : (Math.random() * 2 ** 32) >>> 0;
const requests = Number(process.env["FUZZ_REQUESTS"] ?? 10_000);
process.stdout.write(`grpc fuzz: seed ${seed}, ${requests} requests (replay: FUZZ_SEED=${seed} make fuzz)\n`);

const plugin = await startPluginUnderFuzz();
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
  const after = { fds: fdCount(plugin.pid), rss: rssBytes(plugin.pid) };
  process.stdout.write(
    `plugin fds ${before.fds} -> ${after.fds}, rss ${(before.rss / 2 ** 20).toFixed(1)} -> ${(after.rss / 2 ** 20).toFixed(1)} MiB\n`,
  );
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
