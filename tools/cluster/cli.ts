// `up`, `down` and `status` for the local control plane behind `make cluster-up` / `make cluster-down`.
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, isAbsolute, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { pino, type Logger } from "pino";
import {
  aliveRecordedProcesses,
  buildOrReuseBinaries,
  readRecordedProcesses,
  startCluster,
  stopCluster,
} from "./cluster.js";

const toolDir = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(toolDir, "..", "..");
const localDir = join(repoRoot, ".local", "cluster");
const paths = {
  statePointer: join(localDir, "state"),
  kubeconfig: join(localDir, "kubeconfig"),
  env: join(localDir, "env"),
};
const STATE_DIR_PREFIX = "dpo-cluster-";
const LAUNCHER_PID_FILE = "launcher.pid";

class UsageError extends Error {}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const log = pino({ level: process.env.DPO_CLUSTER_LOG_LEVEL ?? "info" }, pino.destination(2));
  switch (command) {
    case "up":
      return up(rest, log);
    case "down":
      return down(log);
    case "status":
      return status();
    default:
      throw new UsageError(`usage: cli.ts up [--nodes N] [--bin-dir DIR] | down | status`);
  }
}

async function up(args: string[], log: Logger): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { nodes: { type: "string", default: "3" }, "bin-dir": { type: "string" } },
    strict: true,
  });
  const nodes = Number(values.nodes);
  if (!Number.isInteger(nodes) || nodes < 1) throw new UsageError(`--nodes must be a positive integer`);

  await mkdir(localDir, { recursive: true });
  const existing = await recordedStateDir();
  if (existing !== undefined) {
    const busy = await describeLiveCluster(existing);
    if (busy !== undefined) {
      console.error(`cluster already running (${busy}); stop it with make cluster-down`);
      return 1;
    }
    log.info({ stateDir: existing }, "removing the state of a cluster that no longer runs");
    await removeLocalState(existing);
  }

  const binDir = values["bin-dir"] ?? process.env.DPO_CLUSTER_BIN_DIR ?? (await buildOrReuseBinaries());
  const stateDir = await mkdtemp(join(tmpdir(), STATE_DIR_PREFIX));
  // The exclusive create is the claim: of two concurrent `up`s, only one gets past here.
  try {
    await writeFile(paths.statePointer, `${stateDir}\n`, { flag: "wx" });
  } catch (error) {
    await rm(stateDir, { recursive: true, force: true });
    if ((error as NodeJS.ErrnoException).code === "EEXIST") {
      console.error(`another cluster-up claimed ${relative(repoRoot, paths.statePointer)} first`);
      return 1;
    }
    throw error;
  }
  await writeFile(join(stateDir, LAUNCHER_PID_FILE), `${process.pid}\n`);

  // Children are detached so they outlive this command; an interrupted start must not leave them behind.
  let interrupted = false;
  const stopOnSignal = async (signal: NodeJS.Signals): Promise<void> => {
    interrupted = true;
    console.error(`${signal}: stopping the processes started so far`);
    await stopCluster(stateDir, log);
    await removeLocalState(stateDir);
    process.exit(130);
  };
  const onSignal = (signal: NodeJS.Signals): void => void stopOnSignal(signal);
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);

  let cluster;
  try {
    cluster = await startCluster({ nodes, stateDir, binDir, log, detached: true });
  } catch (error) {
    // The signal handler reports and exits; the startup error is only its echo.
    if (interrupted) return new Promise<never>(() => undefined);
    await rm(paths.statePointer, { force: true });
    console.error(error instanceof Error ? error.message : String(error));
    if ((await readRecordedProcesses(stateDir)).length > 0) {
      console.error(`logs kept in ${join(stateDir, "logs")}`);
    } else {
      await rm(stateDir, { recursive: true, force: true });
    }
    return 1;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await rm(join(stateDir, LAUNCHER_PID_FILE), { force: true });
  }

  await copyFile(cluster.kubeconfigPath, paths.kubeconfig);
  await writeFile(
    paths.env,
    [
      `# source this file to use the local cluster's kubectl and kubeconfig`,
      `export KUBECONFIG=${shellQuote(paths.kubeconfig)}`,
      `export DPO_CLUSTER_BIN_DIR=${shellQuote(binDir)}`,
      `export PATH=${shellQuote(binDir)}:"$PATH"`,
      "",
    ].join("\n"),
  );
  const pids = Object.entries(cluster.pids)
    .map(([name, pid]) => `${name} ${pid}`)
    .join(", ");
  console.log(
    [
      `cluster up: ${nodes} node${nodes === 1 ? "" : "s"} Ready (${cluster.nodeNames.join(", ")}), Kubernetes ${cluster.versions.kubernetes}`,
      `cold start ${(cluster.startupMs / 1000).toFixed(1)} s (API ready, nodes Ready, a DaemonSet Running on every node)`,
      `API server ${cluster.server}; pids ${pids}`,
      `kubeconfig ${relative(repoRoot, paths.kubeconfig)}; state ${stateDir}`,
      `use it: source ${relative(repoRoot, paths.env)} && kubectl get nodes`,
    ].join("\n"),
  );
  return 0;
}

async function down(log: Logger): Promise<number> {
  const stateDir = await recordedStateDir();
  if (stateDir === undefined) {
    await rm(paths.kubeconfig, { force: true });
    await rm(paths.env, { force: true });
    console.log(`no cluster is running (nothing recorded in ${relative(repoRoot, paths.statePointer)})`);
    return 0;
  }
  const alive = await aliveRecordedProcesses(stateDir);
  await stopCluster(stateDir, log);
  await removeLocalState(stateDir);
  console.log(
    alive.length === 0
      ? `cluster was not running; removed its state ${stateDir}`
      : `cluster stopped (${alive.map((p) => `${p.name} ${p.pid}`).join(", ")}); removed ${stateDir}`,
  );
  return 0;
}

async function status(): Promise<number> {
  const stateDir = await recordedStateDir();
  const busy = stateDir === undefined ? undefined : await describeLiveCluster(stateDir);
  if (busy === undefined) {
    console.log("no cluster is running");
    return 1;
  }
  console.log(`cluster running (${busy}); kubeconfig ${relative(repoRoot, paths.kubeconfig)}`);
  return 0;
}

async function recordedStateDir(): Promise<string | undefined> {
  try {
    const stateDir = (await readFile(paths.statePointer, "utf8")).trim();
    return stateDir === "" ? undefined : stateDir;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/** Names what still runs for this state directory, or undefined when nothing does. */
async function describeLiveCluster(stateDir: string): Promise<string | undefined> {
  const alive = await aliveRecordedProcesses(stateDir);
  if (alive.length > 0) return `pids ${alive.map((p) => `${p.name} ${p.pid}`).join(", ")}`;
  const launcher = Number((await readFile(join(stateDir, LAUNCHER_PID_FILE), "utf8").catch(() => "")).trim());
  if (launcher > 0 && isAlive(launcher)) return `still starting, launcher pid ${launcher}`;
  return undefined;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Removes the recorded state directory (only one this tool created) and the files pointing at it. */
async function removeLocalState(stateDir: string): Promise<void> {
  if (isAbsolute(stateDir) && basename(stateDir).startsWith(STATE_DIR_PREFIX)) {
    await rm(stateDir, { recursive: true, force: true });
  } else {
    console.error(`not removing ${stateDir}: not a directory this tool created`);
  }
  await Promise.all(
    [paths.statePointer, paths.kubeconfig, paths.env].map((path) => rm(path, { force: true })),
  );
}

function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error instanceof UsageError ? error.message : error);
    process.exitCode = error instanceof UsageError ? 2 : 1;
  },
);
