// Bundles the compiled CLI (dist/cli/main.js) into dist/dpo.js plus lazily loaded chunks: one file per
// subcommand instead of some 300 modules makes `dpo plugin` start faster and hold less memory.
import { build } from "esbuild";
import { join } from "node:path";

const repo = join(import.meta.dirname, "..", "..");

await build({
  entryPoints: { dpo: join(repo, "dist", "cli", "main.js") },
  outdir: join(repo, "dist"),
  // Next to dist/version.js, so the bundle finds package.json and build-info.json where it does.
  chunkNames: "dpo-[hash]",
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node24",
  // Shorter source and fewer objects; names stay for stack traces and `instanceof` messages.
  minifyWhitespace: true,
  minifySyntax: true,
  keepNames: true,
  sourcemap: "linked",
  external: [
    // The operator gains nothing from bundling, and client-node resolves optional modules at run time.
    "@kubernetes/client-node",
    // Loaded by grpc-js only for channelz, which dpo does not enable.
    "@grpc/proto-loader",
  ],
  // Bundled CommonJS packages (grpc-js, pino) call require() for Node's built-in modules.
  banner: {
    js: "import { createRequire as __dpoCreateRequire } from 'node:module'; const require = __dpoCreateRequire(import.meta.url);",
  },
  logLevel: "warning",
});
