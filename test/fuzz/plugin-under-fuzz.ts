// The built `dpo plugin` process registered through the plugin watcher with the simulated kubelet, so the
// fuzzer reaches both sockets the plugin serves (DevicePlugin endpoint and plugin-watcher Registration).
// Shared by the protocol test and `make fuzz`.
import { spawn, type ChildProcess } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "../../tools/cluster/wait.js";
import { SimulatedDeviceManager } from "../../tools/kubelet-sim/device-manager.js";

export const FUZZ_RESOURCE = "hardware-vendor.example/fuzz";
const repo = join(import.meta.dirname, "..", "..");
const dpo = join(repo, "dist", "dpo.js");

/**
 * The Node.js flags the container image starts the plugin with: what sits between "node" and the script
 * in the Dockerfile's exec-form ENTRYPOINT (a small semi-space and lite mode). Read from there so the
 * fuzzed process is the deployed one; without them V8 grows the young generation to 128 MiB under the
 * storm's large requests and keeps it, which is how a run's RSS "grew" 78 -> 318 MiB.
 */
export function imageNodeFlags(): string[] {
  const entrypoint = /^ENTRYPOINT (\[.*\])$/m.exec(readFileSync(join(repo, "Dockerfile"), "utf8"))?.[1];
  if (entrypoint === undefined) throw new Error("the Dockerfile has no exec-form ENTRYPOINT");
  const argv = JSON.parse(entrypoint) as string[];
  const script = argv.findIndex((a) => a.endsWith("/dpo.js"));
  if (argv[0] !== "node" || script < 1) throw new Error(`unexpected ENTRYPOINT ${entrypoint}`);
  return argv.slice(1, script);
}

export interface PluginUnderFuzz {
  child: ChildProcess;
  pid: number;
  kubelet: SimulatedDeviceManager;
  endpoint: string;
  registrationSocket: string;
  stderr: string[];
  /** Set once the process exits, so a crash mid-run is visible. */
  exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  stop(): Promise<void>;
}

export async function startPluginUnderFuzz(): Promise<PluginUnderFuzz> {
  if (!existsSync(dpo)) throw new Error(`${dpo} is missing: run 'make build' first`);
  // Socket paths must stay under 108 bytes, hence a short temporary directory.
  const root = mkdtempSync(join(tmpdir(), "dpo-fz-"));
  const dir = join(root, "dp");
  const registry = join(root, "reg");
  mkdirSync(registry, { recursive: true });
  const kubelet = new SimulatedDeviceManager({ dir, pluginsRegistryDir: registry, gracePeriodMs: 60_000 });
  await kubelet.start();
  const config = join(root, "config.yaml");
  writeFileSync(
    config,
    [
      "apiVersion: dpo.dev/v1beta1",
      "kind: DevicePluginConfig",
      "metadata: { name: fuzz }",
      "spec:",
      `  resourceName: ${FUZZ_RESOURCE}`,
      "  backend: { type: Mock, mock: { devices: 8, idPrefix: fz, numaNodes: 2 } }",
      "  sharing: { strategy: TimeSlicing, replicas: 2 }",
      "  topology: { allocationPolicy: NUMAAligned }",
    ].join("\n"),
  );
  const child = spawn(
    process.execPath,
    [
      ...imageNodeFlags(),
      dpo,
      "plugin",
      "--config",
      config,
      "--device-plugin-dir",
      dir,
      "--plugins-registry-dir",
      registry,
      "--registration",
      "watcher",
      "--cdi-dir",
      join(root, "cdi"),
      "--metrics-addr",
      "0",
      "--health-addr",
      "0",
      "--log-level",
      "error",
    ],
    { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, NODE_NAME: "fuzz-node" } },
  );
  const stderr: string[] = [];
  child.stderr.setEncoding("utf8").on("data", (d: string) => stderr.push(d));
  const running: PluginUnderFuzz = {
    child,
    pid: child.pid!,
    kubelet,
    endpoint: "",
    registrationSocket: "",
    stderr,
    exit: undefined,
    stop: async () => {
      if (running.exit === undefined) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGKILL");
        await exited;
      }
      await kubelet.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
  child.once("exit", (code, signal) => (running.exit = { code, signal }));
  try {
    const res = await waitFor(
      "the plugin process to register through the plugin watcher",
      (observe) => {
        const r = kubelet.resources.get(FUZZ_RESOURCE);
        observe({ connected: r?.connected, exit: running.exit, stderr: stderr.join("").slice(-500) });
        if (running.exit) throw new Error(`plugin exited: ${JSON.stringify(running.exit)}`);
        return r?.connected && r.devices.length > 0 ? r : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 20 },
    );
    running.endpoint = res.endpoint.startsWith("/") ? res.endpoint : join(dir, res.endpoint);
    const sockets = readdirSync(registry).filter((n) => n.endsWith(".sock"));
    if (sockets.length !== 1)
      throw new Error(`expected one registration socket, found ${sockets.join(", ")}`);
    running.registrationSocket = join(registry, sockets[0]!);
  } catch (err) {
    await running.stop();
    throw err;
  }
  return running;
}

/**
 * How far above its pre-storm figures the plugin may settle ("back near baseline"): grpc-js keeps a few
 * sockets and timers around between calls, and V8 grows its heap under load and returns it lazily, so
 * RSS may settle above where it started.
 */
export const NEAR_BASELINE = { fds: 4, rssBytes: 96 * 2 ** 20 };

/** Open file descriptors of a process (Linux /proc). */
export function fdCount(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** Resident set size of a process in bytes (Linux /proc). */
export function rssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]) * 1024;
}
