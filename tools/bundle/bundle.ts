// Bundles the compiled CLI (dist/cli/main.js) into dist/dpo.js plus lazily loaded chunks: one file per
// subcommand instead of some 300 modules makes `dpo plugin` start faster and hold less memory.
import { build, type Plugin } from "esbuild";
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import {
  builtinsAsCommonJs,
  copyPropsWithoutReading,
  REQUIRE_BANNER,
  shareInteropObjects,
} from "./interop.js";
import { offPathPackagesOnPluginPath, onDemandInputsAtPluginStart } from "./plugin-path.js";

const repo = join(import.meta.dirname, "..", "..");

/**
 * pino's transports run in worker threads: its lib/transport.js loads thread-stream and with it Node's
 * worker_threads, about 1 MiB of every plugin's RSS, though dpo only ever writes to stdout. In the bundle
 * that module is a stub that says so, should a transport ever be configured.
 */
const pinoWithoutTransports: Plugin = {
  name: "pino-without-transports",
  setup(bundle) {
    bundle.onLoad({ filter: /[\\/]pino[\\/]lib[\\/]transport\.js$/ }, () => ({
      contents:
        'module.exports = function transport() { throw new Error("pino transports are not in the dpo bundle: dpo logs to stdout"); };',
      loader: "js",
    }));
  },
};

const result = await build({
  entryPoints: { dpo: join(repo, "dist", "cli", "main.js") },
  outdir: join(repo, "dist"),
  // Next to dist/version.js, so the bundle finds package.json and build-info.json where it does.
  chunkNames: "dpo-[hash]",
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node24",
  // Shorter source and fewer objects; names stay for stack traces and `instanceof` messages. Identifiers
  // are not minified: 0.4 MiB of the plugin's RSS is not worth stack traces of one-letter names.
  minifyWhitespace: true,
  minifySyntax: true,
  keepNames: true,
  sourcemap: "linked",
  // @kubernetes/client-node is bundled too: loaded from node_modules it brings every generated API client
  // and model (about 20 MB of source V8 keeps, 26 MB of heap and 87 MB of RSS in an operator that
  // uses a few of them); bundled, esbuild keeps what dpo reaches, 2 MB.
  external: [
    // Loaded by grpc-js only for channelz, which dpo does not enable.
    "@grpc/proto-loader",
  ],
  metafile: true,
  plugins: [builtinsAsCommonJs, pinoWithoutTransports],
  // Bundled CommonJS packages (grpc-js, pino) call require() for Node's built-in modules.
  banner: { js: REQUIRE_BANNER },
  logLevel: "warning",
});

// One interop object per CommonJS module, shared by the files that import it, each made without reading
// the module's values (see interop.ts).
const helperChunks: string[] = [];
const copyChunks: string[] = [];
for (const output of Object.keys(result.metafile.outputs)) {
  if (!output.endsWith(".js")) continue;
  const chunk = readFileSync(join(repo, output), "utf8");
  const shared = shareInteropObjects(chunk);
  const copying = copyPropsWithoutReading(shared ?? chunk);
  if (shared !== undefined) helperChunks.push(output);
  if (copying !== undefined) copyChunks.push(output);
  if (shared !== undefined || copying !== undefined) writeFileSync(join(repo, output), copying ?? shared!);
}
if (helperChunks.length === 0) throw new Error("bundle: no chunk defines esbuild's __toESM helper");
if (copyChunks.length === 0) throw new Error("bundle: no chunk defines esbuild's __copyProps helper");

// Chunks of earlier builds (their names are content hashes) would otherwise pile up in dist/ and in images.
const written = new Set(Object.keys(result.metafile.outputs).map((output) => basename(output)));
for (const file of readdirSync(join(repo, "dist"))) {
  if (/^dpo-[A-Z0-9]+\.js(\.map)?$/.test(file) && !written.has(file)) rmSync(join(repo, "dist", file));
}

// The plugin process must not load grpc-js or pino (ADR 0008): its gRPC is its own on node:http2, its
// logger writes the same lines without pino. A change that brings either back onto its path fails here.
const offPath = offPathPackagesOnPluginPath(result.metafile, "dist/cli/main.js", "dist/cli/plugin.js");
if (offPath.length > 0) {
  throw new Error(
    `bundle: the plugin's path loads packages kept off it (ADR 0008):\n  ${offPath.join("\n  ")}`,
  );
}

// A device plugin loads the DRA runtime and the DRA APIs' messages only for a DRA config, and only its
// config's backend (import() each); a static import that loads them at every plugin's start fails here
// (tools/bundle/plugin-path.ts, ON_DEMAND_INPUTS; docs/benchmarks.md, bench-plugin).
const atStart = onDemandInputsAtPluginStart(result.metafile, "dist/cli/main.js", "dist/cli/plugin.js");
if (atStart.length > 0) {
  throw new Error(
    `bundle: a device plugin's start loads what it loads on demand only:\n  ${atStart.join("\n  ")}`,
  );
}
