// Starts a real local control plane (etcd, kube-apiserver, controller-manager, scheduler, KWOK nodes) for tests and demos.
import { AppsV1Api, CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { request, type RequestOptions } from "node:https";
import { createServer } from "node:net";
import { join } from "node:path";
import { pino, type Logger } from "pino";
import { stringify } from "yaml";
import { runStopHooks } from "./stop-hooks.js";
import {
  assertBinaries,
  readPinnedVersions,
  simulatedNodeFacts,
  type ComponentName,
  type PinnedVersions,
} from "./binaries.js";
import {
  apiServerArgs,
  controllerManagerArgs,
  etcdArgs,
  kwokArgs,
  schedulerArgs,
  type ClusterPorts,
} from "./component-args.js";
import {
  apiServerReady,
  etcdHealthy,
  runHealthCheckDaemonSet,
  untilFirstExit,
  waitForNodesReady,
} from "./health-gates.js";
import { renderKwokConfig, simulatedKubeletStages } from "./kwok-stages.js";
import { renderSimulatedNode, simulatedNodeName } from "./nodes.js";
import { assertOpensslAvailable, generatePki, type Pki } from "./pki.js";
import {
  logTail,
  restartRecordedProcess,
  spawnRecorded,
  stopRecordedProcesses,
  type RunningProcess,
} from "./processes.js";
import { waitFor } from "./wait.js";

export {
  BINARIES,
  buildOrReuseBinaries,
  COMPONENTS,
  readPinnedVersions,
  selectedKubernetesVersion,
  simulatedNodeFacts,
  type ComponentName,
  type PinnedVersions,
} from "./binaries.js";
export { POD_CIDR, SERVICE_CLUSTER_IP_RANGE, type ClusterPorts } from "./component-args.js";
export { HEALTH_CHECK_NAMESPACE, PAUSE_IMAGE, waitForNodesReady } from "./health-gates.js";
export {
  NODE_CAPACITY,
  NODE_INDEX_LABEL,
  NODE_NAME_PREFIX,
  SIMULATED_NODE_LABEL,
  SIMULATED_NODE_SELECTOR,
  TEST_FEATURE_LABEL,
  ZONE_LABEL,
  simulatedNodeName,
} from "./nodes.js";
export { aliveRecordedProcesses, readRecordedProcesses, type RecordedProcess } from "./processes.js";
export { waitFor, type WaitOptions } from "./wait.js";

export interface StartClusterOptions {
  nodes: number;
  /** An empty (or missing) directory this cluster owns: certificates, etcd data, logs, pids. */
  stateDir: string;
  /** Holds kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd and kwok. */
  binDir: string;
  log?: Logger;
  /** Children get their own process group and may outlive this process (the CLI); tests keep them attached. */
  detached?: boolean;
  /** For all health gates together. */
  timeoutMs?: number;
  /**
   * The kubelet simulator (tools/kubelet-sim) runs plugin pods and pods asking for extended resources;
   * KWOK runs the rest. Off: KWOK makes every pod Running at once, processes or not.
   */
  kubeletSimulator?: boolean;
  /**
   * Paces the simulated kubelets for thousands of nodes on one machine: node leases of this many
   * seconds (renewed at a quarter of it; 40 by default, a kubelet's own), the node lifecycle
   * controller's grace period following them, condition refreshes every `heartbeatIntervalMs`, and
   * KWOK working on `parallelism` leases and stages at once.
   */
  pacing?: { nodeLeaseDurationSeconds: number; heartbeatIntervalMs: number; parallelism: number };
  /**
   * An audit policy (audit.k8s.io/v1 Policy, YAML) for the API server, which then logs the requests it
   * selects as JSON lines to `auditLogPath(stateDir)`: request timings as the server saw them.
   */
  auditPolicy?: string;
  /**
   * Lets a real node join (tools/real-node): the API server listens beyond loopback, so the node and its
   * pods reach it from their network namespace.
   */
  realNode?: boolean;
}

/** Where the API server of a cluster started with `auditPolicy` writes its audit log. */
export function auditLogPath(stateDir: string): string {
  return join(stateDir, "logs", "audit.log");
}

export interface ClusterHandle {
  kubeconfigPath: string;
  server: string;
  /** The cluster's CA and certificates, for components that join later (the real node). */
  pki: Pki;
  stateDir: string;
  binDir: string;
  versions: PinnedVersions;
  nodeNames: string[];
  ports: ClusterPorts;
  pids: Record<ComponentName, number>;
  /** From the first certificate to the last health gate. */
  startupMs: number;
  /** Stops every recorded process (SIGTERM, then SIGKILL); the state directory is left to the caller. */
  stop(): Promise<void>;
}

/** What `startCluster` leaves in the state directory besides pids, so other processes can find the cluster. */
export interface ClusterRecord {
  server: string;
  kubeconfigPath: string;
  binDir: string;
  nodes: number;
  ports: ClusterPorts;
  versions: PinnedVersions;
}

const CLUSTER_RECORD_FILE = "cluster.json";

export async function readClusterRecord(stateDir: string): Promise<ClusterRecord> {
  return JSON.parse(await readFile(join(stateDir, CLUSTER_RECORD_FILE), "utf8")) as ClusterRecord;
}

/**
 * Restarts kube-apiserver (same port, same flags) and resolves once /readyz says ready again: after its
 * post-start hooks, so custom resources are served too, not only the built-in paths.
 */
export async function restartApiServer(stateDir: string, kubeconfigPath: string): Promise<void> {
  await restartRecordedProcess(stateDir, "kube-apiserver");
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error(`${kubeconfigPath} names no server`);
  const options: RequestOptions = { timeout: 2_000 };
  await kc.applyToHTTPSOptions(options);
  await waitFor(
    "kube-apiserver /readyz after its restart",
    () =>
      new Promise<boolean>((resolve) => {
        const req = request(`${server}/readyz`, options, (response) => {
          response.resume();
          response.on("end", () => resolve(response.statusCode === 200));
        });
        req.on("timeout", () => req.destroy(new Error("readyz timed out")));
        req.on("error", () => resolve(false));
        req.end();
      }),
  );
}

/**
 * Compacts etcd's history up to its current revision (physically, waiting until it is done), through
 * etcd's JSON gateway: every older revision is gone, so a watch that resumes from one gets 410 Gone once
 * the API server's watch cache no longer holds it. Returns the revision compacted to.
 */
export async function compactEtcd(stateDir: string): Promise<number> {
  const { ports } = await readClusterRecord(stateDir);
  const base = `http://127.0.0.1:${ports.etcdClient}/v3/kv`;
  const post = async (path: string, body: unknown): Promise<{ header?: { revision?: string } }> => {
    const response = await fetch(`${base}/${path}`, { method: "POST", body: JSON.stringify(body) });
    const text = await response.text();
    if (!response.ok) throw new Error(`etcd ${path}: HTTP ${response.status}: ${text}`);
    return JSON.parse(text) as { header?: { revision?: string } };
  };
  // Any read answers with the store's current revision in its header; key "\0" reads nothing.
  const current = Number(
    (await post("range", { key: Buffer.from("\0").toString("base64") })).header?.revision,
  );
  if (!Number.isSafeInteger(current) || current <= 0) throw new Error("etcd reported no revision");
  await post("compaction", { revision: String(current), physical: true });
  return current;
}

/** Stops the processes recorded in `stateDir`, whichever process started them. */
export async function stopCluster(stateDir: string, log?: Logger): Promise<void> {
  // What was started on top of the cluster goes first (a real node's containers and host changes, while its
  // containerd still answers): each recorded its own stop step (stop-hooks.ts).
  await runStopHooks(stateDir, log);
  const result = await stopRecordedProcesses(stateDir);
  log?.info(
    {
      terminated: result.terminated.map((p) => `${p.name}(${p.pid})`),
      killed: result.killed.map((p) => `${p.name}(${p.pid})`),
    },
    "cluster processes stopped",
  );
}

export async function startCluster(options: StartClusterOptions): Promise<ClusterHandle> {
  const log = options.log ?? pino({ level: "silent" });
  const started = Date.now();
  if (!Number.isInteger(options.nodes) || options.nodes < 1) {
    throw new Error(`nodes must be a positive integer, got ${options.nodes}`);
  }
  await assertBinaries(options.binDir);
  await assertOpensslAvailable();
  const versions = await readPinnedVersions();
  const stateDir = options.stateDir;
  await Promise.all(
    ["logs", "etcd", "kwok", "certs"].map((dir) =>
      mkdir(join(stateDir, dir), { recursive: true, mode: 0o700 }),
    ),
  );

  const ports = await pickFreePorts();
  const pki = await generatePki(join(stateDir, "pki"));
  const server = `https://127.0.0.1:${ports.apiServer}`;
  const kubeconfigPath = join(stateDir, "admin.kubeconfig");
  await writeFile(kubeconfigPath, await renderAdminKubeconfig(server, pki), { mode: 0o600 });
  const kwokConfigPath = join(stateDir, "kwok", "stages.yaml");
  await writeFile(
    kwokConfigPath,
    renderKwokConfig(
      simulatedKubeletStages({
        kubeletSimulator: options.kubeletSimulator,
        ...(options.pacing ? { heartbeatIntervalMs: options.pacing.heartbeatIntervalMs } : {}),
      }),
      options.pacing ? { parallelism: options.pacing.parallelism } : {},
    ),
  );
  const record: ClusterRecord = {
    server,
    kubeconfigPath,
    binDir: options.binDir,
    nodes: options.nodes,
    ports,
    versions,
  };
  await writeFile(join(stateDir, CLUSTER_RECORD_FILE), `${JSON.stringify(record, null, 2)}\n`);
  log.info({ stateDir, ports }, "starting control plane");

  const running: RunningProcess[] = [];
  const start = async (name: ComponentName, args: string[], env?: Record<string, string>): Promise<void> => {
    const child = await spawnRecorded(stateDir, {
      name,
      executable: join(options.binDir, name),
      args,
      env,
      detached: options.detached ?? false,
    });
    running.push(child);
    log.debug({ component: name, pid: child.pid, log: child.log }, "component started");
  };
  const deadline = started + (options.timeoutMs ?? 120_000);
  const gate = <T>(description: string, work: () => Promise<T>): Promise<T> =>
    untilFirstExit(running, work, description);
  const remaining = (): number => Math.max(deadline - Date.now(), 1_000);

  try {
    await start("etcd", etcdArgs(stateDir, ports));
    await gate("etcd healthy", () =>
      waitFor("etcd to report healthy", () => etcdHealthy(ports.etcdClient), { timeoutMs: remaining() }),
    );

    const auditArgs: string[] = [];
    if (options.auditPolicy !== undefined) {
      const policyPath = join(stateDir, "audit-policy.yaml");
      await writeFile(policyPath, options.auditPolicy);
      auditArgs.push(
        `--audit-policy-file=${policyPath}`,
        `--audit-log-path=${auditLogPath(stateDir)}`,
        "--audit-log-format=json",
      );
    }
    await start("kube-apiserver", [
      ...apiServerArgs(stateDir, ports, pki, options.realNode ?? false),
      ...auditArgs,
    ]);
    await gate("kube-apiserver ready", () =>
      waitFor("kube-apiserver /readyz", () => apiServerReady(server, pki), { timeoutMs: remaining() }),
    );
    log.info({ server, ms: Date.now() - started }, "API server ready");

    const kubeconfig = new KubeConfig();
    kubeconfig.loadFromFile(kubeconfigPath);
    const core = kubeconfig.makeApiClient(CoreV1Api);
    const apps = kubeconfig.makeApiClient(AppsV1Api);

    await start(
      "kube-controller-manager",
      controllerManagerArgs(stateDir, ports, pki, kubeconfigPath, options.pacing?.nodeLeaseDurationSeconds),
    );
    await start("kube-scheduler", schedulerArgs(stateDir, ports, kubeconfigPath));
    // KWOK_WORKDIR keeps a developer's ~/.kwok/kwok.yaml from being merged into this configuration.
    await start("kwok", kwokArgs(kubeconfigPath, kwokConfigPath, options.pacing?.nodeLeaseDurationSeconds), {
      KWOK_WORKDIR: join(stateDir, "kwok"),
    });

    const facts = simulatedNodeFacts(versions);
    const nodeNames = Array.from({ length: options.nodes }, (_, index) => simulatedNodeName(index));
    await Promise.all(
      nodeNames.map((_, index) => core.createNode({ body: renderSimulatedNode(index, facts) })),
    );
    await gate("nodes Ready", () => waitForNodesReady(core, nodeNames, remaining()));
    log.info({ nodes: nodeNames, ms: Date.now() - started }, "nodes Ready");

    await gate("health-check DaemonSet", () => runHealthCheckDaemonSet(core, apps, nodeNames, remaining()));
    const startupMs = Date.now() - started;
    log.info({ ms: startupMs }, "control plane healthy");

    const pids = Object.fromEntries(running.map((child) => [child.name, child.pid])) as Record<
      ComponentName,
      number
    >;
    return {
      kubeconfigPath,
      server,
      pki,
      stateDir,
      binDir: options.binDir,
      versions,
      nodeNames,
      ports,
      pids,
      startupMs,
      stop: () => stopCluster(stateDir, log),
    };
  } catch (error) {
    const logs = await Promise.all(
      running.map(async (child) => `--- ${child.log}\n${await logTail(child.log, 15)}`),
    );
    await stopCluster(stateDir, log).catch((stopError: unknown) =>
      log.error({ err: stopError }, "cleanup failed"),
    );
    const message = error instanceof Error ? error.message : String(error);
    throw new Error(`control plane did not start: ${message}\nlast log lines:\n${logs.join("\n")}`, {
      cause: error,
    });
  }
}

/**
 * Listens on port 0 for each port at once, so the kernel hands out distinct free ports; they are
 * released just before the components bind them.
 */
async function pickFreePorts(): Promise<ClusterPorts> {
  const servers = await Promise.all(
    Array.from({ length: 5 }, () => {
      const server = createServer();
      return new Promise<typeof server>((resolve, reject) => {
        server.once("error", reject);
        server.listen(0, "127.0.0.1", () => resolve(server));
      });
    }),
  );
  const ports = servers.map((server) => {
    const address = server.address();
    if (address === null || typeof address === "string") throw new Error("no TCP port assigned");
    return address.port;
  });
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  const [etcdClient, etcdPeer, apiServer, controllerManager, scheduler] = ports as [
    number,
    number,
    number,
    number,
    number,
  ];
  return { etcdClient, etcdPeer, apiServer, controllerManager, scheduler };
}

async function renderAdminKubeconfig(server: string, pki: Pki): Promise<string> {
  const base64 = async (path: string): Promise<string> => (await readFile(path)).toString("base64");
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      { name: "dpo-local", cluster: { server, "certificate-authority-data": await base64(pki.caCert) } },
    ],
    users: [
      {
        name: "dpo-admin",
        user: {
          "client-certificate-data": await base64(pki.adminCert),
          "client-key-data": await base64(pki.adminKey),
        },
      },
    ],
    contexts: [{ name: "dpo-local", context: { cluster: "dpo-local", user: "dpo-admin" } }],
    "current-context": "dpo-local",
  });
}
