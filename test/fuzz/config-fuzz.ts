// One config-fuzz run against a cluster serving the dpo CRDs: `count` cases of a seed, each judged by dpo
// validate, the API server (dry runs, `concurrency` at a time) and the plugin's loader, plus a sample
// checked against the built `dpo validate` itself. Returns counts and every disagreement.
import type { KubeConfig } from "@kubernetes/client-node";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { caseName, generateConfigCase, type ConfigCase, type JsonObject } from "./config-gen.js";
import {
  judge,
  judgeApiServer,
  judgeDpoValidate,
  judgeLoader,
  manifestYaml,
  storedV1beta1,
  validateCliLines,
  type DpoVerdict,
  type Outcome,
  type Retries,
} from "./config-judges.js";

export interface ConfigFuzzOptions {
  kc: KubeConfig;
  seed: number;
  count: number;
  /** First case index (a single case replays with from = its index, count = 1). */
  from?: number;
  /** Dry runs in flight at once. */
  concurrency?: number;
  /** Every n-th case also goes through the built CLI (dist/dpo.js), when it is built. */
  cliSampleEvery?: number;
  /** Appended to generated names, so runs on a reused cluster never collide with leftovers. */
  nameSuffix: string;
}

export interface CaseFailure {
  c: ConfigCase;
  yaml: string;
  disagreements: string[];
}

export interface ConfigFuzzResult {
  seed: number;
  cases: number;
  outcomes: Record<Outcome, number>;
  byVersion: Record<string, Record<Outcome, number>>;
  unmutated: number;
  cliChecked: number;
  /** Requests sent again after an answer that was no verdict (a reset connection, throttling). */
  retries: Retries;
  failures: CaseFailure[];
  seconds: number;
}

const repoRoot = join(import.meta.dirname, "..", "..");
const CLI = join(repoRoot, "dist", "dpo.js");

/** Names the run's objects uniquely: the generated name plus the run's suffix (invalid names stay as they are). */
function withRunName(c: ConfigCase, suffix: string): ConfigCase {
  const metadata = c.manifest.metadata as JsonObject;
  if (metadata.name === caseName(c.seed, c.index)) metadata.name = `${metadata.name}-${suffix}`;
  return c;
}

async function judgeCase(
  o: ConfigFuzzOptions,
  c: ConfigCase,
  retries: Retries,
): Promise<{ dpo: DpoVerdict; yaml: string; outcome: Outcome; disagreements: string[] }> {
  const yaml = manifestYaml(c.manifest);
  const dpo = judgeDpoValidate(yaml);
  const api = await judgeApiServer(o.kc, c.version, c.manifest, retries);
  const loader = api.accepted
    ? judgeLoader(await storedV1beta1(o.kc, c, api, retries), dpo.betaSpec)
    : undefined;
  const { outcome, disagreements } = judge(c, dpo, api, loader);
  return { dpo, yaml, outcome, disagreements };
}

/** Runs `dpo validate` on the sampled manifests and compares its output with the in-process verdicts. */
async function checkCli(sample: { c: ConfigCase; yaml: string; dpo: DpoVerdict }[]): Promise<CaseFailure[]> {
  if (sample.length === 0) return [];
  const dir = await mkdtemp(join(tmpdir(), "dpo-config-fuzz-"));
  try {
    const files = await Promise.all(
      sample.map(async ({ c, yaml }) => {
        const file = join(dir, `case-${c.index}.yaml`);
        await writeFile(file, yaml);
        return file;
      }),
    );
    const { stdout, stderr, code } = await new Promise<{ stdout: string; stderr: string; code: number }>(
      (resolve, reject) => {
        execFile(
          process.execPath,
          [CLI, "validate", ...files],
          { maxBuffer: 64 << 20 },
          (error, out, err) => {
            if (error && typeof error.code !== "number") reject(new Error(error.message, { cause: error }));
            else
              resolve({ stdout: out, stderr: err, code: typeof error?.code === "number" ? error.code : 0 });
          },
        );
      },
    );
    // dpo validate prints each verdict on stdout and each problem on stderr, whatever the others are.
    // Compared as text: a path or message may hold a newline of the manifest's.
    const failures: CaseFailure[] = [];
    const at = { stdout: 0, stderr: 0 };
    const printed = { stdout, stderr };
    for (const [i, { c, yaml, dpo }] of sample.entries()) {
      const lines = validateCliLines(files[i]!, c.version, dpo, c.manifest);
      const disagreements: string[] = [];
      for (const stream of ["stdout", "stderr"] as const) {
        const want = lines[stream].map((l) => `${l}\n`).join("");
        if (printed[stream].startsWith(want, at[stream])) {
          at[stream] += want.length;
          continue;
        }
        const got = printed[stream].slice(at[stream], at[stream] + want.length + 200);
        disagreements.push(
          `dpo validate (CLI) prints ${JSON.stringify(got)} on ${stream}, in process ${JSON.stringify(want)}`,
        );
      }
      if (disagreements.length > 0) {
        failures.push({ c, yaml, disagreements });
        // Everything after is out of step with this case: one report is enough.
        return failures;
      }
    }
    const wantCode = sample.every((s) => s.dpo.accepted) ? 0 : 1;
    if (at.stdout !== stdout.length || at.stderr !== stderr.length || code !== wantCode) {
      failures.push({
        c: sample[0]!.c,
        yaml: "",
        disagreements: [
          `dpo validate (CLI) printed ${stdout.length - at.stdout} characters more than expected on stdout and ${stderr.length - at.stderr} on stderr, and exited ${code} (expected ${wantCode}); stderr: ${stderr.slice(0, 2000)}`,
        ],
      });
    }
    return failures;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export async function runConfigFuzz(o: ConfigFuzzOptions): Promise<ConfigFuzzResult> {
  const started = performance.now();
  const from = o.from ?? 0;
  const concurrency = o.concurrency ?? 8;
  const every = o.cliSampleEvery ?? 25;
  const empty = (): Record<Outcome, number> => ({ accepted: 0, rejected: 0, "offline-only": 0 });
  const result: ConfigFuzzResult = {
    seed: o.seed,
    cases: o.count,
    outcomes: empty(),
    byVersion: {},
    unmutated: 0,
    cliChecked: 0,
    retries: { count: 0 },
    failures: [],
    seconds: 0,
  };
  const sample: { c: ConfigCase; yaml: string; dpo: DpoVerdict }[] = [];
  let next = from;
  const worker = async (): Promise<void> => {
    while (next < from + o.count) {
      const index = next++;
      let c: ConfigCase;
      try {
        c = withRunName(generateConfigCase(o.seed, index), o.nameSuffix);
      } catch (err) {
        const origin = "generation failed";
        result.failures.push({
          c: { seed: o.seed, index, version: "v1beta1", manifest: {}, origin, mutations: [] },
          yaml: "",
          disagreements: [`generator error: ${(err as Error).stack ?? String(err)}`],
        });
        continue;
      }
      let verdict: Awaited<ReturnType<typeof judgeCase>>;
      try {
        verdict = await judgeCase(o, c, result.retries);
      } catch (err) {
        result.failures.push({
          c,
          yaml: JSON.stringify(c.manifest),
          disagreements: [`harness error: ${(err as Error).stack ?? String(err)}`],
        });
        continue;
      }
      result.outcomes[verdict.outcome]++;
      (result.byVersion[c.version] ??= empty())[verdict.outcome]++;
      if (c.mutations.length === 0) result.unmutated++;
      if (verdict.disagreements.length > 0)
        result.failures.push({ c, yaml: verdict.yaml, disagreements: verdict.disagreements });
      if ((index - from) % every === 0) sample.push({ c, yaml: verdict.yaml, dpo: verdict.dpo });
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  if (existsSync(CLI)) {
    sample.sort((a, b) => a.c.index - b.c.index);
    result.failures.push(...(await checkCli(sample)));
    result.cliChecked = sample.length;
  }
  result.failures.sort((a, b) => a.c.index - b.c.index);
  result.seconds = (performance.now() - started) / 1000;
  return result;
}

/** The summary lines of a run. */
export function formatResult(r: ConfigFuzzResult): string {
  const o = r.outcomes;
  const versions = Object.entries(r.byVersion)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([v, n]) => `${v} ${n.accepted}/${n.rejected}/${n["offline-only"]}`)
    .join(", ");
  return [
    `config fuzz: seed ${r.seed}, ${r.cases} manifests in ${r.seconds.toFixed(1)} s`,
    `  accepted ${o.accepted}, rejected ${o.rejected}, offline-only lint ${o["offline-only"]} (accepted/rejected/offline by version: ${versions})`,
    `  unmutated ${r.unmutated}, checked against the dpo CLI ${r.cliChecked}, requests retried ${r.retries.count}, disagreements ${r.failures.length}`,
  ].join("\n");
}

/** A failure as a replayable report: the case, what was done to it, what disagreed, the manifest. */
export function formatFailure(f: CaseFailure, limit = 4000): string {
  const yaml =
    f.yaml.length > limit ? `${f.yaml.slice(0, limit)}\n... (${f.yaml.length} characters)` : f.yaml;
  return [
    `case ${f.c.index} of seed ${f.c.seed} (${f.c.origin}; replay: CONFIG_FUZZ_SEED=${f.c.seed} CONFIG_FUZZ_FROM=${f.c.index} CONFIG_FUZZ_MANIFESTS=1)`,
    ...f.c.mutations.map((m) => `  mutation: ${m}`),
    ...f.disagreements.map((d) => `  DISAGREE: ${d}`),
    yaml,
  ].join("\n");
}
