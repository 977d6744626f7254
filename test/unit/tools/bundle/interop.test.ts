// The bundle's CommonJS interop objects are made once per module and shared by every file importing it
// (tools/bundle/interop.ts), on esbuild's own output, and the shared object still reads the module live.
import { build } from "esbuild";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import {
  builtinsAsCommonJs,
  copyPropsWithoutReading,
  REQUIRE_BANNER,
  shareInteropObjects,
} from "../../../../tools/bundle/interop.js";

const work = mkdtempSync(join(tmpdir(), "dpo-bundle-interop-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

interface Importers {
  fromA: { count: number; bump(): void; default: unknown };
  fromB: { count: number; default: unknown };
}

/** Two ES modules importing one CommonJS module, bundled with splitting as tools/bundle does, then run. */
async function bundleAndRun(name: string, rewrite: (chunk: string) => string): Promise<Importers> {
  const files: Record<string, string> = {
    "counter.cjs": "exports.count = 1; exports.bump = () => { exports.count++; };",
    "a.mjs": 'import * as counter from "./counter.cjs"; export const fromA = counter;',
    "b.mjs": 'import * as counter from "./counter.cjs"; export const fromB = counter;',
    "main.mjs": 'export { fromA } from "./a.mjs"; export { fromB } from "./b.mjs";',
    "other.mjs": 'export { fromB } from "./b.mjs";',
  };
  const src = join(work, `${name}-src`);
  const out = join(work, `${name}-out`);
  mkdirSync(src, { recursive: true });
  for (const [file, text] of Object.entries(files)) writeFileSync(join(src, file), text);
  const result = await build({
    entryPoints: [join(src, "main.mjs"), join(src, "other.mjs")],
    outdir: out,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    minifyWhitespace: true,
    write: false,
    logLevel: "silent",
  });
  mkdirSync(out, { recursive: true });
  for (const file of result.outputFiles) writeFileSync(file.path, rewrite(file.text));
  return (await import(pathToFileURL(join(out, "main.js")).href)) as Importers;
}

describe("shareInteropObjects", () => {
  it("gives every importer of a CommonJS module the same interop object, which reads the module live", async () => {
    let rewritten = 0;
    const { fromA, fromB } = await bundleAndRun("shared", (chunk) => {
      const shared = shareInteropObjects(chunk);
      if (shared !== undefined) rewritten++;
      return shared ?? chunk;
    });
    expect(rewritten).toBe(1);
    expect(fromA).toBe(fromB);
    expect(fromA.default).toEqual(expect.objectContaining({ count: 1 }));
    fromA.bump();
    expect(fromB.count).toBe(2);
  });

  it("is what makes them one: esbuild alone makes one per importing file", async () => {
    const { fromA, fromB } = await bundleAndRun("plain", (chunk) => chunk);
    expect(fromA).not.toBe(fromB);
    expect(fromA.count).toBe(fromB.count);
  });

  it("leaves chunks that only import the helper alone", () => {
    expect(
      shareInteropObjects('import{__toESM}from"./dpo-X.js";var m=__toESM(require_m(),1);'),
    ).toBeUndefined();
  });

  it.each([
    { name: "a helper of another shape", chunk: "var __toESM=(m)=>m;export{__toESM};" },
    { name: "a helper left unfinished", chunk: "var __toESM=(mod,isNodeMode,target)=>(target" },
  ])("refuses $name, so an esbuild upgrade fails the build", ({ chunk }) => {
    expect(() => shareInteropObjects(chunk)).toThrow(/__toESM/);
  });
});

/**
 * The Node modules a bundled program that imports one name of `node:util` has loaded, run in a process of
 * its own (the test runner's has loaded most of Node already), with each chunk passed through `rewrite`.
 */
async function modulesLoadedByUtilImport(
  name: string,
  rewrite: (chunk: string) => string,
): Promise<string[]> {
  const src = join(work, `${name}-src`);
  const out = join(work, `${name}-out`);
  mkdirSync(src, { recursive: true });
  writeFileSync(
    join(src, "main.mjs"),
    'import { inspect } from "node:util";\nconsole.log(JSON.stringify({ inspect: typeof inspect, loaded: process.moduleLoadList }));',
  );
  const result = await build({
    entryPoints: [join(src, "main.mjs")],
    outdir: out,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    minifyWhitespace: true,
    write: false,
    logLevel: "silent",
    plugins: [builtinsAsCommonJs],
    banner: { js: REQUIRE_BANNER },
  });
  mkdirSync(out, { recursive: true });
  for (const file of result.outputFiles) writeFileSync(file.path, rewrite(file.text));
  const ran = JSON.parse(execFileSync(process.execPath, [join(out, "main.js")], { encoding: "utf8" })) as {
    inspect: string;
    loaded: string[];
  };
  expect(ran.inspect).toBe("function");
  return ran.loaded;
}

describe("copyPropsWithoutReading", () => {
  it("keeps node:util's lazily loaded exports unloaded when a bundle imports from it", async () => {
    let rewritten = 0;
    const loaded = await modulesLoadedByUtilImport("lazy", (chunk) => {
      const copying = copyPropsWithoutReading(chunk);
      if (copying !== undefined) rewritten++;
      return copying ?? chunk;
    });
    expect(rewritten).toBe(1);
    expect(loaded).not.toContain("NativeModule worker_threads");
    expect(loaded).not.toContain("NativeModule internal/util/diff");
  });

  it("is what keeps them unloaded: esbuild's helper reads every export and loads them", async () => {
    const loaded = await modulesLoadedByUtilImport("eager", (chunk) => chunk);
    expect(loaded).toContain("NativeModule worker_threads");
  });

  it("keeps each key's enumerability and reads the module live", async () => {
    const { fromA } = await bundleAndRun("copy", (chunk) => copyPropsWithoutReading(chunk) ?? chunk);
    expect(Object.keys(fromA).sort()).toEqual(["bump", "count", "default"]);
    fromA.bump();
    expect(fromA.count).toBe(2);
  });

  it("refuses a helper of another shape, so an esbuild upgrade fails the build", () => {
    expect(() => copyPropsWithoutReading("var __copyProps=(to,from)=>to;")).toThrow(/__copyProps/);
    expect(copyPropsWithoutReading('import{__toESM}from"./dpo-X.js";')).toBeUndefined();
  });
});

describe("REQUIRE_BANNER", () => {
  it("gives bundled CommonJS Node's built-ins and other packages, and loads no node:module", () => {
    const dir = join(work, "banner");
    mkdirSync(join(dir, "node_modules", "dep"), { recursive: true });
    writeFileSync(join(dir, "node_modules", "dep", "index.js"), "module.exports = 'from dep';");
    writeFileSync(
      join(dir, "main.mjs"),
      `${REQUIRE_BANNER}
const out = { path: typeof require("node:path").join, fs: typeof require("fs").readFileSync };
const wanted = ["NativeModule module", "NativeModule internal/source_map/source_map"];
out.loaded = process.moduleLoadList.filter((m) => wanted.includes(m));
let missing;
try { require("no-such-package"); } catch (error) { missing = error.code; }
console.log(JSON.stringify({ ...out, dep: require("dep"), missing }));`,
    );
    const ran = JSON.parse(
      execFileSync(process.execPath, [join(dir, "main.mjs")], { encoding: "utf8" }),
    ) as Record<string, unknown>;
    expect(ran).toEqual({
      path: "function",
      fs: "function",
      loaded: [],
      dep: "from dep",
      missing: "MODULE_NOT_FOUND",
    });
  });
});
