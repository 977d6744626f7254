// The plugin's config read and checked in a short-lived child process, so the long-running plugin never
// loads the schemas: zod, yaml and the API's schemas hold about 11 MiB of a plugin's 69 MiB idle RSS.
import { spawn } from "node:child_process";
import type { PluginConfigRead } from "../contract/plugin-config-read.js";

/** The hidden `dpo` command the child runs: the config's text on stdin, its PluginConfigRead as JSON out. */
export const READ_PLUGIN_CONFIG_COMMAND = "__read-plugin-config";

let cliEntry: string | undefined;

/**
 * The dpo CLI's own entry script (dist/dpo.js in the image), set by main.ts: only a process started as the
 * CLI can start itself again to read a config. Anyone else (a test calling runPluginCommand) reads in process.
 */
export function setCliEntry(entry: string | undefined): void {
  cliEntry = entry;
}

/** `dpo __read-plugin-config`: reads the text on stdin, writes what readPluginConfig makes of it. */
export async function runReadPluginConfigCommand(): Promise<number> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const { readPluginConfig } = await import("../contract/plugin-config-read.js");
  process.stdout.write(JSON.stringify(readPluginConfig(Buffer.concat(chunks).toString("utf8"))));
  return 0;
}

/** What the child printed, when it is a PluginConfigRead; throws naming what is wrong otherwise. */
export function parsePluginConfigRead(output: string): PluginConfigRead {
  const read = JSON.parse(output) as unknown;
  if (typeof read !== "object" || read === null) throw new Error("the reader printed no object");
  const { ok } = read as { ok?: unknown };
  if (ok === true && typeof (read as { value?: unknown }).value === "object") {
    if (Array.isArray((read as { ignored?: unknown }).ignored)) return read as PluginConfigRead;
  }
  if (ok === false && Array.isArray((read as { errors?: unknown }).errors)) return read as PluginConfigRead;
  throw new Error("the reader printed neither a config nor its errors");
}

function readInChild(entry: string, text: string): Promise<PluginConfigRead> {
  return new Promise((resolve, reject) => {
    // The same runtime and flags (the image's V8 flags, a loader) and environment (NODE_COMPILE_CACHE).
    const child = spawn(process.execPath, [...process.execArgv, entry, READ_PLUGIN_CONFIG_COMMAND], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (chunk: Buffer) => out.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => err.push(chunk));
    child.once("error", reject);
    child.once("close", (code, signal) => {
      if (code !== 0) {
        const stderr = Buffer.concat(err).toString("utf8").trim();
        reject(new Error(`exited with code ${code}, signal ${signal}${stderr ? `: ${stderr}` : ""}`));
        return;
      }
      try {
        resolve(parsePluginConfigRead(Buffer.concat(out).toString("utf8")));
      } catch (e) {
        reject(e instanceof Error ? e : new Error(String(e)));
      }
    });
    // A reader that ended early closes the pipe; its exit says why.
    child.stdin.on("error", () => undefined);
    child.stdin.end(text);
  });
}

/**
 * readPluginConfig(text), in a child process when this is the dpo CLI. Should the child fail (no process
 * can be started, say), the config is read here: the plugin then runs with the schemas in its memory,
 * which is costlier but still correct, and `warn` says why.
 */
export async function readPluginConfigApart(
  text: string,
  warn: (message: string) => void,
): Promise<PluginConfigRead> {
  if (cliEntry !== undefined) {
    try {
      return await readInChild(cliEntry, text);
    } catch (err) {
      warn(`cannot check the config in a child process (${(err as Error).message}); checking it here`);
    }
  }
  const { readPluginConfig } = await import("../contract/plugin-config-read.js");
  return readPluginConfig(text);
}
