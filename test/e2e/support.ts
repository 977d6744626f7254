// End-to-end set-up shared by the operator tests: install dpo's CRDs and RBAC from config/ into the test
// cluster, and run the built operator as a process under its own ServiceAccount (never as admin).
import { AppsV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GROUP, PLURAL, VERSION } from "../../src/api/v1beta1/config.js";
import { configLabelValue, LABEL_CONFIG } from "../../src/contract/names.js";
import { DEFAULT_PLUGIN_HOST_PATHS, imageRepository } from "../../src/operator/render/plugin-policy.js";
import { installDpo as installDpoWith, type InstallOptions } from "../../tools/cluster/install-dpo.js";
import { issuedToken } from "../../tools/cluster/kubeconfig.js";
import { kubeConfigFromInjected, kubeConfigWithToken, kubectl, waitFor } from "../cluster/helpers.js";

export const NAMESPACE = "dpo-system";
export const OPERATOR_SA = "dpo-operator";
export const repo = join(import.meta.dirname, "..", "..");
export const dpoEntrypoint = join(repo, "dist", "dpo.js");

/** Applies config/default as a user would, minus the operator Deployment (the tests run it as a process). */
export async function installDpo(options: InstallOptions = {}): Promise<void> {
  await installDpoWith(
    async (args, input) => (await kubectl(args, input === undefined ? {} : { input })).stdout,
    options,
  );
}

/** A kubeconfig file that authenticates as the operator's ServiceAccount (a TokenRequest token). */
export async function serviceAccountKubeconfig(
  sa: string,
  namespace = NAMESPACE,
  /**
   * Another address of the API server (a proxy in front of it); the cluster's own by default. A plain
   * http:// one (a test's proxy on loopback) has no TLS to verify, which client-node wants said explicitly.
   */
  server?: string,
): Promise<string> {
  const core = kubeConfigFromInjected().makeApiClient(CoreV1Api);
  const token = await core.createNamespacedServiceAccountToken({
    name: sa,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const kc: KubeConfig = kubeConfigWithToken(issuedToken(token, sa));
  if (server !== undefined) {
    const cluster = kc.getCurrentCluster()!;
    const plain = server.startsWith("http://");
    kc.clusters = kc.clusters.map((c) =>
      c.name !== cluster.name ? c : plain ? { name: c.name, server, skipTLSVerify: true } : { ...c, server },
    );
  }
  const file = join(mkdtempSync(join(tmpdir(), "dpo-e2e-kc-")), "kubeconfig");
  writeFileSync(file, kc.exportConfig(), { mode: 0o600 });
  return file;
}

export interface OperatorProcess {
  child: ChildProcess;
  /** The kubeconfig file it runs with (its own ServiceAccount token). */
  kubeconfig: string;
  logs: string[];
  metricsPort: number;
  /** The conversion webhook's port, when started with --webhook-addr. */
  webhookPort: number | undefined;
  metric(name: string): Promise<number>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `dpo operator` with the operator ServiceAccount's credentials and waits for its metrics port. */
export async function startOperator(
  args: string[] = [],
  env: Record<string, string> = {},
  options: {
    /** Another build of dpo (see tools/cluster/old-build.ts); default the current dist/dpo.js. */
    entrypoint?: string;
    /** The image the operator gives plugin pods (the kubelet simulator maps images to builds). */
    pluginImage?: string;
    /** Where the operator reaches the API server (a proxy in front of it); the cluster's own by default. */
    apiServer?: string;
    /** The operator's namespace, where its ServiceAccount is (a Helm release's); dpo-system by default. */
    namespace?: string;
    /** Node flags before the entrypoint, such as the Deployment's heap flags. */
    nodeFlags?: string[];
  } = {},
): Promise<OperatorProcess> {
  const namespace = options.namespace ?? NAMESPACE;
  const pluginImage = options.pluginImage ?? "dpo:e2e";
  const kubeconfig = await serviceAccountKubeconfig(OPERATOR_SA, namespace, options.apiServer);
  const child = spawn(
    process.execPath,
    [
      ...(options.nodeFlags ?? []),
      options.entrypoint ?? dpoEntrypoint,
      "operator",
      "--kubeconfig",
      kubeconfig,
      "--namespace",
      namespace,
      "--metrics-addr",
      "127.0.0.1:0",
      "--health-addr",
      "0",
      "--plugin-image",
      pluginImage,
      ...args,
    ],
    // No conversion webhook unless a test asks for one (--webhook-addr): most need none, and two replicas
    // would compete for one port.
    {
      // The plugin policy as flags' twins, which builds from before the policy ignore: the tests' broken
      // images live in registry.example/dpo, and the real-node tests keep their health files in their own
      // /run directories.
      env: {
        ...process.env,
        DPO_LOG_LEVEL: "info",
        DPO_WEBHOOK_ADDR: "0",
        DPO_PLUGIN_IMAGE_ALLOW: [imageRepository(pluginImage), "registry.example/dpo"].join(","),
        DPO_PLUGIN_HOST_PATH_ALLOW: [
          ...DEFAULT_PLUGIN_HOST_PATHS,
          "/run/dpo-node-test",
          "/run/dpo-node-dra",
          "/run/dpo-parity",
        ].join(","),
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  const logs: string[] = [];
  child.stdout.setEncoding("utf8").on("data", (d: string) => logs.push(d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => logs.push(d));
  // 'close', not 'exit': the process has exited and its stdout and stderr are read to the end.
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  // An operator that does not come up is killed here: the caller never gets a handle to stop it, and
  // one left running would reconcile every later test file's configs.
  const started = await waitFor(
    "the operator to log its metrics port",
    (observe) => {
      observe(logs.join("").slice(-2000));
      if (child.exitCode !== null)
        throw new Error(`operator exited with ${child.exitCode}: ${logs.join("")}`);
      for (const line of logs.join("").split("\n")) {
        if (!line.startsWith("{")) continue;
        const event = JSON.parse(line) as { msg?: string; ports?: number[]; webhookPort?: number };
        if (event.msg === "operator starting" && event.ports?.[0]) {
          return { metricsPort: event.ports[0], webhookPort: event.webhookPort };
        }
      }
      return undefined;
    },
    // A deadline, not a measure: a cold start of an old build on a loaded machine takes a while.
    { timeoutMs: 60_000, intervalMs: 50 },
  ).catch((err: unknown) => {
    child.kill("SIGKILL");
    throw err;
  });
  return {
    child,
    kubeconfig,
    logs,
    metricsPort: started.metricsPort,
    webhookPort: started.webhookPort,
    async metric(name: string): Promise<number> {
      const text = await (await fetch(`http://127.0.0.1:${started.metricsPort}/metrics`)).text();
      let sum = 0;
      for (const line of text.split("\n")) {
        if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) sum += Number(line.split(" ").pop());
      }
      return sum;
    },
    async stop(signal: NodeJS.Signals = "SIGTERM"): Promise<number | null> {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** Flags for operator replicas that elect a leader on `leaseName`, with short terms so tests move. */
export function leaderElectionArgs(leaseName: string): string[] {
  return [
    "--leader-elect",
    "true",
    "--leader-election-id",
    leaseName,
    "--lease-duration",
    "4",
    "--renew-deadline",
    "3",
    "--retry-period",
    "1",
  ];
}

/**
 * Deletes the configs and waits until their plugin DaemonSets and pods are gone. The cluster tier's files share
 * one cluster and its nodes: the next file's simulator must not find this file's plugin pods on them. The
 * DaemonSets go by garbage collection, and a pod's deletion is confirmed by the kubelet, so the file's
 * simulator must still run while this waits.
 */
export async function deleteConfigsAndWait(kc: KubeConfig, names: readonly string[]): Promise<void> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const apps = kc.makeApiClient(AppsV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  for (const name of names)
    await custom
      .deleteClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, name })
      .catch(() => undefined);
  const selector = `${LABEL_CONFIG} in (${names.map(configLabelValue).join(",")})`;
  await waitFor(
    `the plugin DaemonSets and pods of ${names.join(", ")} to be gone`,
    async (observe) => {
      const [sets, pods] = await Promise.all([
        apps.listNamespacedDaemonSet({ namespace: NAMESPACE, labelSelector: selector }),
        core.listNamespacedPod({ namespace: NAMESPACE, labelSelector: selector }),
      ]);
      observe({ daemonSets: sets.items.length, pods: pods.items.map((p) => p.metadata?.name) });
      return sets.items.length === 0 && pods.items.length === 0;
    },
    { timeoutMs: 60_000 },
  );
}
