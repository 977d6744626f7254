// What the kubelet would make of a plugin pod, as pure functions: which pod runs per plugin slot, the
// process's args and env, and the plugin config with host paths moved into a simulated node's tree.
import type { V1Container, V1EnvVar, V1Pod } from "@kubernetes/client-node";
import { posix } from "node:path";
import { parse } from "yaml";
import { loadDevicePluginConfig } from "../../src/api/validate.js";
import type { DevicePluginConfig } from "../../src/api/v1beta1/config.js";
import { stringifyExact } from "../../src/api/yaml-text.js";
import { LABEL_CONFIG } from "../../src/contract/names.js";
import { LABEL_REVISION } from "../../src/operator/model/names.js";

/** Paths and addresses a plugin process gets instead of the ones its pod spec names. */
export interface PluginProcessPaths {
  configFile: string;
  devicePluginDir: string;
  pluginsRegistryDir: string;
  /** The node's DRA plugins directory (/var/lib/kubelet/plugins): passed only through the environment. */
  draPluginsDir?: string;
  /** The node's CDI directory; the host's default is kept (and added) only when given. */
  cdiDir?: string;
  /** Where the plugin serves its probes; a free loopback port by default (no probing possible then). */
  healthAddr?: string;
  /** Where the plugin serves /metrics; off by default. The same address as healthAddr: one listener. */
  metricsAddr?: string;
  /** The node's PodResources socket (the kubelet's pod-resources/kubelet.sock). */
  podResourcesSocket?: string;
}

/** Every host-network plugin on this machine shares one loopback: metrics off, probes on a free port. */
export const SIMULATED_METRICS_ADDR = "0";
export const SIMULATED_HEALTH_ADDR = "127.0.0.1:0";

/**
 * Flags of newer builds than some the simulator runs (a build from git history, in the upgrade tests):
 * replaced where the pod's args name them, never added, because a build that does not know a flag
 * refuses to start. The value reaches the process through the flag's environment variable instead,
 * which every build that knows the flag reads when the flag is absent, and older builds ignore.
 */
const FLAG_ENV: ReadonlyMap<string, string> = new Map([
  ["pod-resources-socket", "DPO_POD_RESOURCES_SOCKET"],
  ["dra-plugins-dir", "DPO_DRA_PLUGINS_DIR"],
]);

/**
 * True while the kubelet would run the pod's containers: bound here, not being deleted, not finished.
 * A Pending pod counts: the kubelet starts its containers, and only then is the pod Running.
 */
export function isActivePod(pod: V1Pod): boolean {
  return (
    pod.metadata?.deletionTimestamp == null &&
    pod.status?.phase !== "Failed" &&
    pod.status?.phase !== "Succeeded"
  );
}

/**
 * One plugin process per slot and node: a slot is a DaemonSet's pods, told apart by the config label
 * and the plugin revision (one DaemonSet per revision, so two revisions run side by side during a
 * surge upgrade). Two pods of a slot on a node only overlap while one replaces the other; the newer
 * one is the one to run.
 */
export function pluginSlot(pod: V1Pod): string {
  const namespace = pod.metadata?.namespace ?? "";
  const config = pod.metadata?.labels?.[LABEL_CONFIG];
  const revision = pod.metadata?.labels?.[LABEL_REVISION];
  if (config === undefined) return `${namespace}/pod/${pod.metadata?.name ?? ""}`;
  return revision === undefined ? `${namespace}/${config}` : `${namespace}/${config}/${revision}`;
}

export function creationTime(pod: V1Pod): number {
  const created = pod.metadata?.creationTimestamp;
  return created === undefined ? 0 : new Date(created).getTime();
}

/** The pod each slot on `node` should run, by slot. */
export function desiredPluginPods(pods: readonly V1Pod[], node: string): Map<string, V1Pod> {
  const desired = new Map<string, V1Pod>();
  for (const pod of pods) {
    if (pod.spec?.nodeName !== node || !isActivePod(pod)) continue;
    const slot = pluginSlot(pod);
    const current = desired.get(slot);
    const newer =
      current === undefined ||
      creationTime(pod) > creationTime(current) ||
      (creationTime(pod) === creationTime(current) &&
        (pod.metadata?.name ?? "") > (current.metadata?.name ?? ""));
    if (newer) desired.set(slot, pod);
  }
  return desired;
}

/** `label['key']` or `annotations['key']` in a downward-API field path. */
const MAP_FIELD = /^metadata\.(labels|annotations)\['(.+)'\]$/;

/** A downward-API `fieldRef` as the kubelet resolves it; undefined for paths it would not know here. */
export function resolveFieldRef(pod: V1Pod, fieldPath: string): string | undefined {
  const map = MAP_FIELD.exec(fieldPath);
  if (map) {
    const values = map[1] === "labels" ? pod.metadata?.labels : pod.metadata?.annotations;
    return values?.[map[2] ?? ""] ?? "";
  }
  switch (fieldPath) {
    case "metadata.name":
      return pod.metadata?.name;
    case "metadata.namespace":
      return pod.metadata?.namespace;
    case "metadata.uid":
      return pod.metadata?.uid;
    case "spec.nodeName":
      return pod.spec?.nodeName;
    case "spec.serviceAccountName":
      return pod.spec?.serviceAccountName;
    case "status.hostIP":
      return pod.status?.hostIP;
    case "status.podIP":
      return pod.status?.podIP;
    default:
      return undefined;
  }
}

/** `$(NAME)` references to earlier variables, as the kubelet expands them in env values and args. */
export function expandVariableReferences(text: string, env: Readonly<Record<string, string>>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (whole, name: string | undefined) => {
    if (name === undefined) return "$";
    return Object.hasOwn(env, name) ? (env[name] ?? "") : whole;
  });
}

/**
 * The container's environment: literal values and downward-API fields. Values from Secrets, ConfigMaps
 * or resource fields are not resolved; their names come back in `unresolved` so a caller can say so.
 */
export function resolveContainerEnv(
  pod: V1Pod,
  container: V1Container,
): { env: Record<string, string>; unresolved: string[] } {
  const env: Record<string, string> = {};
  const unresolved: string[] = [];
  for (const variable of container.env ?? ([] as V1EnvVar[])) {
    if (variable.valueFrom === undefined) {
      env[variable.name] = expandVariableReferences(variable.value ?? "", env);
      continue;
    }
    const fieldPath = variable.valueFrom.fieldRef?.fieldPath;
    const value = fieldPath === undefined ? undefined : resolveFieldRef(pod, fieldPath);
    if (value === undefined) unresolved.push(variable.name);
    else env[variable.name] = value;
  }
  return { env, unresolved };
}

/** Flags whose value the simulator replaces, and the value each gets. */
function replacements(paths: PluginProcessPaths): Map<string, string> {
  return new Map([
    ["config", paths.configFile],
    ["device-plugin-dir", paths.devicePluginDir],
    ["plugins-registry-dir", paths.pluginsRegistryDir],
    ...(paths.cdiDir !== undefined ? [["cdi-dir", paths.cdiDir] as const] : []),
    ["metrics-addr", paths.metricsAddr ?? SIMULATED_METRICS_ADDR],
    ["health-addr", paths.healthAddr ?? SIMULATED_HEALTH_ADDR],
    ...(paths.podResourcesSocket !== undefined
      ? [["pod-resources-socket", paths.podResourcesSocket] as const]
      : []),
    ...(paths.draPluginsDir !== undefined ? [["dra-plugins-dir", paths.draPluginsDir] as const] : []),
  ]);
}

/** The environment that carries the flags a build may not know (see FLAG_ENV) to the plugin process. */
export function simulatedPluginEnv(paths: PluginProcessPaths): Record<string, string> {
  const values = replacements(paths);
  const env: Record<string, string> = {};
  for (const [flag, name] of FLAG_ENV) {
    const value = values.get(flag);
    if (value !== undefined) env[name] = value;
  }
  return env;
}

/**
 * The container args with the node-specific flags pointed at the simulated node (both `--flag value`
 * and `--flag=value`); flags the pod leaves to their defaults are added, because the defaults are the
 * real host's paths and ports, except those of newer builds only (FLAG_ENV), which simulatedPluginEnv
 * passes instead.
 */
export function rewritePluginArgs(args: readonly string[], paths: PluginProcessPaths): string[] {
  const wanted = replacements(paths);
  const seen = new Set<string>();
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? "";
    const match = /^--([^=]+)(=.*)?$/.exec(arg);
    const flag = match?.[1];
    const replacement = flag === undefined ? undefined : wanted.get(flag);
    if (flag === undefined || replacement === undefined) {
      out.push(arg);
      continue;
    }
    seen.add(flag);
    if (match?.[2] !== undefined) {
      out.push(`--${flag}=${replacement}`);
    } else {
      out.push(`--${flag}`, replacement);
      i++;
    }
  }
  for (const [flag, value] of wanted) {
    if (!seen.has(flag) && !FLAG_ENV.has(flag)) out.push(`--${flag}`, value);
  }
  return out;
}

/** The value of `--name` in args (either form), if given. */
export function flagValue(args: readonly string[], name: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? "";
    if (arg === `--${name}`) return args[i + 1];
    if (arg.startsWith(`--${name}=`)) return arg.slice(name.length + 3);
  }
  return undefined;
}

/** Where a container reads a file from a ConfigMap volume: the ConfigMap, the key and the volume. */
export interface ConfigMapFile {
  volume: string;
  configMap: string;
  key: string;
}

/**
 * Which ConfigMap key the container sees at `containerPath`: the volume mounted at a prefix of the
 * path, its `items` mapping if any. Undefined when no ConfigMap volume holds that path.
 */
export function configMapFileAt(
  pod: V1Pod,
  container: V1Container,
  containerPath: string,
): ConfigMapFile | undefined {
  for (const mount of container.volumeMounts ?? []) {
    const mountPath = mount.mountPath.replace(/\/+$/, "");
    if (!containerPath.startsWith(`${mountPath}/`)) continue;
    const volume = pod.spec?.volumes?.find((v) => v.name === mount.name);
    const configMap = volume?.configMap;
    if (volume === undefined || configMap?.name === undefined) continue;
    const inVolume = posix.join(mount.subPath ?? "", containerPath.slice(mountPath.length + 1));
    const item = configMap.items?.find((i) => posix.normalize(i.path) === inVolume);
    const key = item?.key ?? (configMap.items === undefined ? inVolume : undefined);
    if (key !== undefined) return { volume: volume.name, configMap: configMap.name, key };
  }
  return undefined;
}

/** A config with every host path of its backend turned into a path of the simulated node. */
export function mapBackendHostPaths(
  config: DevicePluginConfig,
  hostPath: (path: string) => string,
): DevicePluginConfig {
  const backend = { ...config.spec.backend };
  if (backend.mock?.healthFile !== undefined) {
    backend.mock = { ...backend.mock, healthFile: hostPath(backend.mock.healthFile) };
  }
  // Globs stay as they are: they are resolved under root.
  if (backend.devFS !== undefined) backend.devFS = { ...backend.devFS, root: hostPath(backend.devFS.root) };
  if (backend.pci !== undefined) {
    backend.pci = {
      ...backend.pci,
      sysfsRoot: hostPath(backend.pci.sysfsRoot),
      devRoot: hostPath(backend.pci.devRoot),
    };
  }
  return { ...config, spec: { ...config.spec, backend } };
}

/**
 * The plugin config file for the simulated node: the file as written, with only the backend's host
 * paths replaced (defaults included, so `/sys` becomes the node's too). Nothing else is added: a
 * plugin of another dpo version must read exactly the fields its operator wrote. A config the plugin
 * would refuse is passed through untouched, so the process fails the way the pod would.
 */
export function simulatedPluginConfigText(text: string, hostPath: (path: string) => string): string {
  const loaded = loadDevicePluginConfig(text);
  if (!loaded.ok) return text;
  const raw = parse(text) as { spec: { backend: Record<string, Record<string, unknown> | undefined> } };
  const mapped = mapBackendHostPaths(loaded.value, hostPath).spec.backend;
  const backend = raw.spec.backend;
  const set = (member: "mock" | "devFS" | "pci", field: string, value: string | undefined): void => {
    if (value === undefined || backend[member] === undefined) return;
    backend[member] = { ...backend[member], [field]: value };
  };
  set("mock", "healthFile", mapped.mock?.healthFile);
  set("devFS", "root", mapped.devFS?.root);
  set("pci", "sysfsRoot", mapped.pci?.sysfsRoot);
  set("pci", "devRoot", mapped.pci?.devRoot);
  return stringifyExact(raw, { sortMapEntries: true });
}

/**
 * The Node.js flags a Dockerfile's exec-form ENTRYPOINT starts `dist/dpo.js` with (for this
 * repository's image: `["node", "--max-semi-space-size=1", "--min-semi-space-size=1", "--lite-mode", "--no-icu-timezone-data", "/app/dist/dpo.js"]`), so the
 * simulator runs a plugin with the same V8 settings as its image. Empty when there is no such line.
 */
export function imageNodeFlags(dockerfile: string): string[] {
  const line = /^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(dockerfile)?.[1];
  if (line === undefined) return [];
  const words = JSON.parse(line) as unknown;
  if (!Array.isArray(words) || words[0] !== "node") return [];
  const script = words.findIndex((w) => typeof w === "string" && w.endsWith("dpo.js"));
  return (script > 0 ? words.slice(1, script) : []).filter((w): w is string => typeof w === "string");
}
