// The stop steps a real node records in the cluster's state directory: the cluster runs them, newest first,
// before its own processes, without importing the code that recorded them.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { recordStopHook, runStopHooks } from "../../../../tools/cluster/stop-hooks.js";

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "dpo-stop-hooks-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A hook module that appends its name to `ran.log` in the state directory, or throws. */
async function hook(name: string, body = `await appendFile(join(stateDir, "ran.log"), "${name}\\n");`) {
  const path = join(dir, `${name}.mjs`);
  await writeFile(
    path,
    [
      'import { appendFile } from "node:fs/promises";',
      'import { join } from "node:path";',
      `export async function stopBeforeCluster(stateDir) { ${body} }`,
      "",
    ].join("\n"),
  );
  return path;
}

async function ran(): Promise<string[]> {
  return (await readFile(join(dir, "ran.log"), "utf8").catch(() => "")).split("\n").filter(Boolean);
}

describe("stop hooks", () => {
  it("run newest first, each once however often it was recorded", async () => {
    const first = await hook("first");
    const second = await hook("second");
    await recordStopHook(dir, first);
    await recordStopHook(dir, second);
    await recordStopHook(dir, first);
    await runStopHooks(dir);
    expect(await ran()).toEqual(["second", "first"]);
  });

  it("do nothing where none was recorded", async () => {
    await runStopHooks(dir);
    expect(await ran()).toEqual([]);
  });

  it("log a failing step and a module without stopBeforeCluster, and still run the rest", async () => {
    const good = await hook("good");
    const bad = await hook("bad", 'throw new Error("containerd did not answer");');
    const none = join(dir, "none.mjs");
    await writeFile(none, "export const nothing = 1;\n");
    for (const path of [good, bad, none]) await recordStopHook(dir, path);
    const lines: string[] = [];
    const log = pino({ level: "error" }, { write: (line: string) => void lines.push(line) });
    await runStopHooks(dir, log);
    expect(await ran()).toEqual(["good"]);
    expect(lines.join("")).toContain("containerd did not answer");
    expect(lines.join("")).toContain("exports no stopBeforeCluster");
  });

  it("refuse a state file that is not a list of paths, naming it", async () => {
    await writeFile(join(dir, "stop-hooks.json"), '{"kubelet": true}\n');
    await expect(runStopHooks(dir)).rejects.toThrow(/stop-hooks\.json: expected a JSON list of module paths/);
  });
});
