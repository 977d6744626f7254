// One interop object per CommonJS module in the bundle, instead of one per file that imports it.
//
// Where an ES module imports a CommonJS one (dpo's own code importing a Node built-in, which the bundle
// loads as CommonJS, or grpc-js), esbuild's runtime helper `__toESM` wraps the module's exports in a
// new object with a getter closure for each of their keys, and it does so again in every importing file:
// some 75 copies of `node:fs`, `node:path`, `node:util` and the like in the plugin, 0.5-0.7 MiB of its
// idle RSS. A copy is only ever read (import bindings are read-only) and its getters read the module's
// exports live, so every importer can share the first one made. The keys are those the module's exports
// had when first imported; CommonJS modules in the bundle are complete by then, as an ES module's
// imports are evaluated before it. The bundle loads Node's built-ins as CommonJS (builtinsAsCommonJs).
import type { Plugin } from "esbuild";
import { builtinModules } from "node:module";

/**
 * Node's ESM view of a built-in module reads every export once, lazy getters included: `node:http`'s
 * `WebSocket` & co. load Node's own copy of undici (35 ms of a 210 ms plugin start in a CPU profile),
 * `node:util`'s `TextDecoder` the encoding module, `node:crypto`'s `webcrypto` the Web Crypto classes,
 * on every start, for exports dpo never uses. Imported as CommonJS (`require`, which leaves the getters
 * alone) they cost nothing; named imports keep working through esbuild's interop.
 */
const builtins = new Set(builtinModules.flatMap((name) => [name, `node:${name}`]));
export const builtinsAsCommonJs: Plugin = {
  name: "builtins-as-commonjs",
  setup(bundle) {
    bundle.onResolve({ filter: /^[a-z_:/]+$/ }, (args) => {
      if (!builtins.has(args.path)) return undefined;
      return args.namespace === "builtin-cjs"
        ? { path: args.path, external: true }
        : { path: args.path.replace(/^node:/, ""), namespace: "builtin-cjs" };
    });
    bundle.onLoad({ filter: /.*/, namespace: "builtin-cjs" }, (args) => ({
      contents: `module.exports = require("node:${args.path}");`,
      loader: "js",
    }));
  },
};

/**
 * The `require` of every chunk, for the CommonJS code the bundle holds (builtinsAsCommonJs, grpc-js, pino):
 * Node's built-in modules through `process.getBuiltinModule`, which loads nothing else, and any other module
 * (ws's optional addons, grpc-js's external proto-loader, none on a plugin's path) through `createRequire`.
 * A `createRequire` made at the top of each chunk would load `node:module`, and with it Node's source-map
 * support, into every plugin.
 */
export const REQUIRE_BANNER =
  'const require = (id) => process.getBuiltinModule(id) ?? process.getBuiltinModule("node:module").createRequire(import.meta.url)(id);';

/** The runtime helper as esbuild (0.28) writes it into the bundle's shared chunk. */
const HELPER = "__toESM=(mod,isNodeMode,target)=>";

/** Where the statement starting at `from` ends: just past its `;` outside parentheses, braces and strings. */
function statementEnd(text: string, from: number): number | undefined {
  let depth = 0;
  let quote: string | undefined;
  for (let i = from; i < text.length; i++) {
    const c = text[i]!;
    if (quote !== undefined) {
      if (c === "\\") i++;
      else if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'" || c === "`") quote = c;
    else if (c === "(" || c === "{" || c === "[") depth++;
    else if (c === ")" || c === "}" || c === "]") depth--;
    else if (c === ";" && depth === 0) return i + 1;
  }
  return undefined;
}

/**
 * Makes esbuild's `__toESM`, in the chunk that defines it, make one object per module and import mode
 * and hand that out again: the statement that defines it is followed by one that wraps it, so every call
 * after it, in this chunk and the others, shares. Undefined for a chunk that does not define the helper
 * (those that only import it); throws for one that defines it in a shape this does not know, so an
 * esbuild upgrade that changes it fails the build.
 */
export function shareInteropObjects(chunk: string): string | undefined {
  if (!/\b__toESM=/.test(chunk)) return undefined;
  const at = chunk.indexOf(HELPER);
  const end = at < 0 ? undefined : statementEnd(chunk, at);
  if (end === undefined) {
    throw new Error(
      `bundle: esbuild's __toESM helper is no longer '${HELPER}...;'; check tools/bundle/interop.ts`,
    );
  }
  const shared =
    '__toESM=((toESM,made)=>(mod,isNodeMode)=>{if(mod===null||typeof mod!=="object"&&typeof mod!=="function")return toESM(mod,isNodeMode);' +
    "let byMod=made[isNodeMode?1:0],esm=byMod.get(mod);return esm===void 0&&byMod.set(mod,esm=toESM(mod,isNodeMode)),esm})" +
    "(__toESM,[new WeakMap,new WeakMap]);";
  return chunk.slice(0, end) + shared + chunk.slice(end);
}

/** How esbuild's `__copyProps` (0.28) reads whether each key of a CommonJS module's exports is enumerable. */
const ENUMERABLE_READ = "enumerable:!(desc=__getOwnPropDesc(from,key))||desc.enumerable";

/**
 * Makes esbuild's `__copyProps` tell whether a key is enumerable without reading its value. The helper
 * asks `Object.getOwnPropertyDescriptor` for every key of a module's exports, and for `node:util` that
 * evaluates its lazily loaded exports: `parseArgs`, `diff` and `setTraceSigInt`, which load
 * `worker_threads`, the worker messaging and `internal/util/diff` into every process that imports
 * anything from `node:util` (0.5 MiB of the plugin's RSS). `propertyIsEnumerable` answers the same for an
 * own key and leaves the value alone. Undefined for a chunk that does not define the helper; throws for one
 * that defines it in another shape, so an esbuild upgrade that changes it fails the build.
 */
export function copyPropsWithoutReading(chunk: string): string | undefined {
  if (!/\b__copyProps=/.test(chunk)) return undefined;
  const at = chunk.indexOf(ENUMERABLE_READ);
  if (at < 0 || chunk.indexOf(ENUMERABLE_READ, at + 1) >= 0) {
    throw new Error(
      `bundle: esbuild's __copyProps no longer reads '${ENUMERABLE_READ}' once; check tools/bundle/interop.ts`,
    );
  }
  return (
    chunk.slice(0, at) +
    "enumerable:Object.prototype.propertyIsEnumerable.call(from,key)" +
    chunk.slice(at + ENUMERABLE_READ.length)
  );
}
