// bundle.ts fails when the plugin's path in the bundle reaches a package kept off it (ADR 0008): what that
// path is (the entry without its lazily loaded subcommands, the plugin subcommand with everything it loads)
// and what it reports, on metafiles of esbuild's shape.
import type { Metafile } from "esbuild";
import { describe, expect, it } from "vitest";
import {
  offPathPackagesOnPluginPath,
  packageOf,
  pluginPathInputs,
} from "../../../../tools/bundle/plugin-path.js";

type Edge = [string, Metafile["inputs"][string]["imports"][number]["kind"]];

function metafile(graph: Record<string, Edge[]>): Metafile {
  const inputs: Metafile["inputs"] = {};
  for (const [path, edges] of Object.entries(graph)) {
    inputs[path] = { bytes: 1, imports: edges.map(([to, kind]) => ({ path: to, kind })) };
  }
  for (const edges of Object.values(graph))
    for (const [to] of edges) inputs[to] ??= { bytes: 1, imports: [] };
  return { inputs, outputs: {} };
}

const GRPC = "node_modules/@grpc/grpc-js/build/src/index.js";
const PINO = "node_modules/pino/pino.js";

/** The CLI as it is: the entry loads each subcommand with import(); the operator's loads grpc-js and pino. */
const cli = (pluginEdges: Edge[]): Metafile =>
  metafile({
    "dist/cli/main.js": [["dist/cli/run.js", "import-statement"]],
    "dist/cli/run.js": [
      ["dist/cli/plugin.js", "dynamic-import"],
      ["dist/cli/operator.js", "dynamic-import"],
    ],
    "dist/cli/operator.js": [
      [PINO, "import-statement"],
      [GRPC, "import-statement"],
    ],
    "dist/cli/plugin.js": pluginEdges,
    "dist/plugin-runtime/runtime.js": [["dist/plugin-runtime/grpc/server.js", "import-statement"]],
  });

describe("the plugin's path in the bundle", () => {
  it("is the entry's static imports and everything the plugin subcommand reaches, lazily loaded parts too", () => {
    const meta = cli([
      ["dist/plugin-runtime/runtime.js", "import-statement"],
      ["dist/cli/kubeconfig-yaml.js", "dynamic-import"],
    ]);
    expect([...pluginPathInputs(meta, "dist/cli/main.js", "dist/cli/plugin.js")].sort()).toEqual([
      "dist/cli/kubeconfig-yaml.js",
      "dist/cli/main.js",
      "dist/cli/plugin.js",
      "dist/cli/run.js",
      "dist/plugin-runtime/grpc/server.js",
      "dist/plugin-runtime/runtime.js",
    ]);
    expect(offPathPackagesOnPluginPath(meta, "dist/cli/main.js", "dist/cli/plugin.js")).toEqual([]);
  });

  it("names grpc-js and pino when the plugin reaches them, through a require or a lazy import as well", () => {
    const meta = cli([
      ["dist/plugin-runtime/runtime.js", "import-statement"],
      ["dist/observability/log.js", "dynamic-import"],
    ]);
    meta.inputs["dist/observability/log.js"] = {
      bytes: 1,
      imports: [{ path: PINO, kind: "import-statement" }],
    };
    meta.inputs["dist/plugin-runtime/grpc/server.js"]!.imports.push({ path: GRPC, kind: "require-call" });
    expect(offPathPackagesOnPluginPath(meta, "dist/cli/main.js", "dist/cli/plugin.js").sort()).toEqual([
      `@grpc/grpc-js: ${GRPC}`,
      `pino: ${PINO}`,
    ]);
  });

  it("fails on a module it cannot find rather than passing on a renamed entry", () => {
    expect(() => pluginPathInputs(cli([]), "dist/cli/main.js", "dist/cli/plugin-renamed.js")).toThrow(
      "dist/cli/plugin-renamed.js is not an input",
    );
  });

  it.each([
    ["node_modules/@grpc/grpc-js/build/src/server.js", "@grpc/grpc-js"],
    ["node_modules/pino/lib/tools.js", "pino"],
    ["node_modules/a/node_modules/pino/pino.js", "pino"],
    ["dist/observability/log.js", undefined],
  ])("packageOf(%s) is %s", (input, pkg) => {
    expect(packageOf(input)).toBe(pkg);
  });
});
