// The layers of src/ and the import rules of tools/ and bench/ (.dependency-cruiser.js): the real tree keeps
// them, and every kind of rule fires on a small tree that breaks it.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { cruise, type ICruiseOptions, type ICruiseResult, type ITranspileOptions } from "dependency-cruiser";
import extractDepcruiseOptions from "dependency-cruiser/config-utl/extract-depcruise-options";
import extractTSConfig from "dependency-cruiser/config-utl/extract-ts-config";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const REPO = join(import.meta.dirname, "..", "..");

let options: ICruiseOptions;
let transpile: ITranspileOptions;

beforeAll(async () => {
  options = await extractDepcruiseOptions(join(REPO, ".dependency-cruiser.js"));
  transpile = { tsConfig: extractTSConfig(join(REPO, "tsconfig.json")) };
});

/** The folders `make lint` cruises. */
const CRUISED = ["src", "tools", "bench"];

/** Each violation as `<rule>: <from> → <to>`, sorted. */
async function violations(baseDir: string): Promise<string[]> {
  const { output } = await cruise(CRUISED, { ...options, baseDir }, undefined, transpile);
  if (typeof output === "string") throw new Error(`dependency-cruiser reported text: ${output}`);
  const result: ICruiseResult = output;
  return result.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`).sort();
}

describe("the source tree", () => {
  it("keeps its layers: no violations", async () => {
    expect(await violations(REPO)).toEqual([]);
  });
});

describe("the rules", () => {
  let root: string;

  /** Files of a tree that breaks each rule once, beside imports that every rule allows. */
  const files: Record<string, string> = {
    // Allowed: down the layers and within a folder.
    "src/api/schema.ts": "export const schema = 1;\n",
    "src/contract/names.ts": "export const name = 1;\n",
    "src/kube/client.ts": 'import { schema } from "../api/schema.js";\nexport const client = schema;\n',
    "src/cli/main.ts": [
      'import { client } from "../kube/client.js";',
      'import { render } from "../operator/render/render.js";',
      'import { report } from "../plugin-runtime/report/report.js";',
      "export const main = [client, render, report];",
      "",
    ].join("\n"),
    "src/operator/status/status.ts":
      'import { words } from "../model/words.js";\nexport const status = words;\n',
    "src/operator/upgrade/plan.ts":
      'import { words } from "../model/words.js";\nexport const plan = words;\n',
    "src/operator/model/words.ts": "export const words = 1;\n",
    // The rollout core: its siblings on each other, its model on a sibling, the rollout on the config.
    "src/operator/status/progress.ts":
      'import { plan } from "../upgrade/plan.js";\nexport const progress = plan;\n',
    "src/operator/model/terms.ts":
      'import { render } from "../render/render.js";\nexport const terms = render;\n',
    "src/api/v1beta1/config.ts": "export interface DevicePluginConfig { name: string }\n",
    "src/operator/upgrade/decide.ts":
      'import type { DevicePluginConfig } from "../../api/v1beta1/config.js";\nexport type Decide = DevicePluginConfig;\n',
    "src/contract/hash.ts": 'import { schema } from "../api/schema.js";\nexport const hash = schema;\n',
    // The plugin reaching into the operator, and the operator into the plugin.
    "src/plugin-runtime/report/report.ts": [
      'import { name } from "../../contract/names.js";',
      'import { render } from "../../operator/render/render.js";',
      "export const report = [name, render];",
      "",
    ].join("\n"),
    "src/operator/render/render.ts":
      'import { device } from "../../plugin-runtime/devices/device.js";\nexport const render = device;\n',
    "src/plugin-runtime/devices/device.ts": "export const device = 1;\n",
    // A type-only import counts.
    "src/webhook/index.ts":
      'import type { Metrics } from "../operator/metrics.js";\nexport type WebhookMetrics = Metrics;\n',
    "src/operator/metrics.ts": "export interface Metrics { count: number }\n",
    // The bottom imports nothing.
    "src/api/naming.ts": 'import { name } from "../contract/names.js";\nexport const naming = name;\n',
    // A file in no layer.
    "src/helpers.ts": "export const helper = 1;\n",
    "src/cdi/spec.ts": 'import { helper } from "../helpers.js";\nexport const spec = helper;\n',
    // Into the tests.
    "src/observability/log.ts":
      'import { fixture } from "../../test/fixture.js";\nexport const log = fixture;\n',
    "test/fixture.ts": "export const fixture = 1;\n",
    // A folder cycle.
    "src/operator/status/health.ts":
      'import { table } from "../controllers/table.js";\nexport const health = table;\n',
    "src/operator/controllers/table.ts": "export const table = 1;\n",
    "src/operator/controllers/reconcile.ts":
      'import { status } from "../status/status.js";\nexport const reconcile = status;\n',
    // A cycle of modules.
    "src/kube/a.ts": 'import { b } from "./b.js";\nexport const a = (): number => b();\n',
    "src/kube/b.ts": 'import { a } from "./a.js";\nexport const b = (): number => a();\n',
    // Allowed: tools on src/, benchmarks on tools/ and src/.
    "tools/cluster/wait.ts":
      'import { schema } from "../../src/api/schema.js";\nexport const wait = schema;\n',
    "bench/figures.ts": [
      'import { wait } from "../tools/cluster/wait.js";',
      'import { client } from "../src/kube/client.js";',
      "export const figures = [wait, client];",
      "",
    ].join("\n"),
    // A cycle of modules in tools/ and one in bench/.
    "tools/sim/node.ts": 'import { pods } from "./pods.js";\nexport const node = (): number => pods();\n',
    "tools/sim/pods.ts": 'import { node } from "./node.js";\nexport const pods = (): number => node();\n',
    "bench/x.ts": 'import { y } from "./y.js";\nexport const x = (): number => y();\n',
    "bench/y.ts": 'import { x } from "./x.js";\nexport const y = (): number => x();\n',
    // Folder cycles in tools/: any pair, the cluster and its real node too.
    "tools/demo/run.ts": 'import { build } from "../image/build.js";\nexport const run = build;\n',
    "tools/image/build.ts": 'import { demo } from "../demo/config.js";\nexport const build = demo;\n',
    "tools/demo/config.ts": "export const demo = 1;\n",
    "tools/real-node/node.ts": 'import { wait } from "../cluster/wait.js";\nexport const node = wait;\n',
    "tools/cluster/stop.ts": 'import { node } from "../real-node/node.js";\nexport const stop = node;\n',
    // A benchmark and a tool on a test helper, and a tool on a benchmark.
    "bench/run.ts": 'import { fixture } from "../test/fixture.js";\nexport const run = fixture;\n',
    "tools/sim/load.ts": [
      'import { fixture } from "../../test/fixture.js";',
      'import { figures } from "../../bench/figures.js";',
      "export const load = [fixture, figures];",
      "",
    ].join("\n"),
  };

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "dpo-layers-"));
    for (const [path, text] of Object.entries(files)) {
      await mkdir(dirname(join(root, path)), { recursive: true });
      await writeFile(join(root, path), text);
    }
  });

  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("report each import that breaks a layer, a folder cycle, a module cycle, the rollout core's shape or the tooling rules, and nothing else", async () => {
    expect(await violations(root)).toEqual(
      [
        "layer-plugin-runtime: src/plugin-runtime/report/report.ts → src/operator/render/render.ts",
        "layer-operator: src/operator/render/render.ts → src/plugin-runtime/devices/device.ts",
        "layer-webhook: src/webhook/index.ts → src/operator/metrics.ts",
        "layer-api: src/api/naming.ts → src/contract/names.ts",
        // The same import closes a cycle between the two folders.
        "no-folder-cycles: src/api → src/contract",
        "no-folder-cycles: src/contract → src/api",
        "layer-cdi: src/cdi/spec.ts → src/helpers.ts",
        "not-in-a-layer: src/cdi/spec.ts → src/helpers.ts",
        "src-not-to-tooling: src/observability/log.ts → test/fixture.ts",
        "no-folder-cycles: src/operator/status → src/operator/controllers",
        "no-folder-cycles: src/operator/controllers → src/operator/status",
        // The same import reaches above the rollout core.
        "rollout-core-siblings: src/operator/status/health.ts → src/operator/controllers/table.ts",
        "no-circular: src/kube/a.ts → src/kube/b.ts",
        "no-circular: tools/sim/node.ts → tools/sim/pods.ts",
        "no-circular: bench/x.ts → bench/y.ts",
        "no-folder-cycles: tools/demo → tools/image",
        "no-folder-cycles: tools/image → tools/demo",
        "no-folder-cycles: tools/cluster → tools/real-node",
        "no-folder-cycles: tools/real-node → tools/cluster",
        "tooling-not-to-tests: bench/run.ts → test/fixture.ts",
        "tooling-not-to-tests: tools/sim/load.ts → test/fixture.ts",
        "tools-not-to-bench: tools/sim/load.ts → bench/figures.ts",
        "rollout-core-siblings: src/operator/status/progress.ts → src/operator/upgrade/plan.ts",
        "rollout-model-at-the-bottom: src/operator/model/terms.ts → src/operator/render/render.ts",
        "rollout-blind-to-the-config: src/operator/upgrade/decide.ts → src/api/v1beta1/config.ts",
      ].sort(),
    );
  });
});
