// Joins one real node to the local control plane: containerd 2.x with runc and the CNI bridge, the kubelet and
// kube-proxy of the pinned Kubernetes release, in a network namespace of their own, with a real node identity.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { CoreV1Api, DiscoveryV1Api, KubeConfig, type V1Node } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { imageReference, pauseImage } from "../image/images.js";
import { issueClientCertificate, type Pki } from "../cluster/pki.js";
import {
  isRecordedProcessAlive,
  logTail,
  readRecordedProcesses,
  restartRecordedProcess,
  spawnRecorded,
  type RecordedProcess,
} from "../cluster/processes.js";
import { recordStopHook } from "../cluster/stop-hooks.js";
import { waitFor } from "../cluster/wait.js";
import {
  REAL_NODE_NETWORK,
  renderClientKubeconfig,
  renderCniConfig,
  renderContainerdConfig,
  renderKubeletConfig,
  renderKubeProxyConfig,
  type RealNodeNetwork,
} from "./config.js";
import {
  createNodeNetwork,
  deleteNodeNetwork,
  existingDirectories,
  NODE_HOST_DIRECTORIES,
  netnsPath,
  podNetnsNames,
  realNodeUnsupportedReason,
  removeCreatedDirectories,
  removeKubepodsCgroups,
  removePodNetns,
  restoreSysctls,
  snapshotSysctls,
  unmountUnder,
  type SysctlSnapshot,
} from "./host.js";

const run = promisify(execFile);

export const REAL_NODE_NAME = "dpo-real-node";
/** Every real node carries it, so only pods that tolerate it (the plugin DaemonSets of tests) land there. */
export const REAL_NODE_TAINT = { key: "dpo.dev/real-node", value: "true", effect: "NoSchedule" } as const;
export const REAL_NODE_LABEL = "dpo.dev/real-node";

export const RECORD_FILE = "real-node.json";
/** The kubelet's /healthz, on 127.0.0.1 of the node's network namespace. */
export const KUBELET_HEALTHZ_PORT = 10248;

export interface RealNodeOptions {
  stateDir: string;
  /** The admin kubeconfig of the cluster. */
  kubeconfigPath: string;
  apiServerPort: number;
  pki: Pick<Pki, "caCert" | "caKey">;
  /** Holds kubelet and kube-proxy (tools/cluster/build.sh). */
  k8sBinDir: string;
  /** Holds containerd, containerd-shim-runc-v2 and ctr (tools/real-node/build.sh). */
  containerdBinDir: string;
  /** Image archives to import before the kubelet starts; the pause image must be among them. */
  images: readonly string[];
  name?: string;
  labels?: Record<string, string>;
  /** Taints it registers with; by default REAL_NODE_TAINT, so only pods that mean to run there do. */
  taints?: { key: string; value: string; effect: "NoSchedule" | "NoExecute" | "PreferNoSchedule" }[];
  log: Logger;
  timeoutMs?: number;
}

/** What the teardown needs, written before anything changes on the host so any process can undo it. */
export interface RealNodeRecord {
  name: string;
  network: RealNodeNetwork;
  containerdSocket: string;
  containerdBinDir: string;
  nodeDir: string;
  sysctls: SysctlSnapshot;
  directoriesBefore: string[];
  podNetnsBefore: string[];
}

export interface RealNodeHandle {
  name: string;
  address: string;
  containerdSocket: string;
  /** `ctr` against the node's containerd, in the Kubernetes namespace. */
  ctr(args: readonly string[]): Promise<string>;
  /**
   * Stops the kubelet and starts it again (another build when `kubeletBinary` is given, e.g. the oldest
   * supported one); resolves once its process runs, not once it is Ready.
   */
  restartKubelet(kubeletBinary?: string): Promise<void>;
  stop(): Promise<void>;
}

export async function startRealNode(options: RealNodeOptions): Promise<RealNodeHandle> {
  const unsupported = await realNodeUnsupportedReason();
  if (unsupported !== undefined) throw new Error(unsupported);
  const { log, stateDir } = options;
  const name = options.name ?? REAL_NODE_NAME;
  const network = REAL_NODE_NETWORK;
  const nodeDir = join(stateDir, "node");
  const dirs = {
    containerdRoot: join(nodeDir, "containerd", "root"),
    containerdState: join(nodeDir, "containerd", "state"),
    cniConf: join(nodeDir, "cni"),
    kubelet: join(nodeDir, "kubelet"),
    kubeProxy: join(nodeDir, "kube-proxy"),
  };
  const containerdSocket = join(dirs.containerdState, "containerd.sock");
  const record: RealNodeRecord = {
    name,
    network,
    containerdSocket,
    containerdBinDir: options.containerdBinDir,
    nodeDir,
    sysctls: await snapshotSysctls(),
    directoriesBefore: await existingDirectories(NODE_HOST_DIRECTORIES),
    podNetnsBefore: await podNetnsNames(),
  };
  await mkdir(nodeDir, { recursive: true, mode: 0o700 });
  await writeFile(join(stateDir, RECORD_FILE), `${JSON.stringify(record, null, 2)}\n`);
  // Stopping the cluster stops this node first (stopBeforeCluster below), whichever process stops it.
  await recordStopHook(stateDir, fileURLToPath(import.meta.url));
  const started = Date.now();
  const deadline = started + (options.timeoutMs ?? 180_000);
  const remaining = (): number => Math.max(deadline - Date.now(), 1_000);
  const ctr = (args: readonly string[]): Promise<string> =>
    runCtr(options.containerdBinDir, containerdSocket, args);

  try {
    await Promise.all(Object.values(dirs).map((dir) => mkdir(dir, { recursive: true })));
    await createNodeNetwork(network);

    await writeFile(join(dirs.cniConf, "10-dpo-node.conflist"), renderCniConfig(network));
    const containerdConfig = join(nodeDir, "containerd", "config.toml");
    await writeFile(
      containerdConfig,
      renderContainerdConfig(
        {
          root: dirs.containerdRoot,
          state: dirs.containerdState,
          socket: containerdSocket,
          cniConfDir: dirs.cniConf,
          cniBinDir: "/usr/lib/cni",
        },
        imageReference(pauseImage),
      ),
    );
    const containerd = await spawnRecorded(stateDir, {
      name: "containerd",
      executable: join(options.containerdBinDir, "containerd"),
      args: ["--config", containerdConfig],
      // The shim and runc are found on PATH: the shim next to containerd, runc from Debian's package.
      env: {
        PATH: `${options.containerdBinDir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
      },
      detached: true,
      netns: netnsPath(network),
    });
    await waitFor(
      "containerd to serve its socket",
      async (observe) => {
        if (!(await isRecordedProcessAlive(containerd))) {
          throw new Error(`containerd exited:\n${await logTail(containerd.log)}`);
        }
        try {
          await ctr(["version"]);
          return true;
        } catch (error) {
          observe((error as Error).message);
          return false;
        }
      },
      { timeoutMs: remaining() },
    );
    for (const archive of options.images) {
      await ctr(["images", "import", archive]);
    }
    log.info(
      { images: options.images.length, ms: Date.now() - started },
      "containerd ready, images imported",
    );

    const server = `https://${network.hostAddress}:${options.apiServerPort}`;
    const pkiDir = join(nodeDir, "pki");
    /** A client certificate for `subject`, signed by the cluster's CA, in a kubeconfig for the node's view of the server. */
    const identity = async (
      file: string,
      certName: string,
      subject: string,
      user: string,
    ): Promise<string> => {
      const cert = await issueClientCertificate(options.pki, pkiDir, certName, subject);
      await writeFile(
        file,
        renderClientKubeconfig({
          server,
          caFile: options.pki.caCert,
          certFile: cert.cert,
          keyFile: cert.key,
          user,
        }),
      );
      return file;
    };
    const kubeletKubeconfig = await identity(
      join(dirs.kubelet, "kubeconfig"),
      "kubelet",
      `/O=system:nodes/CN=system:node:${name}`,
      `system:node:${name}`,
    );
    const kubeletConfig = join(dirs.kubelet, "config.yaml");
    const kubeletBinary = join(options.k8sBinDir, "kubelet");
    await writeFile(
      kubeletConfig,
      renderKubeletConfig({
        minor: await kubeletMinor(kubeletBinary),
        nodeAddress: network.nodeAddress,
        clientCaFile: options.pki.caCert,
        containerdSocket,
        healthzPort: KUBELET_HEALTHZ_PORT,
        taints: options.taints ?? [REAL_NODE_TAINT],
      }),
    );
    const labels = { [REAL_NODE_LABEL]: "true", ...options.labels };
    await spawnRecorded(stateDir, {
      name: "kubelet",
      executable: kubeletBinary,
      args: [
        `--config=${kubeletConfig}`,
        `--kubeconfig=${kubeletKubeconfig}`,
        `--hostname-override=${name}`,
        `--node-ip=${network.nodeAddress}`,
        `--node-labels=${Object.entries(labels)
          .map(([k, v]) => `${k}=${v}`)
          .join(",")}`,
        `--cert-dir=${join(dirs.kubelet, "pki")}`,
        "--v=2",
      ],
      detached: true,
      netns: netnsPath(network),
    });

    // The kubernetes Service leads to the API server where pods can reach it: its endpoint is the host's
    // end of the veth pair (the API server keeps no endpoints itself, --endpoint-reconciler-type=none).
    const admin = new KubeConfig();
    admin.loadFromFile(options.kubeconfigPath);
    await publishApiServerEndpoint(admin, network.hostAddress, options.apiServerPort);
    const proxyKubeconfig = await identity(
      join(dirs.kubeProxy, "kubeconfig"),
      "kube-proxy",
      "/CN=system:kube-proxy",
      "system:kube-proxy",
    );
    const proxyConfig = join(dirs.kubeProxy, "config.yaml");
    await writeFile(
      proxyConfig,
      renderKubeProxyConfig({
        kubeconfig: proxyKubeconfig,
        podCidr: network.podCidr,
        hostnameOverride: name,
        healthzPort: 10256,
        metricsPort: 10249,
      }),
    );
    await spawnRecorded(stateDir, {
      name: "kube-proxy",
      executable: join(options.k8sBinDir, "kube-proxy"),
      args: [`--config=${proxyConfig}`, "--v=1"],
      detached: true,
      netns: netnsPath(network),
    });

    await waitForNodeReady(admin.makeApiClient(CoreV1Api), name, remaining(), stateDir);
    log.info({ node: name, ms: Date.now() - started }, "real node Ready");
  } catch (error) {
    const tails = await Promise.all(
      ["containerd", "kubelet", "kube-proxy"].map(
        async (component) =>
          `--- ${component}\n${await logTail(join(stateDir, "logs", `${component}.log`), 20)}`,
      ),
    );
    await stopRealNode(stateDir, log).catch((stopError: unknown) =>
      log.error({ err: stopError }, "real node cleanup failed"),
    );
    throw new Error(`real node did not start: ${(error as Error).message}\n${tails.join("\n")}`, {
      cause: error,
    });
  }

  return {
    name,
    address: network.nodeAddress,
    containerdSocket,
    ctr,
    restartKubelet: (binary) => restartKubelet(stateDir, binary),
    stop: () => stopRealNode(stateDir, log),
  };
}

/**
 * Stops the real node's kubelet and starts it again, from any process (the tests restart it): the same binary,
 * or another build such as the oldest supported kubelet. Resolves once the new process runs.
 */
export async function restartKubelet(stateDir: string, binary?: string): Promise<void> {
  await restartRecordedProcess(stateDir, "kubelet", {
    ...(binary === undefined ? {} : { executable: binary }),
    detached: true,
  });
}

export async function runCtr(binDir: string, socket: string, args: readonly string[]): Promise<string> {
  try {
    const { stdout } = await run(
      join(binDir, "ctr"),
      ["--address", socket, "--namespace", "k8s.io", ...args],
      {
        maxBuffer: 16 << 20,
      },
    );
    return stdout;
  } catch (error) {
    const err = error as { stderr?: string; message: string };
    throw new Error(`ctr ${args.join(" ")}: ${(err.stderr ?? "").trim() || err.message}`, { cause: error });
  }
}

/** The kubelet's minor version, from `kubelet --version` ("Kubernetes v1.37.2"). */
export async function kubeletMinor(kubeletBinary: string): Promise<number> {
  const { stdout } = await run(kubeletBinary, ["--version"]);
  const match = /v1\.(\d+)\./.exec(stdout);
  if (!match?.[1]) throw new Error(`cannot read a version from ${kubeletBinary} --version: ${stdout.trim()}`);
  return Number(match[1]);
}

async function publishApiServerEndpoint(kc: KubeConfig, address: string, port: number): Promise<void> {
  const discovery = kc.makeApiClient(DiscoveryV1Api);
  const body = {
    metadata: {
      name: "kubernetes",
      namespace: "default",
      labels: { "kubernetes.io/service-name": "kubernetes" },
    },
    addressType: "IPv4",
    endpoints: [{ addresses: [address], conditions: { ready: true } }],
    ports: [{ name: "https", port, protocol: "TCP" }],
  };
  try {
    await discovery.createNamespacedEndpointSlice({ namespace: "default", body });
  } catch (error) {
    if ((error as { code?: number }).code !== 409) throw error;
    await discovery.replaceNamespacedEndpointSlice({ name: "kubernetes", namespace: "default", body });
  }
}

async function waitForNodeReady(
  core: CoreV1Api,
  name: string,
  timeoutMs: number,
  stateDir: string,
): Promise<V1Node> {
  let node: V1Node | undefined;
  const kubelet = (await readRecordedProcesses(stateDir)).find((p) => p.name === "kubelet");
  await waitFor(
    `node ${name} to be Ready`,
    async (observe) => {
      if (kubelet && !(await isRecordedProcessAlive(kubelet))) {
        throw new Error(`the kubelet exited:\n${await logTail(kubelet.log)}`);
      }
      try {
        node = await core.readNode({ name });
      } catch {
        observe("not registered yet");
        return false;
      }
      const ready = node.status?.conditions?.find((c) => c.type === "Ready");
      observe(`Ready=${ready?.status ?? "unknown"}: ${ready?.message ?? ""}`);
      return ready?.status === "True";
    },
    { timeoutMs, intervalMs: 250 },
  );
  return node!;
}

/** The cluster's stop step for a real node (tools/cluster/stop-hooks.ts): the node goes first. */
export const stopBeforeCluster = (stateDir: string, log?: Logger): Promise<void> =>
  stopRealNode(stateDir, log);

/**
 * Undoes what startRealNode did, from its record in the state directory: pods' containers and sandboxes,
 * the node's processes, mounts, pod network namespaces, cgroups, sysctls and the directories it created.
 * A no-op when the state directory holds no real node.
 */
export async function stopRealNode(stateDir: string, log?: Logger): Promise<void> {
  const recordPath = join(stateDir, RECORD_FILE);
  if (!existsSync(recordPath)) return;
  const record = JSON.parse(await readFile(recordPath, "utf8")) as RealNodeRecord;
  const processes = await readRecordedProcesses(stateDir);
  const byName = (name: string): RecordedProcess | undefined => processes.find((p) => p.name === name);
  const problems: string[] = [];

  // The kubelet first, so it does not start again what is stopped below.
  for (const name of ["kubelet", "kube-proxy"]) await stopProcess(byName(name));
  const containerd = byName("containerd");
  if (containerd && (await isRecordedProcessAlive(containerd))) {
    const ctr = (args: readonly string[]): Promise<string> =>
      runCtr(record.containerdBinDir, record.containerdSocket, args);
    try {
      const tasks = (await ctr(["tasks", "list", "--quiet"])).split("\n").filter(Boolean);
      for (const id of tasks) await ctr(["tasks", "kill", "--signal", "SIGKILL", id]).catch(() => undefined);
      for (const id of tasks) {
        await waitFor(`task ${id} to stop`, async () => !(await ctr(["tasks", "list"])).includes(`${id} `), {
          timeoutMs: 10_000,
          intervalMs: 100,
        }).catch(() => undefined);
        await ctr(["tasks", "delete", "--force", id]).catch(() => undefined);
      }
      const containers = (await ctr(["containers", "list", "--quiet"])).split("\n").filter(Boolean);
      for (const id of containers) await ctr(["containers", "delete", id]).catch(() => undefined);
    } catch (error) {
      problems.push(`containers: ${(error as Error).message}`);
    }
  }
  await stopProcess(containerd);
  await killShims(record.containerdSocket);

  try {
    await unmountUnder([record.nodeDir, "/var/lib/kubelet"]);
  } catch (error) {
    problems.push((error as Error).message);
  }
  await removePodNetns(record.podNetnsBefore);
  await deleteNodeNetwork(record.network);
  const cgroupsLeft = await removeKubepodsCgroups();
  if (cgroupsLeft.length > 0) problems.push(`cgroups still in use: ${cgroupsLeft.slice(0, 5).join(", ")}`);
  await restoreSysctls(record.sysctls);
  try {
    await removeCreatedDirectories(record.directoriesBefore);
  } catch (error) {
    problems.push((error as Error).message);
  }
  await rm(record.nodeDir, { recursive: true, force: true }).catch((error: unknown) =>
    problems.push(`${record.nodeDir}: ${(error as Error).message}`),
  );
  await rm(recordPath, { force: true });
  if (problems.length > 0) {
    log?.warn({ problems }, "real node teardown left things behind");
    throw new Error(`real node teardown left things behind: ${problems.join("; ")}`);
  }
  log?.info({ node: record.name }, "real node stopped and the host restored");
}

async function stopProcess(recorded: RecordedProcess | undefined): Promise<void> {
  if (!recorded || !(await isRecordedProcessAlive(recorded))) return;
  process.kill(recorded.pid, "SIGTERM");
  try {
    await waitFor(`${recorded.name} to exit`, async () => !(await isRecordedProcessAlive(recorded)), {
      timeoutMs: 10_000,
      intervalMs: 100,
    });
  } catch {
    process.kill(recorded.pid, "SIGKILL");
  }
}

/** runc shims outlive containerd by design; those of this node's socket are ended with it. */
export async function killShims(socket: string): Promise<void> {
  const { stdout } = await run("ps", ["-eo", "pid=,args="]).catch(() => ({ stdout: "" }));
  for (const line of stdout.split("\n")) {
    const match = /^\s*(\d+)\s+(.*)$/.exec(line);
    if (!match?.[2]?.includes("containerd-shim-runc-v2") || !match[2].includes(socket)) continue;
    try {
      process.kill(Number(match[1]), "SIGKILL");
    } catch {
      // already gone
    }
  }
}
