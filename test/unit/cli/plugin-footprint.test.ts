// The long-running `dpo plugin` process loads no schema code: zod, yaml and the API's schemas (about 11 MiB
// of its RSS) belong to the process that checks its config and then replaces itself with the plugin
// (src/cli/plugin-config-apart.ts). Nor node:child_process (which brings dgram) or node:cluster, which
// server.listen() loads (src/observability/listen.ts listens without it). Nor
// grpc-js or pino: its gRPC and its logs are its own (ADR 0008; tools/bundle/plugin-path.ts checks the bundle).
// Nor, at its start, the DRA runtime and the DRA APIs' messages (imported for a DRA config only), a backend
// (the config's own is imported, backends/load.ts) or node:v8 (the process metrics load it when first
// scraped): each module loaded stays in an idle plugin's RSS.
import { build, type Metafile } from "esbuild";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const repo = join(import.meta.dirname, "..", "..", "..");

/** Each input the entry reaches through static imports, with the chain of files that reaches it. */
async function staticImports(entry: string): Promise<Map<string, string[]>> {
  const result = await build({
    entryPoints: [join(repo, entry)],
    absWorkingDir: repo,
    bundle: true,
    write: false,
    metafile: true,
    platform: "node",
    format: "esm",
    external: ["@grpc/proto-loader"],
    logLevel: "silent",
  });
  const inputs: Metafile["inputs"] = result.metafile.inputs;
  const chains = new Map<string, string[]>([[entry, [entry]]]);
  const queue = [entry];
  for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
    for (const imported of inputs[file]?.imports ?? []) {
      // Dynamic imports load on use: the config's reader and the kubeconfig's YAML parser are such.
      if (imported.kind !== "import-statement" || chains.has(imported.path)) continue;
      chains.set(imported.path, [...chains.get(file)!, imported.path]);
      // Node's modules and the packages left out of the bundle are named, not followed.
      if (!imported.external) queue.push(imported.path);
    }
  }
  return chains;
}

describe("the plugin process's static imports", () => {
  it.each([
    { what: "zod", prefix: "node_modules/zod/" },
    { what: "yaml", prefix: "node_modules/yaml/" },
    { what: "the config schemas' validation", prefix: "src/api/validate.ts" },
    { what: "the v1beta1 spec schemas", prefix: "src/api/v1beta1/spec.ts" },
    { what: "grpc-js", prefix: "node_modules/@grpc/" },
    { what: "pino", prefix: "node_modules/pino/" },
    { what: "the DRA runtime", prefix: "src/plugin-runtime/dra/dra-runtime.ts" },
    { what: "the DRA plugin API's messages", prefix: "src/plugin-runtime/proto/gen/dra/" },
    { what: "the DRA health API's messages", prefix: "src/plugin-runtime/proto/gen/dra-health/" },
    { what: "node:v8", prefix: "node:v8" },
    { what: "node:child_process", prefix: "node:child_process" },
    { what: "node:cluster", prefix: "node:cluster" },
    { what: "the backends' index, which loads all four", prefix: "src/plugin-runtime/backends/index.ts" },
    { what: "the NVIDIA backend", prefix: "src/plugin-runtime/backends/nvidia" },
    { what: "the DevFS backend", prefix: "src/plugin-runtime/backends/devfs" },
    { what: "the PCI backend", prefix: "src/plugin-runtime/backends/pci.ts" },
    { what: "the Mock backend", prefix: "src/plugin-runtime/backends/mock.ts" },
  ])("reach no $what", async ({ prefix }) => {
    const chains = await staticImports("src/cli/plugin.ts");
    const reached = [...chains.entries()].filter(([file]) => file.startsWith(prefix));
    expect(reached.map(([, chain]) => chain.join(" -> "))).toEqual([]);
  });

  it("still reach the protobuf wire reader and the runtime, so the walk itself follows imports", async () => {
    const chains = await staticImports("src/cli/plugin.ts");
    expect([...chains.keys()].some((f) => f.startsWith("node_modules/@bufbuild/protobuf/"))).toBe(true);
    expect(chains.has("src/plugin-runtime/runtime-core.ts")).toBe(true);
    expect(chains.has("node:perf_hooks")).toBe(true);
  });
});
