// `dpo operator`: runs the controller against the cluster of the kubeconfig (or in-cluster).
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import { REGISTRATION_MODES, type RegistrationMode } from "../contract/registration.js";
import { createLogger, type LogLevelName } from "../observability/log.js";
import { listenEndpoints, type ListeningEndpoint, type ProbeHandlers } from "../observability/http.js";
import { collectProcessMetrics } from "../observability/metrics.js";
import { Operator } from "../operator/manager.js";
import {
  DEFAULT_PLUGIN_HOST_PATHS,
  pluginPolicyFromFlags,
  type PluginPolicy,
} from "../operator/render/plugin-policy.js";
import { parsePluginPodDefaults, type PluginPodDefaults } from "../operator/render/pod-defaults.js";
import { parseImagePullSecretNames } from "../operator/render/pull-secrets.js";
import { DEFAULT_KUBELET_ROOT_DIR, parseKubeletRootDir } from "../contract/kubelet-paths.js";
import { FENCE_SETTLE_MS } from "../operator/upgrade/rollout.js";
import { shareConnections } from "../kube/connections.js";
import { buildInfo } from "../version.js";
import { startConversionWebhook, type RunningWebhook } from "../webhook/index.js";
import {
  ENDPOINT_FLAGS,
  formatFlagHelp,
  parseListenAddress,
  resolveFlags,
  UsageError,
  type FlagSpec,
} from "./flags.js";
import { loadKubeConfig } from "./kubeconfig.js";

export const OPERATOR_FLAGS: readonly FlagSpec[] = [
  {
    name: "kubeconfig",
    env: "DPO_KUBECONFIG",
    description: "kubeconfig to use; default: in-cluster config, else $KUBECONFIG or ~/.kube/config.",
  },
  {
    name: "namespace",
    env: "POD_NAMESPACE",
    description: "Namespace of the plugin DaemonSets, ConfigMaps, DeviceNodeStates and the leader Lease.",
    default: "dpo-system",
  },
  {
    name: "leader-elect",
    env: "DPO_LEADER_ELECT",
    description: "Elect a leader with a Lease so only one replica reconciles (true or false).",
    default: "false",
    choices: ["true", "false"],
  },
  {
    name: "leader-election-id",
    env: "DPO_LEADER_ELECTION_ID",
    description: "Lease name.",
    default: "dpo-operator",
  },
  {
    name: "lease-duration",
    env: "DPO_LEASE_DURATION",
    description: "Lease duration, seconds.",
    default: "15",
  },
  {
    name: "renew-deadline",
    env: "DPO_RENEW_DEADLINE",
    description: "Renew deadline, seconds.",
    default: "10",
  },
  { name: "retry-period", env: "DPO_RETRY_PERIOD", description: "Retry period, seconds.", default: "2" },
  ...ENDPOINT_FLAGS,
  {
    name: "plugin-image",
    env: "DPO_PLUGIN_IMAGE",
    description: "Image of plugin DaemonSets whose spec.plugin.image is empty (the operator's own image).",
    default: `ghcr.io/dpo-dev/dpo:${buildInfo().version}`,
  },
  {
    name: "plugin-service-account",
    env: "DPO_PLUGIN_SERVICE_ACCOUNT",
    description: "ServiceAccount of the plugin pods.",
    default: "dpo-plugin",
  },
  {
    name: "plugin-image-pull-secrets",
    env: "DPO_PLUGIN_IMAGE_PULL_SECRETS",
    description:
      "Secrets in the namespace that plugin pods pull their image with, comma-separated (the chart's imagePullSecrets).",
    default: "",
  },
  {
    name: "plugin-image-allow",
    env: "DPO_PLUGIN_IMAGE_ALLOW",
    description:
      "Image repositories a config's spec.plugin.image may name, comma-separated: a repository (any tag or digest), a prefix ending in '/', or *; empty: the repository of --plugin-image. A config naming another gets no plugin pods.",
    default: "",
  },
  {
    name: "plugin-host-path-allow",
    env: "DPO_PLUGIN_HOST_PATH_ALLOW",
    description: `Host directories a config's backend may mount (each with everything under it), comma-separated; empty: ${DEFAULT_PLUGIN_HOST_PATHS.join(",")}. A config mounting another gets no plugin pods.`,
    default: "",
  },
  {
    name: "plugin-pod-defaults",
    env: "DPO_PLUGIN_POD_DEFAULTS",
    description:
      "What every config's plugin pods get unless the config says otherwise, as JSON: tolerations (added to the config's), priorityClassName (instead of system-node-critical), labels, annotations (the config's podAnnotations win) and resources (when the config has none); empty: none. A change is a new revision of every config.",
    default: "",
  },
  {
    name: "kubelet-root-dir",
    env: "DPO_KUBELET_ROOT_DIR",
    description: `The kubelet's --root-dir on the nodes (k0s: /var/lib/k0s/kubelet, MicroK8s: /var/snap/microk8s/common/var/lib/kubelet): plugin pods mount its plugins_registry, plugins and pod-resources directories. The device-plugins directory stays ${DEFAULT_KUBELET_ROOT_DIR}/device-plugins, where the kubelet keeps it whatever its root. A change is a new revision of every config.`,
    default: DEFAULT_KUBELET_ROOT_DIR,
  },
  {
    name: "registration",
    env: "DPO_REGISTRATION",
    description: "How plugins register with the kubelet: kubelet or watcher.",
    default: "kubelet",
    choices: REGISTRATION_MODES,
  },
  {
    name: "concurrency",
    env: "DPO_CONCURRENCY",
    description: "Configs reconciled in parallel.",
    default: "4",
  },
  {
    name: "status-write-interval",
    env: "DPO_STATUS_WRITE_INTERVAL",
    description: "Minimum time between two status writes of one config, milliseconds.",
    default: "500",
  },
  {
    name: "fence-settle",
    env: "DPO_FENCE_SETTLE",
    description:
      "Seconds a node's fence is on before its old plugin stops in a Replace (or a switch of spec.publish): the scheduler still binds pods it chose before it saw the fence. 0 stops it at once.",
    default: String(FENCE_SETTLE_MS / 1000),
  },
  {
    name: "storage-migration",
    env: "DPO_STORAGE_MIGRATION",
    description:
      "On the leader, rewrite configs stored in an older API version and trim the CRD's storedVersions (false where kube-storage-version-migrator does it).",
    default: "true",
    choices: ["true", "false"],
  },
  {
    name: "webhook-addr",
    env: "DPO_WEBHOOK_ADDR",
    description: "HOST:PORT serving the conversion webhook over HTTPS (POST /convert); 0 disables.",
    default: ":9443",
  },
  {
    name: "webhook-secret",
    env: "DPO_WEBHOOK_SECRET",
    description:
      "Secret in the namespace holding the webhook's CA and serving certificate, which the operator keeps.",
    default: "dpo-webhook-cert",
  },
  {
    name: "webhook-service",
    env: "DPO_WEBHOOK_SERVICE",
    description: "Service the API server reaches the webhook through; its DNS names go in the certificate.",
    default: "dpo-webhook",
  },
  {
    name: "webhook-hosts",
    env: "DPO_WEBHOOK_HOSTS",
    description:
      "More DNS names or IPs for the serving certificate, comma-separated (127.0.0.1 for a local run).",
    default: "",
  },
  {
    name: "webhook-cert-dir",
    env: "DPO_WEBHOOK_CERT_DIR",
    description:
      "Serve tls.crt and tls.key from this directory (cert-manager) instead of keeping certificates in the Secret.",
    default: "",
  },
  {
    name: "webhook-cert-validity",
    env: "DPO_WEBHOOK_CERT_VALIDITY",
    description: "Lifetime of the serving certificate, seconds; renewed with a third left.",
    default: String(365 * 24 * 3600),
  },
  {
    name: "webhook-ca-validity",
    env: "DPO_WEBHOOK_CA_VALIDITY",
    description: "Lifetime of the webhook CA, seconds; renewed with a third left.",
    default: String(10 * 365 * 24 * 3600),
  },
  {
    name: "log-level",
    env: "DPO_LOG_LEVEL",
    description: "trace, debug, info, warn or error.",
    default: "info",
    choices: ["trace", "debug", "info", "warn", "error", "silent"],
  },
];

/** `--fence-settle` in milliseconds: seconds, fractions allowed, 0 for none, at most ten minutes. */
export function fenceSettleMs(value: string | undefined): number {
  const n = Number(value);
  if (value === undefined || value.trim() === "" || !Number.isFinite(n) || n < 0 || n > 600) {
    throw new UsageError(`--fence-settle: must be a number of seconds from 0 to 600, got '${value ?? ""}'`);
  }
  return Math.round(n * 1000);
}

function positiveNumber(flag: string, value: string | undefined): number {
  const n = Number(value);
  if (value === undefined || !Number.isFinite(n) || n <= 0) {
    throw new UsageError(`--${flag}: must be a positive number, got '${value}'`);
  }
  return n;
}

function pluginPolicyFlags(images: string, hostPaths: string, operatorImage: string): PluginPolicy {
  try {
    return pluginPolicyFromFlags(images, hostPaths, operatorImage);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

function pluginPodDefaultsFlag(value: string): PluginPodDefaults | undefined {
  try {
    return parsePluginPodDefaults(value, "--plugin-pod-defaults");
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

function kubeletRootDirFlag(value: string): string {
  try {
    return parseKubeletRootDir(value, "--kubelet-root-dir");
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

function imagePullSecretsFlag(value: string): string[] {
  try {
    return parseImagePullSecretNames(value, "--plugin-image-pull-secrets");
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

export async function runOperatorCommand(argv: readonly string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(`Usage: dpo operator [flags]\n\nFlags:\n${formatFlagHelp(OPERATOR_FLAGS)}\n`);
    return 0;
  }
  const { values: v, positionals } = resolveFlags(OPERATOR_FLAGS, argv, process.env);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  const pluginImagePullSecrets = imagePullSecretsFlag(v["plugin-image-pull-secrets"] ?? "");
  const pluginPolicy = pluginPolicyFlags(
    v["plugin-image-allow"] ?? "",
    v["plugin-host-path-allow"] ?? "",
    v["plugin-image"]!,
  );
  const pluginPodDefaults = pluginPodDefaultsFlag(v["plugin-pod-defaults"] ?? "");
  const kubeletRootDir = kubeletRootDirFlag(v["kubelet-root-dir"] ?? DEFAULT_KUBELET_ROOT_DIR);
  const metricsAddr = parseListenAddress("metrics-addr", v["metrics-addr"] ?? "0");
  const healthAddr = parseListenAddress("health-addr", v["health-addr"] ?? "0");
  const namespace = v["namespace"]!;
  const identity = `${process.env["POD_NAME"] ?? hostname()}_${randomUUID().slice(0, 8)}`;
  // Before the logger: a missing or broken kubeconfig is one line on stderr, not a JSON event.
  const kubeConfig = shareConnections(loadKubeConfig(v["kubeconfig"], process.env));
  const logger = createLogger(v["log-level"] as LogLevelName, { component: "operator" });

  let exitCode = 0;
  let finish: (code: number) => void = () => undefined;
  const finished = new Promise<number>((resolve) => (finish = resolve));
  const operator = new Operator({
    kubeConfig,
    render: {
      namespace,
      operatorImage: v["plugin-image"]!,
      pluginServiceAccount: v["plugin-service-account"]!,
      registrationMode: v["registration"] as RegistrationMode,
      pluginImagePullSecrets,
      pluginPolicy,
      ...(pluginPodDefaults ? { pluginPodDefaults } : {}),
      ...(kubeletRootDir !== DEFAULT_KUBELET_ROOT_DIR ? { kubeletRootDir } : {}),
    },
    leaderElection: {
      enabled: v["leader-elect"] === "true",
      id: v["leader-election-id"]!,
      identity,
      leaseDurationMs: positiveNumber("lease-duration", v["lease-duration"]) * 1000,
      renewDeadlineMs: positiveNumber("renew-deadline", v["renew-deadline"]) * 1000,
      retryPeriodMs: positiveNumber("retry-period", v["retry-period"]) * 1000,
    },
    concurrency: Math.floor(positiveNumber("concurrency", v["concurrency"])),
    statusWriteIntervalMs: positiveNumber("status-write-interval", v["status-write-interval"]),
    fenceSettleMs: fenceSettleMs(v["fence-settle"]),
    storageMigration: v["storage-migration"] === "true",
    logger,
    onLeadershipLost: () => {
      exitCode = 1;
      void shutdown("leadership-lost");
    },
  });

  const webhookAddr = parseListenAddress("webhook-addr", v["webhook-addr"] ?? "0");
  let webhook: RunningWebhook | undefined;
  const probes: ProbeHandlers = {
    healthy: () => ({ ok: true, detail: "ok" }),
    // With the conversion webhook on, ready means serving it: the Service must send conversions to a
    // replica whose caches are still syncing, because listing objects stored as v1alpha1 needs them.
    ready: () => {
      const caches = operator.ready() ? "caches synced" : "caches syncing";
      if (!webhook) return { ok: operator.ready(), detail: caches };
      if (!webhook.ready()) return { ok: false, detail: `conversion webhook: ${webhook.problem()}` };
      return { ok: true, detail: `conversion webhook serving; ${caches}` };
    },
    metrics: () => operator.metrics.render(),
  };
  const listeners: ListeningEndpoint[] = [];
  let stopping: Promise<void> | undefined;
  const shutdown = (reason: string): Promise<void> => {
    stopping ??= (async () => {
      logger.info({ reason }, "shutting down");
      const force = setTimeout(() => {
        logger.error("shutdown took too long; exiting");
        process.exit(exitCode || 1);
      }, 10_000);
      force.unref();
      await operator.stop();
      await webhook?.stop();
      await Promise.all(listeners.map((l) => l.close()));
      clearTimeout(force);
      finish(exitCode);
    })();
    return stopping;
  };
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
  process.once("SIGINT", () => void shutdown("SIGINT"));

  try {
    // The process metrics only when someone can scrape them: their observers cost CPU and memory.
    if (metricsAddr) await collectProcessMetrics(operator.metrics.registry);
    listeners.push(...(await listenEndpoints(metricsAddr, healthAddr, probes)));
    if (webhookAddr) {
      const service = v["webhook-service"]!;
      webhook = await startConversionWebhook({
        kubeConfig,
        address: webhookAddr,
        namespace,
        secretName: v["webhook-secret"]!,
        serviceName: service,
        certDir: v["webhook-cert-dir"] || undefined,
        hosts: [
          `${service}.${namespace}.svc`,
          `${service}.${namespace}.svc.cluster.local`,
          ...(v["webhook-hosts"] ?? "")
            .split(",")
            .map((h) => h.trim())
            .filter(Boolean),
        ],
        caValidityMs: positiveNumber("webhook-ca-validity", v["webhook-ca-validity"]) * 1000,
        certValidityMs: positiveNumber("webhook-cert-validity", v["webhook-cert-validity"]) * 1000,
        canWrite: () => v["leader-elect"] !== "true" || operator.isLeader(),
        logger: logger.child({ component: "webhook" }),
        metrics: operator.metrics,
        events: operator.events,
      });
    }
    logger.info(
      {
        namespace,
        identity,
        leaderElection: v["leader-elect"],
        ports: listeners.map((l) => l.port),
        ...(webhook ? { webhookPort: webhook.port } : {}),
        ...buildInfo(),
      },
      "operator starting",
    );
    await operator.start();
  } catch (err) {
    logger.error({ err: (err as Error).message }, "operator failed to start");
    exitCode = 1;
    await shutdown("startup-failure");
  }
  return finished;
}
