// The long-running `dpo plugin` process loads no schema code: zod, yaml and the API's schemas (about 11 MiB
// of its RSS) belong to the short-lived child that reads its config (src/cli/plugin-config-apart.ts). Nor
// grpc-js or pino: its gRPC and its logs are its own (ADR 0008; tools/bundle/plugin-path.ts checks the bundle).
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
      // Dynamic imports load on use: the child's reader and the kubeconfig's YAML parser are such.
      if (imported.kind !== "import-statement" || imported.external || chains.has(imported.path)) continue;
      chains.set(imported.path, [...chains.get(file)!, imported.path]);
      queue.push(imported.path);
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
  ])("reach no $what", async ({ prefix }) => {
    const chains = await staticImports("src/cli/plugin.ts");
    const reached = [...chains.entries()].filter(([file]) => file.startsWith(prefix));
    expect(reached.map(([, chain]) => chain.join(" -> "))).toEqual([]);
  });

  it("still reach the protobuf wire reader and the runtime, so the walk itself follows imports", async () => {
    const chains = await staticImports("src/cli/plugin.ts");
    expect([...chains.keys()].some((f) => f.startsWith("node_modules/@bufbuild/protobuf/"))).toBe(true);
    expect(chains.has("src/plugin-runtime/runtime.ts")).toBe(true);
  });
});
