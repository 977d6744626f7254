// What must stop before the cluster's own processes, recorded in its state directory by whatever started it
// (a real node: tools/real-node). The cluster runs each recorded step when it stops, newest first, without
// importing the code that recorded it: a real node builds on the cluster, never the other way round.
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Logger } from "pino";

const HOOKS_FILE = "stop-hooks.json";

/** A module that exports `stopBeforeCluster(stateDir, log)`. */
export interface StopHookModule {
  stopBeforeCluster(stateDir: string, log?: Logger): Promise<void>;
}

async function recorded(stateDir: string): Promise<string[]> {
  const path = join(stateDir, HOOKS_FILE);
  if (!existsSync(path)) return [];
  const parsed: unknown = JSON.parse(await readFile(path, "utf8"));
  if (!Array.isArray(parsed) || !parsed.every((p) => typeof p === "string"))
    throw new Error(`${path}: expected a JSON list of module paths`);
  return parsed;
}

/** Records `modulePath` (an absolute path) to run when the cluster in `stateDir` stops; once per path. */
export async function recordStopHook(stateDir: string, modulePath: string): Promise<void> {
  const hooks = await recorded(stateDir);
  if (hooks.includes(modulePath)) return;
  await writeFile(join(stateDir, HOOKS_FILE), `${JSON.stringify([...hooks, modulePath], null, 2)}\n`);
}

/** Runs every recorded step, newest first; a failing one is logged and the rest still run. */
export async function runStopHooks(stateDir: string, log?: Logger): Promise<void> {
  for (const modulePath of (await recorded(stateDir)).reverse()) {
    try {
      const hook = (await import(pathToFileURL(modulePath).href)) as Partial<StopHookModule>;
      if (typeof hook.stopBeforeCluster !== "function")
        throw new Error(`${modulePath} exports no stopBeforeCluster(stateDir, log)`);
      await hook.stopBeforeCluster(stateDir, log);
    } catch (error) {
      log?.error({ err: error, hook: modulePath }, "a recorded stop step failed");
    }
  }
}
