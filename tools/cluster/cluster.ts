// Starts a real local control plane (etcd, kube-apiserver, controller-manager, scheduler, KWOK nodes) for tests and demos.
import { AppsV1Api, CoreV1Api, KubeConfig, type V1DaemonSet, type V1Node } from "@kubernetes/client-node";
import { execFile } from "node:child_process";
import { access, mkdir, readFile, writeFile } from "node:fs/promises";
import { request, type RequestOptions } from "node:https";
import { createServer } from "node:net";
import { arch } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { pino, type Logger } from "pino";
import { stringify } from "yaml";
import { renderKwokConfig, simulatedKubeletStages } from "./kwok-stages.js";
import {
  goArchitecture,
  renderSimulatedNode,
  SIMULATED_NODE_LABEL,
  type SimulatedNodeFacts,
  SIMULATED_NODE_SELECTOR,
  simulatedNodeName,
} from "./nodes.js";
import { stopRealNode } from "../real-node/real-node.js";
import { assertOpensslAvailable, FRONT_PROXY_CLIENT_NAME, generatePki, type Pki } from "./pki.js";
import {
  logTail,
  restartRecordedProcess,
  spawnRecorded,
  stopRecordedProcesses,
  type RunningProcess,
} from "./processes.js";
import { waitFor } from "./wait.js";

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

export const SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24";
/** Pod IPs KWOK hands out; apart from the service range so the two never look alike. */
export const POD_CIDR = "10.244.0.0/16";
/** Where the startup gate runs its DaemonSet; deleted again before startCluster returns. */
export const HEALTH_CHECK_NAMESPACE = "dpo-cluster-check";
/** Never pulled: KWOK runs no containers. */
export const PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1";

export const COMPONENTS = [
  "etcd",
  "kube-apiserver",
  "kube-controller-manager",
  "kube-scheduler",
  "kwok",
] as const;
export type ComponentName = (typeof COMPONENTS)[number];
export const BINARIES = [...COMPONENTS, "kubectl"] as const;

export interface PinnedVersions {
  kubernetes: string;
  etcd: string;
  kwok: string;
}

export interface ClusterPorts {
  etcdClient: number;
  etcdPeer: number;
  apiServer: number;
  controllerManager: number;
  scheduler: number;
}

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
const run = promisify(execFile);

/**
 * The Kubernetes release a run uses: `K8S_VERSION` (as k8s-version.sh reads it, so the binaries build.sh
 * printed and the nodes' kubeletVersion agree), else the pinned one.
 */
export function selectedKubernetesVersion(pinned: string, env: NodeJS.ProcessEnv = process.env): string {
  const wanted = env.K8S_VERSION?.trim();
  return wanted ? `v${wanted.replace(/^v/, "")}` : pinned;
}

/** The versions of versions.env, with the Kubernetes release `K8S_VERSION` picks. */
export async function readPinnedVersions(): Promise<PinnedVersions> {
  const text = await readFile(new URL("./versions.env", import.meta.url), "utf8");
  const value = (key: string): string => {
    const match = new RegExp(`^${key}=(\\S+)$`, "m").exec(text);
    if (!match?.[1]) throw new Error(`tools/cluster/versions.env has no ${key}`);
    return match[1];
  };
  return {
    kubernetes: selectedKubernetesVersion(value("KUBERNETES_VERSION")),
    etcd: value("ETCD_VERSION"),
    kwok: value("KWOK_VERSION"),
  };
}

/** What every simulated node reports of its kubelet, KWOK and machine, from the pinned versions. */
export function simulatedNodeFacts(versions: PinnedVersions): SimulatedNodeFacts {
  return {
    kubernetesVersion: versions.kubernetes,
    kwokVersion: versions.kwok,
    architecture: goArchitecture(arch()),
  };
}

/**
 * Runs build.sh, which builds the binaries once per version set and afterwards only prints where
 * they are; its progress goes to this process's stderr.
 */
export async function buildOrReuseBinaries(): Promise<string> {
  const build = fileURLToPath(new URL("./build.sh", import.meta.url));
  const child = run(build, [], { maxBuffer: 1 << 20 });
  child.child.stderr?.pipe(process.stderr);
  const { stdout } = await child;
  const binDir = stdout.trim().split("\n").at(-1);
  if (!binDir) throw new Error(`${build} printed no binary directory`);
  return binDir;
}

export async function readClusterRecord(stateDir: string): Promise<ClusterRecord> {
  return JSON.parse(await readFile(join(stateDir, CLUSTER_RECORD_FILE), "utf8")) as ClusterRecord;
}

/** Stops the processes recorded in `stateDir`, whichever process started them. */
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

export async function stopCluster(stateDir: string, log?: Logger): Promise<void> {
  // A real node's containers and host changes go first, while its containerd still answers.
  await stopRealNode(stateDir, log);
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

async function assertBinaries(binDir: string): Promise<void> {
  const missing: string[] = [];
  for (const binary of BINARIES) {
    try {
      await access(join(binDir, binary));
    } catch {
      missing.push(binary);
    }
  }
  if (missing.length > 0) {
    throw new Error(`${binDir} lacks ${missing.join(", ")}; build them with tools/cluster/build.sh`);
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

function etcdArgs(stateDir: string, ports: ClusterPorts): string[] {
  const client = `http://127.0.0.1:${ports.etcdClient}`;
  const peer = `http://127.0.0.1:${ports.etcdPeer}`;
  return [
    "--name=dpo",
    `--data-dir=${join(stateDir, "etcd")}`,
    `--listen-client-urls=${client}`,
    `--advertise-client-urls=${client}`,
    `--listen-peer-urls=${peer}`,
    `--initial-advertise-peer-urls=${peer}`,
    `--initial-cluster=dpo=${peer}`,
    "--initial-cluster-state=new",
    // Test data: durability is not worth the fsync latency.
    "--unsafe-no-fsync=true",
    "--log-level=warn",
  ];
}

function apiServerArgs(stateDir: string, ports: ClusterPorts, pki: Pki, realNode: boolean): string[] {
  return [
    `--etcd-servers=http://127.0.0.1:${ports.etcdClient}`,
    `--bind-address=${realNode ? "0.0.0.0" : "127.0.0.1"}`,
    "--advertise-address=127.0.0.1",
    `--secure-port=${ports.apiServer}`,
    `--cert-dir=${join(stateDir, "certs")}`,
    `--tls-cert-file=${pki.apiServerCert}`,
    `--tls-private-key-file=${pki.apiServerKey}`,
    `--client-ca-file=${pki.caCert}`,
    `--requestheader-client-ca-file=${pki.frontProxyCaCert}`,
    `--requestheader-allowed-names=${FRONT_PROXY_CLIENT_NAME}`,
    "--requestheader-username-headers=X-Remote-User",
    "--requestheader-group-headers=X-Remote-Group",
    "--requestheader-extra-headers-prefix=X-Remote-Extra-",
    `--proxy-client-cert-file=${pki.frontProxyClientCert}`,
    `--proxy-client-key-file=${pki.frontProxyClientKey}`,
    "--authorization-mode=Node,RBAC",
    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
    `--service-account-key-file=${pki.serviceAccountPublicKey}`,
    `--service-account-signing-key-file=${pki.serviceAccountKey}`,
    `--service-cluster-ip-range=${SERVICE_CLUSTER_IP_RANGE}`,
    "--allow-privileged=true",
    "--enable-admission-plugins=NodeRestriction",
    // Logs and exec on a real node: node names do not resolve here, and kubelets check client certificates.
    "--kubelet-preferred-address-types=InternalIP,Hostname",
    `--kubelet-client-certificate=${pki.kubeletClientCert}`,
    `--kubelet-client-key=${pki.kubeletClientKey}`,
    // Nothing reaches the API through the kubernetes Service, and a loopback endpoint is invalid.
    "--endpoint-reconciler-type=none",
    "--profiling=false",
    "--v=1",
  ];
}

function controllerManagerArgs(
  stateDir: string,
  ports: ClusterPorts,
  pki: Pki,
  kubeconfigPath: string,
  nodeLeaseDurationSeconds?: number,
): string[] {
  return [
    `--kubeconfig=${kubeconfigPath}`,
    `--authentication-kubeconfig=${kubeconfigPath}`,
    `--authorization-kubeconfig=${kubeconfigPath}`,
    "--bind-address=127.0.0.1",
    `--secure-port=${ports.controllerManager}`,
    // Longer leases are renewed less often: a node is lost only after a whole lease without renewal.
    ...(nodeLeaseDurationSeconds === undefined
      ? []
      : [`--node-monitor-grace-period=${nodeLeaseDurationSeconds + 10}s`]),
    `--cert-dir=${join(stateDir, "certs")}`,
    "--controllers=*",
    "--use-service-account-credentials=true",
    `--service-account-private-key-file=${pki.serviceAccountKey}`,
    `--root-ca-file=${pki.caCert}`,
    `--cluster-signing-cert-file=${pki.caCert}`,
    `--cluster-signing-key-file=${pki.caKey}`,
    `--service-cluster-ip-range=${SERVICE_CLUSTER_IP_RANGE}`,
    "--cluster-name=dpo-local",
    // The default 20 QPS makes a 1000-node cluster take minutes to drop its not-ready taints.
    "--kube-api-qps=200",
    "--kube-api-burst=400",
    "--leader-elect=false",
    "--profiling=false",
    "--v=1",
  ];
}

function schedulerArgs(stateDir: string, ports: ClusterPorts, kubeconfigPath: string): string[] {
  return [
    `--kubeconfig=${kubeconfigPath}`,
    `--authentication-kubeconfig=${kubeconfigPath}`,
    `--authorization-kubeconfig=${kubeconfigPath}`,
    "--bind-address=127.0.0.1",
    `--secure-port=${ports.scheduler}`,
    `--cert-dir=${join(stateDir, "certs")}`,
    "--leader-elect=false",
    "--profiling=false",
    "--v=1",
  ];
}

function kwokArgs(kubeconfigPath: string, configPath: string, nodeLeaseDurationSeconds = 40): string[] {
  return [
    `--kubeconfig=${kubeconfigPath}`,
    `--config=${configPath}`,
    `--manage-nodes-with-label-selector=${SIMULATED_NODE_SELECTOR}`,
    // Leases are what the node lifecycle controller watches; without them nodes turn NotReady.
    `--node-lease-duration-seconds=${nodeLeaseDurationSeconds}`,
    `--cidr=${POD_CIDR}`,
  ];
}

/** Races `work` against the exit of any started component, whose log then explains the failure. */
async function untilFirstExit<T>(
  running: RunningProcess[],
  work: () => Promise<T>,
  step: string,
): Promise<T> {
  const abort = new AbortController();
  const exits = running.map((child) =>
    child.exited.then(async (exit) => {
      if (abort.signal.aborted) return new Promise<never>(() => undefined);
      throw new Error(
        `${child.name} exited (code ${exit.code}, signal ${exit.signal}) during "${step}"; ` +
          `its log ${child.log} ends with:\n${await logTail(child.log)}`,
      );
    }),
  );
  try {
    return await Promise.race([work(), ...exits]);
  } finally {
    abort.abort();
  }
}

async function etcdHealthy(port: number): Promise<boolean> {
  const response = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2_000) });
  const body = (await response.json()) as { health?: string };
  return body.health === "true";
}

async function apiServerReady(server: string, pki: Pki): Promise<boolean> {
  const [ca, cert, key] = await Promise.all(
    [pki.caCert, pki.adminCert, pki.adminKey].map((p) => readFile(p)),
  );
  return new Promise<boolean>((resolve, reject) => {
    const req = request(`${server}/readyz`, { ca, cert, key, timeout: 2_000 }, (response) => {
      response.resume();
      response.on("end", () => resolve(response.statusCode === 200));
    });
    req.on("timeout", () => req.destroy(new Error("readyz request timed out")));
    req.on("error", reject);
    req.end();
  });
}

function nodeProblems(node: V1Node | undefined, name: string): string[] {
  if (!node) return [`${name}: missing`];
  const ready = node.status?.conditions?.find((condition) => condition.type === "Ready");
  const problems: string[] = [];
  if (ready?.status !== "True") problems.push(`${name}: Ready=${ready?.status ?? "none"}`);
  // The node lifecycle controller removes this taint a moment after Ready; pods schedule only then.
  for (const taint of node.spec?.taints ?? []) problems.push(`${name}: taint ${taint.key}:${taint.effect}`);
  return problems;
}

/** Waits until every node of `nodeNames` is Ready and has no taint left (pods schedule only then). */
export async function waitForNodesReady(
  core: CoreV1Api,
  nodeNames: readonly string[],
  timeoutMs: number,
  intervalMs = 200,
): Promise<void> {
  await waitFor(
    `${nodeNames.length} simulated nodes Ready without taints`,
    async (observe) => {
      const list = await core.listNode({ labelSelector: SIMULATED_NODE_SELECTOR });
      const byName = new Map(list.items.map((node) => [node.metadata?.name, node]));
      const problems = nodeNames.flatMap((name) => nodeProblems(byName.get(name), name));
      observe(problems);
      return problems.length === 0;
    },
    { timeoutMs, intervalMs },
  );
}

/**
 * A DaemonSet reaching Running on every node needs the controller-manager (DaemonSet controller,
 * service-account controller), the scheduler and KWOK together; its foreground deletion needs the
 * garbage collector and KWOK again. One check for all of them.
 */
async function runHealthCheckDaemonSet(
  core: CoreV1Api,
  apps: AppsV1Api,
  nodeNames: string[],
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const left = (): number => Math.max(deadline - Date.now(), 1_000);
  const namespace = HEALTH_CHECK_NAMESPACE;
  const name = "cluster-check";
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  // Pods are rejected until the namespace's default ServiceAccount exists; waiting here avoids the
  // DaemonSet controller's backoff.
  await waitFor(
    `ServiceAccount ${namespace}/default`,
    () => core.readNamespacedServiceAccount({ name: "default", namespace }),
    { timeoutMs: left(), intervalMs: 100 },
  );
  const daemonSet: V1DaemonSet = {
    metadata: { name, namespace },
    spec: {
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          nodeSelector: { [SIMULATED_NODE_LABEL]: "true" },
          containers: [{ name: "pause", image: PAUSE_IMAGE }],
        },
      },
    },
  };
  await apps.createNamespacedDaemonSet({ namespace, body: daemonSet });
  await waitFor(
    `DaemonSet ${namespace}/${name} pods Running on ${nodeNames.join(", ")}`,
    async (observe) => {
      const pods = await core.listNamespacedPod({ namespace, labelSelector: `app=${name}` });
      const runningOn = new Set(
        pods.items.filter((pod) => pod.status?.phase === "Running").map((pod) => pod.spec?.nodeName),
      );
      observe(
        pods.items.map((pod) => `${pod.metadata?.name}@${pod.spec?.nodeName ?? "-"}:${pod.status?.phase}`),
      );
      return nodeNames.every((node) => runningOn.has(node));
    },
    { timeoutMs: left(), intervalMs: 200 },
  );
  await apps.deleteNamespacedDaemonSet({ name, namespace, propagationPolicy: "Foreground" });
  await waitFor(
    `DaemonSet ${namespace}/${name} and its pods deleted`,
    async (observe) => {
      const pods = await core.listNamespacedPod({ namespace, labelSelector: `app=${name}` });
      const daemonSets = await apps.listNamespacedDaemonSet({ namespace });
      observe({ pods: pods.items.length, daemonSets: daemonSets.items.length });
      return pods.items.length === 0 && daemonSets.items.length === 0;
    },
    { timeoutMs: left(), intervalMs: 200 },
  );
  await core.deleteNamespace({ name: namespace });
}
