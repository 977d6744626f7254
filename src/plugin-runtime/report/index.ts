// The node report's entry for `dpo plugin`: where the API credentials come from and a writer wired to the runtime.
import type { Logger } from "../../observability/json-log.js";
import type { DevicePluginConfig } from "../../api/v1beta1/config.js";
// The operator hashes the ConfigMap it renders; hashing the mounted file the same way gives the same hash.
import { configHash, PLUGIN_CONFIG_KEY } from "../../contract/plugin-config.js";
import { buildInfo } from "../../version.js";
import type { PluginRuntime } from "../runtime.js";
import { ApiClient, inClusterCredentials, loadKubeconfig, type ApiCredentials } from "./api-client.js";
import { record } from "./json.js";
import { NodeStateWriter, reportSourceOf, type ReportApi, type ReportedRuntime } from "./writer.js";

export { ApiClient, ApiError, KubeconfigError, inClusterCredentials, loadKubeconfig } from "./api-client.js";
export type { ApiCredentials, ApiRequest } from "./api-client.js";
export * from "./node-state.js";
export { NodeStateWriter, reportSourceOf } from "./writer.js";
export type {
  NodeStateWriterOptions,
  ReportApi,
  ReportedRuntime,
  ReportSource,
  StopOptions,
} from "./writer.js";

/** Where the report goes: an explicit kubeconfig, the pod's own ServiceAccount, or nowhere. */
export type ReportTarget = { kind: "kubeconfig"; path: string } | { kind: "in-cluster" } | undefined;

/** A kubeconfig when given; in a pod (KUBERNETES_SERVICE_HOST set) the ServiceAccount; otherwise no report. */
export function reportTarget(
  kubeconfigPath: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
): ReportTarget {
  if (kubeconfigPath !== undefined && kubeconfigPath !== "")
    return { kind: "kubeconfig", path: kubeconfigPath };
  const host = env["KUBERNETES_SERVICE_HOST"];
  return host !== undefined && host !== "" ? { kind: "in-cluster" } : undefined;
}

export async function reportCredentials(
  target: NonNullable<ReportTarget>,
  env: Readonly<Record<string, string | undefined>>,
): Promise<ApiCredentials> {
  if (target.kind === "kubeconfig") return loadKubeconfig(target.path);
  const credentials = await inClusterCredentials(env);
  if (credentials === undefined) throw new Error("in-cluster: KUBERNETES_SERVICE_HOST/PORT are not set");
  return credentials;
}

/**
 * The annotations of the plugin's own Node (GET /api/v1/nodes/<name>), for the standby decision: read once
 * per older instance of the plugin found serving the node, never listed or watched.
 */
export async function readNodeAnnotations(
  api: ReportApi,
  nodeName: string,
): Promise<Readonly<Record<string, string>>> {
  const node = record(
    await api.request({ method: "GET", path: `/api/v1/nodes/${encodeURIComponent(nodeName)}` }),
  );
  const annotations = record(record(node["metadata"])["annotations"]);
  return Object.fromEntries(
    Object.entries(annotations).filter((e): e is [string, string] => typeof e[1] === "string"),
  );
}

export interface NodeReporterOptions {
  credentials: ApiCredentials;
  /** The client to write through (and close on stop); one of its own when absent. */
  client?: ApiClient;
  namespace: string;
  config: DevicePluginConfig;
  /** The config file as read: its hash is the one the operator puts on the plugin pods. */
  configText: string;
  nodeName: string;
  /** The plugin revision and pod, from the pod's env (the operator renders both). */
  revision?: string | undefined;
  podUID?: string | undefined;
  runtime: ReportedRuntime & Pick<PluginRuntime, "metrics">;
  logger: Logger;
}

export interface NodeReporter {
  readonly writer: NodeStateWriter;
  start(): void;
  /** The last write (bounded by `budgetMs`), then closes the connections. */
  stop(options: { budgetMs: number; reason: string }): Promise<void>;
}

/** A writer for the runtime's node, over a client for the given credentials. */
export function createNodeReporter(opts: NodeReporterOptions): NodeReporter {
  const client = opts.client ?? new ApiClient(opts.credentials);
  const { name, uid } = opts.config.metadata;
  const writer = new NodeStateWriter({
    api: client,
    source: reportSourceOf(opts.runtime),
    namespace: opts.namespace,
    config: { name, uid },
    nodeName: opts.nodeName,
    revision: opts.revision,
    podUID: opts.podUID,
    resourceName: opts.config.spec.resourceName,
    pluginVersion: buildInfo().version,
    configHash: configHash({ [PLUGIN_CONFIG_KEY]: opts.configText }),
    logger: opts.logger,
    metrics: opts.runtime.metrics,
  });
  return {
    writer,
    start: () => writer.start(),
    stop: async (options) => {
      await writer.stop(options);
      client.close();
    },
  };
}
