// Starts control-plane processes with logs in the state directory, records their pids, and stops exactly those.
import { spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { waitFor } from "./wait.js";

export interface RecordedProcess {
  name: string;
  pid: number;
  /** argv[0] at start; checked before signalling so a reused pid is never touched. */
  executable: string;
  log: string;
  /** Arguments and extra environment at start, so a component can be restarted as it was. */
  args?: string[];
  env?: Record<string, string>;
  /** A network namespace (a path such as /run/netns/NAME) the process was started in, through nsenter. */
  netns?: string;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface RunningProcess extends RecordedProcess {
  /** Settles when the process exits, whoever stopped it. */
  exited: Promise<ExitInfo>;
}

export interface SpawnRequest {
  name: string;
  executable: string;
  args: string[];
  env?: Record<string, string>;
  /** Own process group, not waited for by this process: for processes that outlive the CLI. */
  detached: boolean;
  /**
   * Start it in this network namespace (a path such as /run/netns/NAME). nsenter enters only the network
   * namespace, so mounts stay shared with the host (unlike `ip netns exec`), and then execs the executable,
   * which keeps the recorded pid and command line.
   */
  netns?: string;
}

const PROCESSES_FILE = "processes.json";

export function processesFile(stateDir: string): string {
  return join(stateDir, PROCESSES_FILE);
}

export function logFile(stateDir: string, name: string): string {
  return join(stateDir, "logs", `${name}.log`);
}

/** Appends to the record before returning, so a failure later in startup can still be cleaned up. */
export async function spawnRecorded(stateDir: string, request: SpawnRequest): Promise<RunningProcess> {
  const log = logFile(stateDir, request.name);
  const out = openSync(log, "a");
  let child;
  try {
    const [command, args] =
      request.netns === undefined
        ? [request.executable, request.args]
        : ["nsenter", [`--net=${request.netns}`, "--", request.executable, ...request.args]];
    child = spawn(command, args, {
      cwd: stateDir,
      env: { ...process.env, ...request.env },
      stdio: ["ignore", out, out],
      detached: request.detached,
    });
  } finally {
    closeSync(out);
  }
  const exited = new Promise<ExitInfo>((resolve) => {
    child.once("exit", (code, signal) => resolve({ code, signal }));
  });
  const spawned = await new Promise<number>((resolve, reject) => {
    child.once("spawn", () => resolve(child.pid ?? -1));
    child.once("error", (error) => reject(new Error(`cannot start ${request.name}: ${error.message}`)));
  });
  if (request.detached) child.unref();
  const recorded: RecordedProcess = {
    name: request.name,
    pid: spawned,
    executable: request.executable,
    log,
    args: request.args,
    ...(request.env ? { env: request.env } : {}),
    ...(request.netns ? { netns: request.netns } : {}),
  };
  await writeRecord(stateDir, [...(await readRecordedProcesses(stateDir)), recorded]);
  return { ...recorded, exited };
}

export async function readRecordedProcesses(stateDir: string): Promise<RecordedProcess[]> {
  let text: string;
  try {
    text = await readFile(processesFile(stateDir), "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
  return JSON.parse(text) as RecordedProcess[];
}

async function writeRecord(stateDir: string, processes: RecordedProcess[]): Promise<void> {
  const target = processesFile(stateDir);
  await writeFile(`${target}.tmp`, `${JSON.stringify(processes, null, 2)}\n`);
  await rename(`${target}.tmp`, target);
}

/** True while `pid` is alive and still runs the recorded executable. */
export async function isRecordedProcessAlive(recorded: RecordedProcess): Promise<boolean> {
  try {
    process.kill(recorded.pid, 0);
  } catch {
    return false;
  }
  let cmdline: string;
  try {
    cmdline = await readFile(`/proc/${recorded.pid}/cmdline`, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // Without /proc (not Linux) the signal check above is all there is.
    return code !== "ENOENT" || !(await procMounted());
  }
  // An exited child not yet reaped has an empty command line: it is gone for our purposes.
  return cmdline.split("\0")[0] === recorded.executable;
}

async function procMounted(): Promise<boolean> {
  try {
    await readFile("/proc/self/cmdline");
    return true;
  } catch {
    return false;
  }
}

export async function aliveRecordedProcesses(stateDir: string): Promise<RecordedProcess[]> {
  const recorded = await readRecordedProcesses(stateDir);
  const alive = await Promise.all(recorded.map(isRecordedProcessAlive));
  return recorded.filter((_, index) => alive[index]);
}

export interface StopResult {
  terminated: RecordedProcess[];
  killed: RecordedProcess[];
}

/** SIGTERM to every recorded process still alive, SIGKILL to those still there after `graceMs`. */
export async function stopRecordedProcesses(stateDir: string, graceMs = 10_000): Promise<StopResult> {
  const targets = await aliveRecordedProcesses(stateDir);
  for (const target of targets) signal(target, "SIGTERM");
  const remaining = async (): Promise<RecordedProcess[]> => {
    const alive = await Promise.all(targets.map(isRecordedProcessAlive));
    return targets.filter((_, index) => alive[index]);
  };
  let stubborn: RecordedProcess[] = [];
  try {
    await waitFor(
      "control-plane processes to exit after SIGTERM",
      async (observe) => {
        const left = await remaining();
        observe(left.map((p) => `${p.name}(${p.pid})`));
        return left.length === 0;
      },
      { timeoutMs: graceMs, intervalMs: 100 },
    );
  } catch {
    stubborn = await remaining();
    for (const target of stubborn) signal(target, "SIGKILL");
    await waitFor(
      "control-plane processes to exit after SIGKILL",
      async (observe) => {
        const left = await remaining();
        observe(left.map((p) => `${p.name}(${p.pid})`));
        return left.length === 0;
      },
      { timeoutMs: 5_000, intervalMs: 100 },
    );
  }
  return { terminated: targets.filter((t) => !stubborn.includes(t)), killed: stubborn };
}

function signal(target: RecordedProcess, name: NodeJS.Signals): void {
  try {
    process.kill(target.pid, name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ESRCH") throw error;
  }
}

/**
 * Stops one recorded component (SIGTERM, SIGKILL after `graceMs`) and starts it again with the same
 * executable (or `executable`, another build of it), arguments and environment, attached to this process
 * unless `detached` (then it outlives this process, and the cluster's teardown stops it).
 * Tests use it to break every watch by restarting the API server, and to restart a real node's kubelet.
 */
export async function restartRecordedProcess(
  stateDir: string,
  name: string,
  options: { graceMs?: number; executable?: string; detached?: boolean } = {},
): Promise<RunningProcess> {
  const { graceMs = 10_000, executable, detached = false } = options;
  const recorded = (await readRecordedProcesses(stateDir)).find((p) => p.name === name);
  if (!recorded?.args) throw new Error(`no restartable process named ${name} in ${stateDir}`);
  signal(recorded, "SIGTERM");
  try {
    await waitFor(`${name} to exit`, async () => !(await isRecordedProcessAlive(recorded)), {
      timeoutMs: graceMs,
      intervalMs: 50,
    });
  } catch {
    signal(recorded, "SIGKILL");
    await waitFor(`${name} to exit after SIGKILL`, async () => !(await isRecordedProcessAlive(recorded)), {
      timeoutMs: 5_000,
      intervalMs: 50,
    });
  }
  const others = (await readRecordedProcesses(stateDir)).filter((p) => p.pid !== recorded.pid);
  await writeRecord(stateDir, others);
  return spawnRecorded(stateDir, {
    name,
    executable: executable ?? recorded.executable,
    args: recorded.args,
    ...(recorded.env ? { env: recorded.env } : {}),
    ...(recorded.netns ? { netns: recorded.netns } : {}),
    detached,
  });
}

/** The end of a log file, for error messages that explain why a component did not come up. */
export async function logTail(path: string, lines = 25): Promise<string> {
  try {
    const text = await readFile(path, "utf8");
    return text.trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}
