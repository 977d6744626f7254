// What the cluster benchmarks share: growing the local control plane to N KWOK nodes, and running the
// built operator under its own ServiceAccount.
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { openSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  buildOrReuseBinaries,
  readPinnedVersions,
  simulatedNodeFacts,
  startCluster,
  waitForNodesReady,
  type ClusterHandle,
} from "../tools/cluster/cluster.js";
import { installDpo } from "../tools/cluster/install-dpo.js";
import { deploymentNodeFlags, deploymentRuntimeEnv } from "./memory-cgroup.js";
import { PACING } from "./operator/knobs.js";
import { issuedToken, withBearerToken } from "../tools/cluster/kubeconfig.js";
import { renderSimulatedNode, simulatedNodeName } from "../tools/cluster/nodes.js";

const repo = join(import.meta.dirname, "..");

/**
 * Creates simulated nodes `from`..`total - 1` the way the test cluster creates its own (50 at a time),
 * then waits until all `total` are Ready and untainted (the node lifecycle controller lifts its
 * not-ready taint some time after Ready).
 */
export async function growToNodes(core: CoreV1Api, from: number, total: number): Promise<void> {
  const facts = simulatedNodeFacts(await readPinnedVersions());
  for (let start = from; start < total; start += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, total - start) }, (_, i) =>
        core.createNode({ body: renderSimulatedNode(start + i, facts) }),
      ),
    );
  }
  const names = Array.from({ length: total }, (_, i) => simulatedNodeName(i));
  // Listing thousands of nodes every 200 ms would load the API server the benchmark measures.
  await waitForNodesReady(core, names, 300_000, 1_000);
}

/**
 * The built `dpo operator` (dist/dpo.js) in `namespace` under the dpo-operator ServiceAccount's token,
 * logging to `<stateDir>/operator.log`; webhook, metrics and health servers off.
 */
export async function startBenchOperator(
  kc: KubeConfig,
  options: { stateDir: string; namespace: string; pluginImage: string; label: string; args?: string[] },
): Promise<ChildProcess> {
  const token = await kc.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
    name: "dpo-operator",
    namespace: options.namespace,
    body: { spec: { audiences: [], expirationSeconds: 7200 } },
  });
  const file = join(options.stateDir, "operator.kubeconfig");
  writeFileSync(
    file,
    withBearerToken(kc, issuedToken(token, "dpo-operator"), "dpo-operator").exportConfig(),
    {
      mode: 0o600,
    },
  );
  const log = join(options.stateDir, "operator.log");
  console.error(`${options.label}: operator log ${log}`);
  // As config/manager/deployment.yaml starts it: its Node flags (the heap cap) and runtime environment
  // (glibc malloc), so the RSS measured is the one to hold against the Deployment's memory limit.
  const deployment = readFileSync(join(repo, "config", "manager", "deployment.yaml"), "utf8");
  return spawn(
    process.execPath,
    [
      ...deploymentNodeFlags(deployment),
      join(repo, "dist", "dpo.js"),
      "operator",
      "--kubeconfig",
      file,
      "--namespace",
      options.namespace,
      // An ephemeral port on loopback (the operator logs it): the benchmarks read its counters.
      "--metrics-addr",
      "127.0.0.1:0",
      "--health-addr",
      "0",
      "--plugin-image",
      options.pluginImage,
      ...(options.args ?? []),
    ],
    {
      stdio: ["ignore", openSync(log, "a"), openSync(log, "a")],
      env: {
        ...process.env,
        ...deploymentRuntimeEnv(deployment),
        DPO_LOG_LEVEL: "info",
        DPO_WEBHOOK_ADDR: "0",
      },
    },
  );
}

/** `kubectl` of the built binaries against `kubeconfigPath`: stdout, or a rejection carrying stderr. */
export function kubectlRunner(binDir: string, kubeconfigPath: string) {
  return (args: string[], input?: string): Promise<string> =>
    new Promise((resolve, reject) => {
      const child = execFile(
        join(binDir, "kubectl"),
        ["--kubeconfig", kubeconfigPath, ...args],
        { maxBuffer: 64 << 20 },
        (err, stdout, stderr) =>
          err ? reject(new Error(`kubectl ${args.join(" ")}: ${stderr}`)) : resolve(stdout),
      );
      child.stdin?.end(input ?? "");
    });
}

export interface BenchCluster {
  readonly cluster: ClusterHandle;
  readonly kc: KubeConfig;
  readonly core: CoreV1Api;
  /** Every simulated node's name, `nodeCount` of them. */
  readonly nodes: string[];
  readonly kubectl: ReturnType<typeof kubectlRunner>;
}

/**
 * The local control plane (with the kubelet simulator's KWOK stages) under `stateDir`, grown to
 * `nodeCount` nodes, with dpo installed as `make demo` installs it but without the operator's
 * Deployment (the benchmarks run the built operator themselves). Stops the cluster again if a step
 * after its start fails.
 */
export async function startBenchCluster(stateDir: string, nodeCount: number): Promise<BenchCluster> {
  const binDir = await buildOrReuseBinaries();
  const cluster = await startCluster({
    nodes: Math.min(3, nodeCount),
    stateDir: join(stateDir, "cluster"),
    binDir,
    timeoutMs: 180_000,
    kubeletSimulator: true,
    // From a thousand nodes KWOK is paced as in bench-operator, or on this machine its leases and
    // heartbeats fall behind and the node lifecycle controller taints nodes unreachable (a 5000-node run
    // of 2026-11-27 had 1,041 of them within five minutes; a 1000-node run of 2026-11-29 on the machine
    // shared with other work, 176 within ten).
    ...(nodeCount >= 1000 ? { pacing: PACING } : {}),
  });
  try {
    const kc = new KubeConfig();
    kc.loadFromFile(cluster.kubeconfigPath);
    const core = kc.makeApiClient(CoreV1Api);
    await growToNodes(core, cluster.nodeNames.length, nodeCount);
    const nodes = Array.from({ length: nodeCount }, (_, i) => simulatedNodeName(i));
    const kubectl = kubectlRunner(binDir, cluster.kubeconfigPath);
    await installDpo(kubectl);
    return { cluster, kc, core, nodes, kubectl };
  } catch (err) {
    await cluster.stop();
    throw err;
  }
}
