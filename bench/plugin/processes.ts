// The plugin processes under test, dpo's and the upstream Go sample's, and bare Node as their floor, started
// and stopped, and the time from each plugin's launch to the simulated kubelet holding its full device list.
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import type { SimulatedDeviceManager, SimulatedResource } from "../../tools/kubelet-sim/device-manager.js";
import { NODE_FLAGS, PLUGIN_LOGS } from "./knobs.js";

export interface Plugin {
  child: ChildProcess;
  /** When the plugin's own program began (performance.now()): start → registered counts from here. */
  launchedAt: Promise<number>;
  stop(): Promise<void>;
}

export interface Launch {
  name: string;
  resource: string;
  devices: number;
  start(): Plugin;
}

/** How the process ended: its exit, or the error that kept it from starting (no `unshare`, say). */
function exitOf(child: ChildProcess): Promise<string> {
  return new Promise((resolve) => {
    child.once("exit", (code, signal) => resolve(`code ${code}, signal ${signal}`));
    child.once("error", (err) => resolve(err.message));
  });
}

export function startDpo(
  dir: string,
  config: string,
  entry: string,
  compileCache: string | undefined,
): Plugin {
  const env: NodeJS.ProcessEnv = { ...process.env, DPO_LOG_LEVEL: PLUGIN_LOGS ?? "warn" };
  // A pod's environment has neither; a machine-wide CA bundle would add every root certificate to the RSS.
  delete env["NODE_COMPILE_CACHE"];
  delete env["NODE_EXTRA_CA_CERTS"];
  if (compileCache !== undefined) env["NODE_COMPILE_CACHE"] = compileCache;
  const spawnedAt = performance.now();
  const child = spawn(
    process.execPath,
    [
      ...NODE_FLAGS,
      entry,
      "plugin",
      "--config",
      config,
      "--device-plugin-dir",
      dir,
      // Serve /metrics (and the probes) as the DaemonSet does (`:PORT`, every address), so its memory is in
      // the figures.
      "--metrics-addr",
      ":0",
      "--health-addr",
      "0",
    ],
    { stdio: ["ignore", PLUGIN_LOGS ? "inherit" : "ignore", "inherit"], env },
  );
  const exited = exitOf(child);
  return {
    child,
    launchedAt: Promise.resolve(spawnedAt),
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/**
 * The runtime's floor: Node under the image's flags with `node:http2` loaded (what any gRPC server on Node
 * needs) and nothing else, idle, with the environment a plugin gets. The plugin's idle RSS is held to this.
 */
export function startNodeFloor(script: string): Plugin {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env["NODE_COMPILE_CACHE"];
  delete env["NODE_EXTRA_CA_CERTS"];
  writeFileSync(script, 'import "node:http2";\nsetInterval(() => {}, 2 ** 30);\n');
  const spawnedAt = performance.now();
  const child = spawn(process.execPath, [...NODE_FLAGS, script], {
    stdio: ["ignore", "ignore", "inherit"],
    env,
  });
  const exited = exitOf(child);
  return {
    child,
    launchedAt: Promise.resolve(spawnedAt),
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/**
 * The sample plugin dials the kubelet at the fixed /var/lib/kubelet/device-plugins/kubelet.sock and, left
 * to its defaults as in its image, serves its own socket in that directory (PLUGIN_SOCK_DIR moves only its
 * own socket, not the kubelet's). So it runs in a private mount namespace where that directory is the
 * simulated kubelet's: a tmpfs over /var/lib (nothing of the host's /var/lib is touched or needed: the
 * binary is static) with the directory bind-mounted into it. The wrapper writes one byte to stdout just
 * before it execs the plugin, so the namespace's set-up is not counted in start → registered.
 */
const GO_NAMESPACE_SCRIPT = [
  "set -eu",
  "mount -t tmpfs -o size=1m,mode=0755 dpo-bench /var/lib",
  "mkdir -p /var/lib/kubelet/device-plugins",
  'mount --bind "$1" /var/lib/kubelet/device-plugins',
  "printf x",
  `exec "$2"${PLUGIN_LOGS ? "" : " 2>/dev/null"}`,
].join("\n");

export function startGoPlugin(dir: string, binary: string): Plugin {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // What it reads (sampledeviceplugin.go): the defaults are what its image runs with, autoregistration
  // at start and no CDI spec file.
  delete env["PLUGIN_SOCK_DIR"];
  delete env["REGISTER_CONTROL_FILE"];
  delete env["CDI_ENABLED"];
  // Root has CAP_SYS_ADMIN for a mount namespace; anyone else maps themselves to root in a user namespace.
  const namespace = process.getuid?.() === 0 ? ["--mount"] : ["--user", "--map-root-user", "--mount"];
  const child = spawn("unshare", [...namespace, "sh", "-c", GO_NAMESPACE_SCRIPT, "sh", dir, binary], {
    stdio: ["ignore", "pipe", "inherit"],
    env,
  });
  const exited = exitOf(child);
  const launchedAt = new Promise<number>((resolve, reject) => {
    child.stdout.once("data", () => resolve(performance.now()));
    child.once("error", reject);
    void exited.then((how) => reject(new Error(`Go plugin's mount namespace: ${how}`)));
  });
  // Only start → registered awaits it, once registered; an early end is reported from there.
  launchedAt.catch(() => undefined);
  child.stdout.resume();
  return {
    child,
    launchedAt,
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/** Milliseconds from the plugin's launch to the simulated kubelet holding its full device list. */
export async function startToRegistered(
  kubelet: SimulatedDeviceManager,
  launch: Launch,
): Promise<{ plugin: Plugin; ms: number }> {
  let onDevices: ((r: SimulatedResource) => void) | undefined;
  const registered = new Promise<number>((resolve) => {
    onDevices = (r) => {
      if (r.resourceName === launch.resource && r.connected && r.devices.length === launch.devices) {
        resolve(performance.now());
      }
    };
    kubelet.on("devices", onDevices);
  });
  const plugin = launch.start();
  const exited = exitOf(plugin.child).then((how) => {
    throw new Error(`${launch.name} ended (${how}) before it registered`);
  });
  try {
    const at = await Promise.race([registered, exited]);
    return { plugin, ms: at - (await plugin.launchedAt) };
  } finally {
    kubelet.off("devices", onDevices!);
    exited.catch(() => undefined);
  }
}
