// Runs a benchmarked process under a memory limit, as its container would run in a cluster: Node sizes
// its heap from the cgroup's limit (process.constrainedMemory), so a process measured without one lets
// garbage pile up to a heap sized from the whole machine and reports an RSS no pod would show.
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { QUANTITY_SUFFIX_FACTOR } from "../src/api/quantity.js";

const CGROUP_ROOT = "/sys/fs/cgroup";

/** Bytes of a Kubernetes memory quantity with a binary suffix or none (`256Mi`, `1Gi`, `1048576`). Pure. */
export function memoryBytes(quantity: string): number {
  const match = /^(\d+)(Ki|Mi|Gi)?$/.exec(quantity);
  if (match === null) throw new Error(`memory quantity ${JSON.stringify(quantity)}: want <digits>[Ki|Mi|Gi]`);
  return Number(match[1]) * (match[2] === undefined ? 1 : QUANTITY_SUFFIX_FACTOR[match[2]]!);
}

/** The memory limit of the first container of a Deployment manifest (YAML text), e.g. `256Mi`. Pure. */
export function deploymentMemoryLimit(manifest: string): string | undefined {
  const deployment = parse(manifest) as {
    spec?: { template?: { spec?: { containers?: { resources?: { limits?: { memory?: string } } }[] } } };
  };
  return deployment.spec?.template?.spec?.containers?.[0]?.resources?.limits?.memory;
}

/**
 * The Node flags the first container of a Deployment manifest starts its program with: the words of its
 * `command` between `node` and the script (`node --max-semi-space-size=2 /app/dist/dpo.js` gives
 * `--max-semi-space-size=2`); none when the command does not run `node`. Pure.
 */
export function deploymentNodeFlags(manifest: string): string[] {
  const deployment = parse(manifest) as {
    spec?: { template?: { spec?: { containers?: { command?: string[] }[] } } };
  };
  const command = deployment.spec?.template?.spec?.containers?.[0]?.command ?? [];
  if (command[0] !== "node") return [];
  return command.slice(1).filter((word) => word.startsWith("-"));
}

/**
 * The environment variables with literal values of the first container of a Deployment manifest that
 * tune the runtime rather than dpo (all but `DPO_*`), e.g. glibc's `MALLOC_ARENA_MAX`. Pure.
 */
export function deploymentRuntimeEnv(manifest: string): Record<string, string> {
  const deployment = parse(manifest) as {
    spec?: { template?: { spec?: { containers?: { env?: { name: string; value?: string }[] }[] } } };
  };
  const env: Record<string, string> = {};
  for (const { name, value } of deployment.spec?.template?.spec?.containers?.[0]?.env ?? []) {
    if (value !== undefined && !name.startsWith("DPO_")) env[name] = value;
  }
  return env;
}

export interface MemoryCgroup {
  /** The cgroup directory: a process writes its pid to `cgroup.procs` here to join it. */
  readonly dir: string;
  readonly limitBytes: number;
  /** How many processes the kernel killed for going over the limit. */
  oomKills(): number;
  /** Removes the cgroup (once its processes are gone). */
  remove(): void;
}

/**
 * A new memory cgroup limited to `limitBytes` (cgroup v2 `memory.max`, or v1 `memory.limit_in_bytes`),
 * or a reason why this machine gives none (not root, no memory controller, read-only hierarchy).
 */
export function createMemoryCgroup(name: string, limitBytes: number): MemoryCgroup | { reason: string } {
  const v2 = existsSync(join(CGROUP_ROOT, "cgroup.controllers"));
  const parent = v2 ? CGROUP_ROOT : join(CGROUP_ROOT, "memory");
  if (v2 && !readFileSync(join(CGROUP_ROOT, "cgroup.controllers"), "utf8").split(/\s+/).includes("memory"))
    return { reason: "the cgroup v2 hierarchy has no memory controller" };
  if (!v2 && !existsSync(join(parent, "memory.limit_in_bytes")))
    return { reason: "no cgroup v1 memory controller" };
  const dir = join(parent, name);
  try {
    mkdirSync(dir);
    writeFileSync(join(dir, v2 ? "memory.max" : "memory.limit_in_bytes"), String(limitBytes));
  } catch (err) {
    return { reason: `cannot make ${dir}: ${(err as Error).message}` };
  }
  return {
    dir,
    limitBytes,
    oomKills: () => {
      const file = join(dir, v2 ? "memory.events" : "memory.oom_control");
      return Number(/oom_kill (\d+)/.exec(readFileSync(file, "utf8"))?.[1] ?? 0);
    },
    remove: () => {
      try {
        rmdirSync(dir);
      } catch {
        // Still busy (a process not reaped yet): left for the machine's next cleanup.
      }
    },
  };
}

/**
 * `command` and `args` wrapped so the process joins `cgroup` before it starts (exec keeps the pid):
 * Node reads its memory limit once, at start-up.
 */
export function inCgroup(cgroup: MemoryCgroup, command: string, args: readonly string[]): [string, string[]] {
  return ["sh", ["-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgroup.dir, command, ...args]];
}
