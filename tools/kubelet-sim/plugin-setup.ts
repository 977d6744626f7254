// Everything the kubelet sets up before a plugin container starts: the config volume (host paths moved
// into the node's tree), a token bound to the pod for its ServiceAccount, the env and the args.
import { KubeConfig, type V1Container, type V1Pod } from "@kubernetes/client-node";
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Logger } from "pino";
import { DEFAULT_CDI_DIR } from "../../src/cdi/spec.js";
import { isNotFound } from "../../src/kube/errors.js";
import { PLUGIN_CONFIG_KEY } from "../../src/contract/plugin-config.js";
import { freePort } from "../cluster/tcp-relay.js";
import type { ImageRuntime, Launch } from "./container-runtime.js";
import type { KubeletApi } from "./kubelet-api.js";
import type { PreparedPod } from "./node-pods.js";
import {
  configMapFileAt,
  expandVariableReferences,
  flagValue,
  resolveContainerEnv,
  rewritePluginArgs,
  simulatedPluginConfigText,
  simulatedPluginEnv,
  type PluginProcessPaths,
} from "./plugin-pod.js";
import { nodeHostPath, type SimulatedNode } from "./simulated-node.js";

/** TokenRequest's own minimum is 10 minutes; an hour outlasts any test, so no refresh is simulated. */
const TOKEN_EXPIRATION_SECONDS = 3_600;

export interface PluginSetupOptions {
  api: KubeletApi;
  log: Logger;
  /** The simulator's root: plugin logs go to `<root>/logs/<node>/`. */
  root: string;
  /** Plugins serve /metrics on their probe port (KubeletSimulatorOptions.pluginMetrics). */
  pluginMetrics: boolean;
  /** The API server address in the plugins' kubeconfig, when it is not the simulator's own. */
  pluginApiServer: string | undefined;
  /** The runtime of the build that runs for a container image, prepared once per build. */
  runtimeFor: (image: string) => Promise<ImageRuntime>;
}

/** Everything the kubelet sets up before the container starts: config volume, token, env, args. */
export async function preparePluginPod(
  options: PluginSetupOptions,
  node: SimulatedNode,
  slot: string,
  pod: V1Pod,
): Promise<PreparedPod> {
  const { api, log } = options;
  const namespace = pod.metadata?.namespace ?? "";
  const name = pod.metadata?.name ?? "";
  const uid = pod.metadata?.uid ?? "";
  const container: V1Container | undefined = pod.spec?.containers[0];
  if (container === undefined) throw new Error(`pod ${namespace}/${name} has no container`);
  const podDir = `/var/lib/kubelet/pods/${uid}`;

  const { env: podEnv, unresolved } = resolveContainerEnv(pod, container);
  if (unresolved.length > 0) {
    log.warn({ node: node.name, pod: `${namespace}/${name}`, env: unresolved }, "env values not simulated");
  }
  const args = (container.args ?? []).map((arg) => expandVariableReferences(arg, podEnv));

  const containerConfigPath = flagValue(args, "config");
  const source =
    containerConfigPath === undefined
      ? { volume: "config", configMap: configVolumeName(pod), key: PLUGIN_CONFIG_KEY }
      : configMapFileAt(pod, container, containerConfigPath);
  if (source?.configMap === undefined) {
    throw new Error(
      `pod ${namespace}/${name}: no ConfigMap volume holds --config ${containerConfigPath ?? ""}`,
    );
  }
  // The kubelet mounts a pod's volumes side by side: the config and the token are asked for at once.
  const token = podKubeconfig(options, node, pod);
  token.catch(() => undefined);
  const configMap = await api.configMap(namespace, source.configMap);
  const text = configMap.data?.[source.key];
  if (text === undefined)
    throw new Error(`ConfigMap ${namespace}/${source.configMap} has no key ${source.key}`);
  const configFile = nodeHostPath(
    node,
    `${podDir}/volumes/kubernetes.io~configmap/${source.volume}/${source.key}`,
  );
  await mkdir(dirname(configFile), { recursive: true });
  await writeFile(
    configFile,
    simulatedPluginConfigText(text, (p) => nodeHostPath(node, p)),
  );

  const env: Record<string, string> = { PATH: process.env.PATH ?? "/usr/bin:/bin", ...podEnv };
  const kubeconfigFile = await token;
  if (kubeconfigFile !== undefined) env.DPO_KUBECONFIG = kubeconfigFile;

  const logDir = join(options.root, "logs", node.name);
  await mkdir(logDir, { recursive: true });
  // Every plugin shares this host's loopback: each gets a port of its own, where its prober looks
  // (and, with pluginMetrics, where /metrics is scraped: the same address makes one listener).
  const healthPort = await freePort();
  const paths: PluginProcessPaths = {
    configFile,
    devicePluginDir: node.devicePluginDir,
    pluginsRegistryDir: node.pluginsRegistryDir,
    draPluginsDir: node.draPluginsDir,
    // A plugin with CDI writes its spec into the node's tree, never into this host's /var/run/cdi.
    cdiDir: nodeHostPath(node, DEFAULT_CDI_DIR),
    healthAddr: `127.0.0.1:${healthPort}`,
    ...(options.pluginMetrics ? { metricsAddr: `127.0.0.1:${healthPort}` } : {}),
    podResourcesSocket: node.podResources.socketPath,
  };
  const launch: Launch = {
    args: rewritePluginArgs(args, paths),
    env: { ...env, ...simulatedPluginEnv(paths) },
    logFile: join(logDir, `${namespace}_${name}_${uid}.log`),
  };
  const runtime = options.runtimeFor(container.image ?? "");
  return {
    node: node.name,
    slot,
    namespace,
    name,
    uid,
    image: container.image ?? "",
    runtime: await runtime,
    launch,
    healthPort,
    metricsUrl: options.pluginMetrics ? `http://127.0.0.1:${healthPort}/metrics` : undefined,
    readinessProbe: container.readinessProbe,
    pod,
  };
}

function configVolumeName(pod: V1Pod): string | undefined {
  return pod.spec?.volumes?.find((v) => v.name === "config")?.configMap?.name;
}

/**
 * A kubeconfig whose credential is a token bound to the pod, for its ServiceAccount: the plugin gets
 * exactly the RBAC its pod would. Without the ServiceAccount there is no token (logged).
 */
async function podKubeconfig(
  options: PluginSetupOptions,
  node: SimulatedNode,
  pod: V1Pod,
): Promise<string | undefined> {
  const namespace = pod.metadata?.namespace ?? "";
  const serviceAccount = pod.spec?.serviceAccountName ?? "default";
  let token: string;
  try {
    token = await options.api.podToken(pod, serviceAccount, TOKEN_EXPIRATION_SECONDS);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    options.log.warn(
      { node: node.name, pod: `${namespace}/${pod.metadata?.name}`, serviceAccount },
      "ServiceAccount not found; the plugin runs without API credentials",
    );
    return undefined;
  }
  const cluster = options.api.kubeconfig.getCurrentCluster();
  if (cluster === null) throw new Error("the simulator's kubeconfig has no current cluster");
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ ...cluster, name: "cluster", server: options.pluginApiServer ?? cluster.server }],
    users: [{ name: serviceAccount, token }],
    contexts: [{ name: "pod", cluster: "cluster", user: serviceAccount, namespace }],
    currentContext: "pod",
  });
  const file = nodeHostPath(node, `/var/lib/kubelet/pods/${pod.metadata?.uid}/kubeconfig`);
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, kc.exportConfig(), { mode: 0o600 });
  return file;
}
