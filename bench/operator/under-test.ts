// The system under test for one node count: the local control plane grown to N KWOK nodes with dpo's CRDs,
// and the built operator started as its Deployment starts it, behind a relay that counts its connections.
import { AppsV1Api, CoreV1Api, CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { AUDIT_STATUS_WRITES } from "../../tools/cluster/audit.js";
import { startCluster, type ClusterHandle } from "../../tools/cluster/cluster.js";
import type { ReportFleet } from "../../tools/cluster/report-fleet.js";
import { freePort } from "../../tools/cluster/tcp-relay.js";
import { waitFor } from "../../tools/cluster/wait.js";
import { deploymentRuntimeEnv, inCgroup, type MemoryCgroup } from "../memory-cgroup.js";
import { growToNodes } from "../support.js";
import { connectionCountingRelay, type ConnectionCountingRelay } from "./connections.js";
import { DEPLOYMENT, dpo, NODE_FLAGS, operatorMemoryLimit, PACING, repo } from "./knobs.js";
import type { Kubectl } from "./report-fleet.js";
import type { Row } from "./targets.js";

const run = promisify(execFile);

/** What one node count's run has started so far: all of it is stopped again, whichever step fails. */
export interface RunState {
  cluster?: ClusterHandle;
  operator?: ChildProcess;
  memoryLimit?: MemoryCgroup | { reason: string };
  relay?: ConnectionCountingRelay;
  fleet?: ReportFleet;
  /** The tail of the operator's stdout. */
  logs: string;
}

/** The started cluster's clients. */
export interface BenchClients {
  kubeconfigPath: string;
  kc: KubeConfig;
  core: CoreV1Api;
  apps: AppsV1Api;
  custom: CustomObjectsApi;
  kubectl: Kubectl;
}

/**
 * The control plane with `nodeCount` nodes, dpo's CRDs, its namespace and the plugin's ServiceAccount, and
 * the DevicePluginConfig CRD's conversion webhook pointed at the port the operator is to serve it on.
 */
export async function startClusterUnderTest(
  state: RunState,
  nodeCount: number,
  binDir: string,
  stateDir: string,
): Promise<{ clients: BenchClients; webhookPort: number }> {
  // Beyond a thousand nodes KWOK is paced (see PACING) or its leases and heartbeats fall behind.
  const cluster = await startCluster({
    nodes: 3,
    stateDir,
    binDir,
    timeoutMs: 180_000,
    auditPolicy: AUDIT_STATUS_WRITES,
    ...(nodeCount > 1000 ? { pacing: PACING } : {}),
  });
  state.cluster = cluster;
  const kc = new KubeConfig();
  kc.loadFromFile(cluster.kubeconfigPath);
  const core = kc.makeApiClient(CoreV1Api);
  const apps = kc.makeApiClient(AppsV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const kubectl = (args: string[]) =>
    run(join(binDir, "kubectl"), ["--kubeconfig", cluster.kubeconfigPath, ...args], {
      maxBuffer: 64 << 20,
    });

  // The remaining nodes, created the way the test cluster creates its own.
  const createStarted = Date.now();
  await growToNodes(core, 3, nodeCount);
  console.error(`bench-operator: ${nodeCount} nodes Ready and untainted in ${Date.now() - createStarted} ms`);

  await kubectl(["apply", "--server-side", "-k", join(repo, "config", "crd")]);
  await kubectl([
    "wait",
    "--for=condition=Established",
    "crd/devicepluginconfigs.dpo.dev",
    "crd/devicenodestates.dpo.dev",
  ]);
  await kubectl(["create", "namespace", "dpo-system"]);
  await kubectl(["create", "serviceaccount", "dpo-plugin", "-n", "dpo-system"]);
  // The conversion webhook on, as the Deployment runs it; the API server calls it on 127.0.0.1.
  const webhookPort = await freePort();
  await kubectl([
    "patch",
    "crd/devicepluginconfigs.dpo.dev",
    "--type=json",
    "-p",
    JSON.stringify([
      {
        op: "replace",
        path: "/spec/conversion/webhook/clientConfig",
        value: { url: `https://127.0.0.1:${webhookPort}/convert` },
      },
    ]),
  ]);
  return {
    clients: { kubeconfigPath: cluster.kubeconfigPath, kc, core, apps, custom, kubectl },
    webhookPort,
  };
}

/**
 * The built operator with leader election and the conversion webhook on, under the Deployment's memory
 * limit, flags and environment, logging to `state.logs`; resolves with its metrics port once it serves.
 */
export async function startOperatorUnderTest(
  state: RunState,
  nodeCount: number,
  stateDir: string,
  { kc, kubeconfigPath }: BenchClients,
  webhookPort: number,
  rows: Row[],
): Promise<{ operator: ChildProcess; relay: ConnectionCountingRelay; port: number }> {
  // The operator reaches the API server through a relay that counts its connections, and runs with
  // leader election on, as the Deployment runs it: Lease renewals are its steady traffic.
  const relay = await connectionCountingRelay(new URL(kc.getCurrentCluster()!.server));
  state.relay = relay;
  const relayed = new KubeConfig();
  relayed.loadFromString(
    readFileSync(kubeconfigPath, "utf8").replace(kc.getCurrentCluster()!.server, relay.url),
  );
  const operatorKubeconfig = join(stateDir, "operator-relayed.kubeconfig");
  writeFileSync(operatorKubeconfig, relayed.exportConfig(), { mode: 0o600 });
  const operatorArgs = [
    ...NODE_FLAGS,
    dpo,
    "operator",
    "--leader-elect=true",
    "--leader-election-id=dpo-bench",
    "--kubeconfig",
    operatorKubeconfig,
    "--metrics-addr",
    "127.0.0.1:0",
    "--health-addr",
    "0",
    `--webhook-addr=127.0.0.1:${webhookPort}`,
    "--webhook-hosts=127.0.0.1",
  ];
  const memoryLimit = operatorMemoryLimit(nodeCount);
  state.memoryLimit = memoryLimit;
  const [command, args] =
    "dir" in memoryLimit
      ? inCgroup(memoryLimit, process.execPath, operatorArgs)
      : [process.execPath, operatorArgs];
  const operator = spawn(command, args, {
    stdio: ["ignore", "pipe", "inherit"],
    env: {
      ...process.env,
      // As the Deployment sets them (glibc's malloc tuning), unless the caller set them itself.
      ...Object.fromEntries(
        Object.entries(deploymentRuntimeEnv(DEPLOYMENT)).filter(([name]) => process.env[name] === undefined),
      ),
      DPO_LOG_LEVEL: process.env["BENCH_OPERATOR_LOG_LEVEL"] ?? "info",
    },
  });
  state.operator = operator;
  state.logs = "";
  operator.once("exit", (code, signal) => {
    const oom = "dir" in memoryLimit ? memoryLimit.oomKills() : 0;
    console.error(
      `bench-operator: the operator exited (code ${code}, signal ${signal}${oom > 0 ? ", killed for going over its memory limit" : ""})`,
    );
  });
  rows.push({
    metric: `${nodeCount} nodes: operator memory limit`,
    value:
      "dir" in memoryLimit
        ? `${memoryLimit.limitBytes / 2 ** 20} MiB, a memory cgroup (Node sizes its heap from it, as in the pod)`
        : `none: ${memoryLimit.reason}`,
    target: "(reported)",
  });
  operator.stdout
    .setEncoding("utf8")
    .on(
      "data",
      (d: string) =>
        (state.logs = (state.logs + d).slice(process.env["BENCH_VERBOSE"] ? -50_000_000 : -100_000)),
    );
  const port = await waitFor("the operator's metrics port", () => {
    const m = /"ports":\[(\d+)/.exec(state.logs);
    return m ? Number(m[1]) : undefined;
  });
  return { operator, relay, port };
}
