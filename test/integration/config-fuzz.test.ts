// Config fuzzing against the real API server: seeded manifests derived from the CRD schemas and mutated
// (test/fuzz/config-gen.ts); dpo validate, the API server and the plugin's loader must agree on every one
// (test/fuzz/config-judges.ts says exactly how). make test runs a fixed seed and a random one, printed;
// CONFIG_FUZZ_SEED replays the random part, CONFIG_FUZZ_MANIFESTS sizes it, CONFIG_FUZZ_FROM starts it at
// a case. `make fuzz-config` runs 5,000.
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveConversionFromTest, type TestConversionWebhook } from "../cluster/conversion-webhook.js";
import { installCrds, kubeConfigFromInjected, waitFor } from "../cluster/helpers.js";
import { formatFailure, formatResult, runConfigFuzz, type ConfigFuzzResult } from "../fuzz/config-fuzz.js";
import { generateConfigCase } from "../fuzz/config-gen.js";
import { judgeApiServer } from "../fuzz/config-judges.js";

const FIXED_SEED = 0xc0f16;
const FIXED_MANIFESTS = 150;
const env = process.env;
const RANDOM_SEED = env.CONFIG_FUZZ_SEED ? Number(env.CONFIG_FUZZ_SEED) >>> 0 : randomBytes(4).readUInt32BE();
const MANIFESTS = Number(env.CONFIG_FUZZ_MANIFESTS ?? 150);
const FROM = Number(env.CONFIG_FUZZ_FROM ?? 0);
const FIELD_MANAGER = "dpo-config-fuzz-test";
const resultsDir = join(import.meta.dirname, "..", "..", ".local", "test-results");

const kc = kubeConfigFromInjected();
const nameSuffix = randomBytes(3).toString("hex");
let webhook: TestConversionWebhook | undefined;

beforeAll(async () => {
  await installCrds(FIELD_MANAGER);
  // v1alpha1 objects are converted for storage, dry runs too: the webhook must answer.
  webhook = await serveConversionFromTest();
  // Established comes before the endpoints serve the new schema; an unmutated case of each version proves they do.
  for (const version of ["v1beta1", "v1alpha1"] as const) {
    let index = 0;
    while (
      generateConfigCase(FIXED_SEED, index).version !== version ||
      generateConfigCase(FIXED_SEED, index).mutations.length > 0
    )
      index++;
    const probe = generateConfigCase(FIXED_SEED, index);
    (probe.manifest.metadata as { name: string }).name += `-probe-${nameSuffix}`;
    await waitFor(`${version} DevicePluginConfigs served`, async (observe) => {
      const verdict = await judgeApiServer(kc, version, probe.manifest).catch((err: Error) => ({
        accepted: false,
        message: err.message,
      }));
      observe(verdict.message);
      return verdict.accepted;
    });
  }
});

afterAll(async () => {
  await webhook?.stop();
});

/** Prints the summary and the first failures; every failure in full goes to .local/test-results/. */
function report(result: ConfigFuzzResult, replay: string): void {
  process.stdout.write(`${formatResult(result)}\n`);
  for (const f of result.failures.slice(0, 10)) process.stdout.write(`${formatFailure(f)}\n`);
  if (result.failures.length === 0) return;
  const file = join(resultsDir, `config-fuzz-${result.seed}.log`);
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(file, result.failures.map((f) => formatFailure(f, 100_000)).join("\n\n"));
  process.stdout.write(
    `config fuzz failed (every failure: ${relative(process.cwd(), file)}): replay with ${replay}\n`,
  );
}

describe("config fuzzing: dpo validate, the API server and the plugin's loader agree", () => {
  it(`on ${FIXED_MANIFESTS} manifests of the fixed seed ${FIXED_SEED}`, async () => {
    const result = await runConfigFuzz({ kc, seed: FIXED_SEED, count: FIXED_MANIFESTS, nameSuffix });
    report(result, `the fixed seed (test/integration/config-fuzz.test.ts)`);
    expect(result.failures.map((f) => formatFailure(f, 400))).toEqual([]);
    // The run covered both versions, both verdicts and unmutated manifests.
    expect(Object.keys(result.byVersion).sort()).toEqual(["v1alpha1", "v1beta1"]);
    expect(result.outcomes.accepted).toBeGreaterThan(FIXED_MANIFESTS / 5);
    expect(result.outcomes.rejected).toBeGreaterThan(FIXED_MANIFESTS / 5);
    expect(result.unmutated).toBeGreaterThan(0);
  });

  it(
    `on ${MANIFESTS} manifests of the seed ${RANDOM_SEED} (CONFIG_FUZZ_SEED=${RANDOM_SEED} replays)`,
    { timeout: Math.max(180_000, MANIFESTS * 400) },
    async () => {
      process.stdout.write(
        `config fuzz: seed ${RANDOM_SEED} (replay: CONFIG_FUZZ_SEED=${RANDOM_SEED} make fuzz-config)\n`,
      );
      const result = await runConfigFuzz({ kc, seed: RANDOM_SEED, count: MANIFESTS, from: FROM, nameSuffix });
      report(result, `CONFIG_FUZZ_SEED=${RANDOM_SEED}`);
      expect(result.failures.map((f) => formatFailure(f, 400))).toEqual([]);
    },
  );
});
