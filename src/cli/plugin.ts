// `dpo plugin`: runs the device-plugin runtime for one DevicePluginConfig on this node.
import { readFile } from "node:fs/promises";
import { DEFAULT_CDI_DIR } from "../cdi/spec.js";
import {
  DEVICE_PLUGINS_DIR,
  DRA_PLUGINS_DIR,
  PLUGINS_REGISTRY_DIR,
  POD_RESOURCES_DIR,
  POD_RESOURCES_SOCKET_NAME,
} from "../contract/kubelet-paths.js";
import { REGISTRATION_MODES, type RegistrationMode } from "../contract/registration.js";
import { createJsonLogger, type LogLevelName } from "../observability/json-log.js";
import { listenEndpoints, type ListeningEndpoint, type ProbeHandlers } from "../observability/http.js";
import { ProcessMetrics } from "../observability/process-metrics.js";
import { DEFAULT_POD_RESOURCES_INTERVAL_MS } from "../plugin-runtime/podresources/monitor.js";
import { DEFAULT_CAPACITY_HEAL_AFTER_MS } from "../plugin-runtime/podresources/capacity-check.js";
import { DraRuntime } from "../plugin-runtime/dra/dra-runtime.js";
import {
  ApiClient,
  createNodeReporter,
  readNodeAnnotations,
  reportCredentials,
  reportTarget,
  type ApiCredentials,
  type NodeReporter,
} from "../plugin-runtime/report/index.js";
import { PluginRuntime, type RuntimeStatus } from "../plugin-runtime/runtime.js";
import {
  ENDPOINT_FLAGS,
  formatFlagHelp,
  parseListenAddress,
  resolveFlags,
  UsageError,
  type FlagSpec,
} from "./flags.js";
import { readPluginConfigApart } from "./plugin-config-apart.js";

export const PLUGIN_FLAGS: readonly FlagSpec[] = [
  { name: "config", env: "DPO_CONFIG", description: "DevicePluginConfig manifest (YAML or JSON) to serve." },
  {
    name: "device-plugin-dir",
    env: "DPO_DEVICE_PLUGIN_DIR",
    description: "The kubelet's device-plugins directory (holds kubelet.sock).",
    default: DEVICE_PLUGINS_DIR,
  },
  {
    name: "plugins-registry-dir",
    env: "DPO_PLUGINS_REGISTRY_DIR",
    description: "The kubelet's plugin-watcher directory (used with --registration watcher).",
    default: PLUGINS_REGISTRY_DIR,
  },
  {
    name: "dra-plugins-dir",
    env: "DPO_DRA_PLUGINS_DIR",
    description:
      "The kubelet's plugins directory; with spec.publish DRA the DRA socket is served in <dir>/<driver name>.",
    default: DRA_PLUGINS_DIR,
  },
  {
    name: "registration",
    env: "DPO_REGISTRATION",
    description: "How to register: kubelet (Register on kubelet.sock) or watcher (plugins_registry).",
    default: "kubelet",
    choices: REGISTRATION_MODES,
  },
  {
    name: "cdi-dir",
    env: "DPO_CDI_DIR",
    description:
      "Directory for the CDI spec of the devices (with spec.cdi.enabled); container runtimes read it.",
    default: DEFAULT_CDI_DIR,
  },
  {
    name: "pod-resources-socket",
    env: "DPO_POD_RESOURCES_SOCKET",
    description:
      "The kubelet's PodResources socket, read for which pods hold the devices (it moves with the kubelet's --root-dir).",
    default: `${POD_RESOURCES_DIR}/${POD_RESOURCES_SOCKET_NAME}`,
  },
  {
    name: "pod-resources-interval",
    env: "DPO_POD_RESOURCES_INTERVAL",
    description: "Seconds between two reads of the PodResources API; 0 turns the per-pod device view off.",
    default: String(DEFAULT_POD_RESOURCES_INTERVAL_MS / 1000),
  },
  {
    name: "capacity-heal-after",
    env: "DPO_CAPACITY_HEAL_AFTER",
    description:
      "Seconds the kubelet may hand out fewer devices than the plugin advertises as healthy (its PodResources GetAllocatableResources) before the plugin registers again; 0 turns it off. Device-plugin mode, read with the PodResources API.",
    default: String(DEFAULT_CAPACITY_HEAL_AFTER_MS / 1000),
  },
  {
    name: "node-name",
    env: "NODE_NAME",
    description: "Name of this node (the downward API sets NODE_NAME).",
  },
  {
    name: "revision",
    env: "DPO_REVISION",
    description: "The plugin revision the operator rendered; reported so upgrades can tell revisions apart.",
  },
  {
    name: "pod-uid",
    env: "POD_UID",
    description: "UID of the plugin pod (the downward API sets POD_UID); reported with the node report.",
  },
  ...ENDPOINT_FLAGS,
  {
    name: "kubeconfig",
    env: "DPO_KUBECONFIG",
    description:
      "Kubeconfig for writing this node's DeviceNodeState; in a pod the ServiceAccount is used; neither: no report.",
  },
  {
    name: "namespace",
    env: "POD_NAMESPACE",
    description: "Namespace of the DeviceNodeState (required when reporting; the operator's namespace).",
  },
  {
    name: "log-level",
    env: "DPO_LOG_LEVEL",
    description: "trace, debug, info, warn or error; defaults to spec.plugin.logLevel.",
    choices: ["trace", "debug", "info", "warn", "error", "silent"],
  },
];

/** A flag in seconds (fractions allowed, 0 for off) in milliseconds; `--pod-resources-interval` by default. */
function podResourcesInterval(value: string | undefined, flag = "--pod-resources-interval"): number {
  const seconds = Number(value);
  if (value === undefined || value.trim() === "" || !Number.isFinite(seconds) || seconds < 0) {
    throw new UsageError(`${flag}: must be a number of seconds, 0 to turn it off, got '${value ?? ""}'`);
  }
  return Math.round(seconds * 1000);
}

/**
 * /readyz of a device plugin: ready once registered. Standing by (a Replace with the new plugin started
 * ahead) is not ready, and says for which older instance: the DaemonSet's rollout must not count it.
 */
export function registrationReadiness(
  s: Pick<RuntimeStatus, "serving" | "registered" | "lastRegistrationError" | "standingBy">,
): { ok: boolean; detail: string } {
  if (s.standingBy !== undefined) {
    return { ok: false, detail: `standing by: ${s.standingBy} serves the resource` };
  }
  const ok = s.serving && s.registered;
  return {
    ok,
    detail: ok
      ? "registered"
      : `not registered${s.lastRegistrationError ? `: ${s.lastRegistrationError}` : ""}`,
  };
}

const SHUTDOWN_BUDGET_MS = 5_000;
/** The last node report gets this much of the shutdown budget, in parallel with the runtime's stop. */
const FINAL_REPORT_BUDGET_MS = 1_000;

export async function runPluginCommand(argv: readonly string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(
      `Usage: dpo plugin --config FILE [flags]\n\nFlags:\n${formatFlagHelp(PLUGIN_FLAGS)}\n`,
    );
    return 0;
  }
  const { values, positionals } = resolveFlags(PLUGIN_FLAGS, argv, process.env);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  const configPath = values["config"];
  if (!configPath) throw new UsageError("--config (or DPO_CONFIG) is required");
  const metricsAddr = parseListenAddress("metrics-addr", values["metrics-addr"] ?? "0");
  const healthAddr = parseListenAddress("health-addr", values["health-addr"] ?? "0");
  const podResourcesIntervalMs = podResourcesInterval(values["pod-resources-interval"]);
  const capacityHealAfterMs = podResourcesInterval(values["capacity-heal-after"], "--capacity-heal-after");
  const target = reportTarget(values["kubeconfig"], process.env);
  const namespace = values["namespace"];
  if (target && !namespace) {
    throw new UsageError("--namespace (or POD_NAMESPACE) is required to write the node report");
  }
  if (target && !values["node-name"]) {
    throw new UsageError("--node-name (or NODE_NAME) is required to write the node report");
  }

  // The config is checked before anything touches a socket: a bad config must not disturb the node.
  let text: string;
  try {
    text = await readFile(configPath, "utf8");
  } catch (err) {
    process.stderr.write(`dpo: cannot read --config ${configPath}: ${(err as Error).message}\n`);
    return 2;
  }
  const loaded = await readPluginConfigApart(text, (message) => process.stderr.write(`dpo: ${message}\n`));
  if (!loaded.ok) {
    process.stderr.write(
      `dpo: invalid config ${configPath}:\n` +
        loaded.errors.map((e) => `${configPath}: ${e.path}: ${e.message}`).join("\n") +
        "\n",
    );
    return 1;
  }
  const config = loaded.value;
  const nodeName = values["node-name"] ?? "";
  const dra = config.spec.publish === "DRA";
  if (dra && !target) {
    process.stderr.write(
      "dpo: spec.publish is DRA: the plugin writes ResourceSlices and reads ResourceClaims, so it needs API credentials (--kubeconfig, or run in a pod)\n",
    );
    return 2;
  }
  if (dra && nodeName === "") {
    throw new UsageError("--node-name (or NODE_NAME) is required with spec.publish DRA: it names the pool");
  }
  const level = (values["log-level"] ?? config.spec.plugin.logLevel) as LogLevelName;
  const logger = createJsonLogger(level, {
    component: "plugin",
    config: config.metadata.name,
    resource: config.spec.resourceName,
    node: nodeName,
  });
  if (loaded.ignored.length > 0) {
    // A newer operator wrote fields for newer plugins that this one may serve without (docs/upgrade.md).
    logger.warn(
      { ignored: loaded.ignored },
      "config fields this plugin does not know, marked optional, ignored",
    );
  }

  let credentials: ApiCredentials | undefined;
  try {
    if (target) credentials = await reportCredentials(target, process.env);
  } catch (err) {
    process.stderr.write(`dpo: cannot use the API credentials: ${(err as Error).message}\n`);
    return 2;
  }

  // DRA mode: its own client for slices and claims, so the node report's coalescing never delays them.
  const draApi = dra && credentials ? new ApiClient(credentials) : undefined;
  // The report's client also reads the plugin's own Node for the standby decision (rarely: see standby.ts).
  const reportApi = credentials && namespace ? new ApiClient(credentials) : undefined;
  const podResources =
    podResourcesIntervalMs > 0
      ? {
          podResources: {
            socketPath: values["pod-resources-socket"]!,
            intervalMs: podResourcesIntervalMs,
            capacityHealAfterMs,
          },
        }
      : {};
  const runtime: PluginRuntime | DraRuntime = draApi
    ? new DraRuntime({
        config,
        nodeName,
        logger,
        api: draApi,
        draPluginsDir: values["dra-plugins-dir"]!,
        pluginsRegistryDir: values["plugins-registry-dir"]!,
        cdiDir: values["cdi-dir"]!,
        ...podResources,
      })
    : new PluginRuntime({
        config,
        devicePluginDir: values["device-plugin-dir"]!,
        pluginsRegistryDir: values["plugins-registry-dir"]!,
        registration: values["registration"] as RegistrationMode,
        cdiDir: values["cdi-dir"]!,
        nodeName,
        logger,
        revision: values["revision"],
        readNode: reportApi ? () => readNodeAnnotations(reportApi, nodeName) : undefined,
        ...podResources,
      });
  const reporter: NodeReporter | undefined =
    credentials && namespace
      ? createNodeReporter({
          credentials,
          client: reportApi,
          namespace,
          config,
          configText: text,
          nodeName,
          revision: values["revision"],
          podUID: values["pod-uid"],
          runtime,
          logger,
        })
      : undefined;

  let processMetrics: ProcessMetrics | undefined;
  const probes: ProbeHandlers = {
    healthy: () => {
      const s = runtime.status();
      return { ok: s.serving, detail: s.serving ? "serving" : "not serving" };
    },
    ready: () => {
      const s = runtime.status();
      if (runtime instanceof DraRuntime && runtime.published() === undefined) {
        const error = runtime.publisher.error();
        return { ok: false, detail: `ResourceSlices not published${error ? `: ${error}` : ""}` };
      }
      return registrationReadiness(s);
    },
    metrics: async () => `${await runtime.metrics.render()}\n${processMetrics?.render() ?? ""}`,
  };
  const listeners: ListeningEndpoint[] = [];
  let stopping: Promise<number> | undefined;
  const shutdown = (signal: string): Promise<number> => {
    stopping ??= (async () => {
      logger.info({ signal }, "shutting down");
      const force = setTimeout(() => {
        logger.error({ budgetMs: SHUTDOWN_BUDGET_MS }, "shutdown took too long; exiting");
        process.exit(1);
      }, SHUTDOWN_BUDGET_MS);
      force.unref();
      await Promise.all([
        runtime.stop(),
        reporter?.stop({ budgetMs: FINAL_REPORT_BUDGET_MS, reason: `the plugin stopped (${signal})` }),
      ]);
      draApi?.close();
      await Promise.all(listeners.map((l) => l.close()));
      clearTimeout(force);
      return 0;
    })();
    return stopping;
  };
  const done = new Promise<number>((resolve) => {
    process.once("SIGTERM", () => void shutdown("SIGTERM").then(resolve));
    process.once("SIGINT", () => void shutdown("SIGINT").then(resolve));
  });

  try {
    listeners.push(...(await listenEndpoints(metricsAddr, healthAddr, probes)));
    await runtime.start();
    reporter?.start();
    // The process metrics only when someone can scrape them (their observers cost CPU and memory), and
    // loaded once the first registration was made: the kubelet does not wait for their collectors.
    // The plugin's own collectors (process-metrics.ts), prom-client's families without its cost (ADR 0008).
    if (metricsAddr) processMetrics = new ProcessMetrics();
  } catch (err) {
    logger.error({ err: (err as Error).message }, "plugin runtime failed to start");
    await shutdown("startup-failure");
    return 1;
  }
  logger.info(
    {
      socket: runtime.status().socketPath,
      publish: dra ? "DRA" : "DevicePlugin",
      registration: dra ? "watcher" : values["registration"],
      metrics: listeners.map((l) => l.port),
      report: reporter ? `${namespace}/${reporter.writer.name}` : "off",
      podResources: podResourcesIntervalMs > 0 ? values["pod-resources-socket"] : "off",
    },
    "plugin runtime started",
  );
  return done;
}
