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
  const visit = (start: string, followDynamic: boolean): void => {
    const stack = [start];
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
  };
  visit(entry, false);
  visit(command, true);
  return reached;
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
