// The plugin's config read and checked apart from the long-running plugin, so that it never holds the
// schemas: zod, yaml and the API's schemas hold about 11 MiB of RSS. The first process reads and checks
// the config, then replaces itself (execve: the same pid, the same flags and environment) with a fresh
// one that takes the checked config from its environment and never loads them; an invalid config is
// refused by the first. Nothing is started beside the plugin: a child process would load `child_process`
// (and `dgram` with it) into the plugin for good.
import type { PluginConfigRead } from "../contract/plugin-config-read.js";

/**
 * The environment variable through which the first process hands the second the config it checked: its
 * text and what reading it made. The second removes it from its environment before anything else runs.
 * A config cannot set it: `DPO_` names are the operator's, refused in spec.plugin.env at admission and by
 * `dpo validate` (src/api/v1beta1/plugin-pod.ts), so the second never takes a read the first did not make.
 */
export const CHECKED_CONFIG_ENV = "DPO_INTERNAL_CHECKED_CONFIG";

/** The largest handover: Linux refuses an environment string over 128 KiB (MAX_ARG_STRLEN) with E2BIG. */
export const MAX_HANDOVER_BYTES = 96 * 1024;

let cliEntry: string | undefined;

/**
 * The dpo CLI's own entry script (dist/dpo.js in the image), set by main.ts: only a process started as the
 * CLI can start itself again. Anyone else (a test calling runPluginCommand) reads the config in process.
 */
export function setCliEntry(entry: string | undefined): void {
  cliEntry = entry;
}

/** A handed-over read, when it is a PluginConfigRead; throws naming what is wrong otherwise. */
export function parsePluginConfigRead(read: unknown): PluginConfigRead {
  if (typeof read !== "object" || read === null) throw new Error("the handover holds no object");
  const { ok } = read as { ok?: unknown };
  if (ok === true && typeof (read as { value?: unknown }).value === "object") {
    if (Array.isArray((read as { ignored?: unknown }).ignored)) return read as PluginConfigRead;
  }
  if (ok === false && Array.isArray((read as { errors?: unknown }).errors)) return read as PluginConfigRead;
  throw new Error("the handover holds neither a config nor its errors");
}

/**
 * Takes the handover out of `env` (it is gone afterwards, whatever it held) and returns its read when it
 * was made of `text`: a config file changed between the two processes is read again. Throws when the
 * variable holds something that is not a handover.
 */
export function takeHandover(env: NodeJS.ProcessEnv, text: string): PluginConfigRead | undefined {
  const handed = env[CHECKED_CONFIG_ENV];
  delete env[CHECKED_CONFIG_ENV];
  if (handed === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(handed);
  } catch (err) {
    throw new Error(`${CHECKED_CONFIG_ENV} is not JSON: ${(err as Error).message}`, { cause: err });
  }
  const { text: handedText, read } = (parsed ?? {}) as { text?: unknown; read?: unknown };
  if (typeof handedText !== "string") throw new Error(`${CHECKED_CONFIG_ENV} names no config text`);
  return handedText === text ? parsePluginConfigRead(read) : undefined;
}

/**
 * The environment for the fresh process: `env` and the handover of `read`, made of `text`. A string
 * saying why not when the handover is too large for one environment variable.
 */
export function handoverEnv(
  env: NodeJS.ProcessEnv,
  text: string,
  read: PluginConfigRead,
): Record<string, string> | string {
  const handover = JSON.stringify({ text, read });
  const bytes = Buffer.byteLength(handover);
  if (bytes > MAX_HANDOVER_BYTES) {
    return `the config and its reading take ${bytes} bytes, more than the ${MAX_HANDOVER_BYTES} one environment variable may`;
  }
  const next: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) if (value !== undefined) next[name] = value;
  next[CHECKED_CONFIG_ENV] = handover;
  return next;
}

/**
 * readPluginConfig(text), and for a valid config in the dpo CLI, the process replaced by a fresh one that
 * takes the read from the handover (this call then does not return: the fresh process calls it again and
 * gets the read). Where the process cannot be replaced (no execve in this runtime, a config too large to
 * hand over), the plugin runs with the schemas in its memory, which is costlier but still correct, and
 * `warn` says why.
 */
export async function readPluginConfigApart(
  text: string,
  warn: (message: string) => void,
): Promise<PluginConfigRead> {
  const handed = takeHandover(process.env, text);
  if (handed !== undefined) return handed;
  const { readPluginConfig } = await import("../contract/plugin-config-read.js");
  const read = readPluginConfig(text);
  if (!read.ok || cliEntry === undefined) return read;
  if (typeof process.execve !== "function") {
    warn("this Node.js has no process.execve; the plugin keeps the config's schemas loaded");
    return read;
  }
  const env = handoverEnv(process.env, text, read);
  if (typeof env === "string") {
    warn(`${env}; the plugin keeps the config's schemas loaded`);
    return read;
  }
  // Node aborts the process should execve fail; its own binary and entry script are there to run.
  process.execve(
    process.execPath,
    [process.execPath, ...process.execArgv, cliEntry, ...process.argv.slice(2)],
    env,
  );
  return read;
}
