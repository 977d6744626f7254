// What the `dpo plugin` process can load from the bundle: the modules reachable from the CLI's entry without
// its lazily loaded subcommands, plus everything reachable from the plugin subcommand, lazily loaded parts
// included. bundle.ts fails when a package the plugin must not load (ADR 0008) is among them.
import type { Metafile } from "esbuild";

/** Packages kept off the plugin's path: the plugin serves gRPC on node:http2 and logs without pino. */
export const OFF_PLUGIN_PATH = ["@grpc/grpc-js", "@grpc/proto-loader", "pino"] as const;

/** The package a bundled input belongs to (`@grpc/grpc-js`, `pino`), or undefined for the project's own. */
export function packageOf(input: string): string | undefined {
  // The innermost node_modules: a package nested in another's belongs to itself.
  const m = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\/(?:(?!node_modules\/).)*$/.exec(input);
  return m?.[1];
}

/**
 * The inputs the plugin process can load. `entry` is the CLI's compiled entry and `command` the
 * plugin subcommand's module, as metafile inputs (`dist/cli/main.js`, `dist/cli/plugin.js`). From the
 * entry only static imports count (its subcommands are loaded with import() by name); from the
 * subcommand every import does.
 */
export function pluginPathInputs(metafile: Metafile, entry: string, command: string): Set<string> {
  const reached = new Set<string>();
  reachable(metafile, [entry], false, reached);
  reachable(metafile, [command], true, reached);
  return reached;
}

/** Adds to `reached` the inputs reachable from `starts`, through import() calls only when `followDynamic`. */
function reachable(metafile: Metafile, starts: string[], followDynamic: boolean, reached: Set<string>): void {
  const stack = [...starts];
  while (stack.length > 0) {
    const path = stack.pop()!;
    if (reached.has(path)) continue;
    const input = metafile.inputs[path];
    if (input === undefined) throw new Error(`plugin path: ${path} is not an input of the bundle`);
    reached.add(path);
    for (const imported of input.imports) {
      if (imported.external === true) continue;
      if (imported.kind === "dynamic-import" && !followDynamic) continue;
      stack.push(imported.path);
    }
  }
}

/** `<package>: <first input of it>` for each package of OFF_PLUGIN_PATH the plugin can load. */
export function offPathPackagesOnPluginPath(metafile: Metafile, entry: string, command: string): string[] {
  const found = new Map<string, string>();
  for (const input of pluginPathInputs(metafile, entry, command)) {
    const pkg = packageOf(input);
    if (pkg !== undefined && (OFF_PLUGIN_PATH as readonly string[]).includes(pkg) && !found.has(pkg)) {
      found.set(pkg, input);
    }
  }
  return [...found].map(([pkg, input]) => `${pkg}: ${input}`);
}

/**
 * Modules a device plugin (spec.publish DevicePlugin, the default) loads on demand, never at its start: the
 * DRA runtime and the DRA APIs' generated messages (with import() for a DRA config only), and the backends
 * (the config's own alone, backends/load.ts; index.ts loads all four). Each module loaded stays in the
 * plugin's heap (its source text, functions and objects), so a static import that brings one back onto the
 * device plugin's start fails the bundle.
 */
export const ON_DEMAND_INPUTS = [
  "dist/plugin-runtime/dra/dra-runtime.js",
  "dist/plugin-runtime/proto/gen/dra/",
  "dist/plugin-runtime/proto/gen/dra-health/",
  "dist/plugin-runtime/backends/index.js",
  "dist/plugin-runtime/backends/mock.js",
  "dist/plugin-runtime/backends/devfs.js",
  "dist/plugin-runtime/backends/pci.js",
  "dist/plugin-runtime/backends/nvidia.js",
] as const;

/**
 * The inputs a device plugin loads when it starts: the static imports of the entry and of the plugin
 * subcommand, none of their import() calls (those run only where the plugin takes that path).
 */
export function pluginStartInputs(metafile: Metafile, entry: string, command: string): Set<string> {
  const reached = new Set<string>();
  reachable(metafile, [entry, command], false, reached);
  return reached;
}

/** The on-demand inputs (ON_DEMAND_INPUTS, a prefix each) that a device plugin loads at its start. */
export function onDemandInputsAtPluginStart(metafile: Metafile, entry: string, command: string): string[] {
  return [...pluginStartInputs(metafile, entry, command)]
    .filter((input) => ON_DEMAND_INPUTS.some((prefix) => input.startsWith(prefix)))
    .sort();
}
