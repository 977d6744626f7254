// A node reboot, as far as one machine hosting the real node allows: the kubelet and containerd stopped,
// every container and shim gone, what a reboot loses (containerd's state directory, the pods' mounts,
// network namespaces and cgroups) removed, then containerd and the kubelet started again with the same
// configuration. What survives is what survives a reboot: containerd's root (images, snapshots' content)
// and the kubelet's root directory (its device manager checkpoint among it), and the API server's objects:
// the pods stay bound to the node and the kubelet admits them again at start.
import { existsSync } from "node:fs";
import { mkdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import {
  isRecordedProcessAlive,
  readRecordedProcesses,
  restartRecordedProcess,
  type RecordedProcess,
} from "../cluster/processes.js";
import { waitFor } from "../cluster/wait.js";
import { removeKubepodsCgroups, removePodNetns, unmountUnder } from "./host.js";
import { killShims, RECORD_FILE, runCtr, type RealNodeRecord } from "./real-node.js";

/** When each step of a reboot ended, on the wall clock (Date.now). */
export interface RebootTimes {
  /** The kubelet was sent SIGTERM. */
  stoppingAt: number;
  /** Every container, shim and the runtimes' run-time state gone: the node is "off". */
  downAt: number;
  /** containerd serves its socket again. */
  containerdAt: number;
  /** The new kubelet process runs. */
  kubeletAt: number;
}

export async function rebootRealNode(stateDir: string): Promise<RebootTimes> {
  const recordPath = join(stateDir, RECORD_FILE);
  if (!existsSync(recordPath)) throw new Error(`${stateDir} holds no real node (${RECORD_FILE})`);
  const record = JSON.parse(await readFile(recordPath, "utf8")) as RealNodeRecord;
  const processes = await readRecordedProcesses(stateDir);
  const byName = (name: string): RecordedProcess => {
    const found = processes.find((p) => p.name === name);
    if (!found) throw new Error(`the real node has no recorded ${name}`);
    return found;
  };
  const ctr = (args: readonly string[]): Promise<string> =>
    runCtr(record.containerdBinDir, record.containerdSocket, args);

  const stoppingAt = Date.now();
  // The kubelet first, so it neither restarts what goes below nor reports the pods' ends to the API server:
  // after a power loss the API server still sees them Running until the new kubelet says otherwise.
  await stop(byName("kubelet"));
  // Every container ends, as at power off: SIGKILL to every task, then containerd and the shims.
  const tasks = (await ctr(["tasks", "list", "--quiet"])).split("\n").filter(Boolean);
  await Promise.all(
    tasks.map((id) => ctr(["tasks", "kill", "--all", "--signal", "SIGKILL", id]).catch(() => undefined)),
  );
  await waitFor(
    "every task of the real node to stop",
    async (observe) => {
      const running = (await ctr(["tasks", "list"]))
        .split("\n")
        .slice(1)
        .filter((line) => /\bRUNNING\b/.test(line));
      observe(running);
      return running.length === 0;
    },
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  const containerd = byName("containerd");
  await stop(containerd);
  await killShims(record.containerdSocket);
  // What lives in memory or /run and does not survive a reboot.
  const containerdState = join(record.nodeDir, "containerd", "state");
  await unmountUnder([containerdState, "/var/lib/kubelet/pods"]);
  await removePodNetns(record.podNetnsBefore);
  await removeKubepodsCgroups();
  await rm(containerdState, { recursive: true, force: true });
  await mkdir(containerdState, { recursive: true });
  const downAt = Date.now();

  await restartRecordedProcess(stateDir, "containerd", { detached: true });
  await waitFor(
    "containerd to serve its socket after the reboot",
    async (observe) => {
      try {
        await ctr(["version"]);
        return true;
      } catch (error) {
        observe((error as Error).message);
        return false;
      }
    },
    { timeoutMs: 60_000, intervalMs: 50 },
  );
  const containerdAt = Date.now();
  await restartRecordedProcess(stateDir, "kubelet", { detached: true });
  return { stoppingAt, downAt, containerdAt, kubeletAt: Date.now() };
}

async function stop(recorded: RecordedProcess): Promise<void> {
  if (!(await isRecordedProcessAlive(recorded))) return;
  process.kill(recorded.pid, "SIGTERM");
  try {
    await waitFor(`${recorded.name} to exit`, async () => !(await isRecordedProcessAlive(recorded)), {
      timeoutMs: 10_000,
      intervalMs: 50,
    });
  } catch {
    process.kill(recorded.pid, "SIGKILL");
    await waitFor(`${recorded.name} to exit`, async () => !(await isRecordedProcessAlive(recorded)), {
      timeoutMs: 5_000,
      intervalMs: 50,
    });
  }
}
