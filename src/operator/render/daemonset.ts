// Renders the plugin DaemonSet of a DevicePluginConfig: one `dpo plugin` pod on every node the config targets.
import { createHash } from "node:crypto";
import { posix } from "node:path";
import type {
  V1Container,
  V1DaemonSet,
  V1PodTemplateSpec,
  V1NodeSelectorTerm,
  V1EnvVar,
  V1ResourceRequirements,
  V1SecurityContext,
  V1Volume,
  V1VolumeMount,
} from "@kubernetes/client-node";
import type { DevicePluginConfig } from "../../api/v1beta1/config.js";
import { DEFAULT_IMAGE_PULL_POLICY } from "../../api/v1beta1/plugin-pod.js";
import { draDriverName } from "../../api/v1beta1/publish.js";
import { canonicalJson } from "../../api/conversion/merge-patch.js";
import { DEFAULT_CDI_DIR } from "../../cdi/spec.js";
import {
  DEFAULT_KUBELET_ROOT_DIR,
  DEVICE_PLUGINS_DIR,
  kubeletRootPaths,
  POD_RESOURCES_SOCKET_NAME,
  type KubeletRootPaths,
} from "../../contract/kubelet-paths.js";
import { backendPodNeeds, type HostPathMount } from "./backends.js";
import { PLUGIN_CONFIG_DIR, PLUGIN_CONFIG_PATH, pluginConfigHash } from "./configmap.js";
import type { RenderContext } from "./context.js";
import { effectiveTerms, expressionsOf, requirementsOf, type TargetingSpec } from "../model/node-terms.js";
import { placementAffinity, withReplaceToleration, type PlacementRole } from "../model/targeting.js";
import { pluginImagePullSecrets } from "./pull-secrets.js";
import {
  effectivePodAnnotations,
  effectivePodLabels,
  effectivePriorityClassName,
  effectiveResources,
  effectiveTolerations,
} from "./pod-defaults.js";
import {
  ANNOTATION_CONFIG_HASH,
  DRA_PLUGINS_VOLUME,
  configOwnerReference,
  LABEL_REVISION,
  pluginLabels,
  pluginSelectorLabels,
  revisionObjectName,
} from "../model/names.js";

export const PLUGIN_CONTAINER_NAME = "plugin";
export const METRICS_PORT = 8080;
export const HEALTH_PORT = 8081;
/** Where container runtimes (containerd, CRI-O) look for generated CDI specs by default. */
export const CDI_SPEC_DIR = DEFAULT_CDI_DIR;

/**
 * The plugin's flags for the kubelet's directories under a root directory other than the default: the
 * host paths, which the pod mounts at the same paths (a DRA plugin tells the kubelet its socket's path,
 * which must be the host's). None for the default root: the plugin's own defaults are its paths.
 */
function kubeletDirArgs(
  ctx: RenderContext,
  paths: KubeletRootPaths,
): {
  registry: string[];
  dra: string[];
  podResources: string[];
} {
  if ((ctx.kubeletRootDir ?? DEFAULT_KUBELET_ROOT_DIR) === DEFAULT_KUBELET_ROOT_DIR) {
    return { registry: [], dra: [], podResources: [] };
  }
  return {
    registry: ["--plugins-registry-dir", paths.pluginsRegistryDir],
    dra: ["--dra-plugins-dir", paths.draPluginsDir],
    podResources: ["--pod-resources-socket", posix.join(paths.podResourcesDir, POD_RESOURCES_SOCKET_NAME)],
  };
}

/** The plugin flags, in the order `dpo plugin --help` lists them. */
function pluginArgs(ctx: RenderContext, cdiEnabled: boolean, paths: KubeletRootPaths): string[] {
  const dirs = kubeletDirArgs(ctx, paths);
  return [
    "plugin",
    "--config",
    PLUGIN_CONFIG_PATH,
    ...dirs.registry,
    ...dirs.dra,
    "--registration",
    ctx.registrationMode,
    ...(cdiEnabled ? ["--cdi-dir", CDI_SPEC_DIR] : []),
    ...dirs.podResources,
    "--metrics-addr",
    `:${METRICS_PORT}`,
    "--health-addr",
    `:${HEALTH_PORT}`,
  ];
}

/**
 * Root, but nothing more. The kubelet's device-plugins directory (and plugins_registry) is root-owned
 * 0750 and the plugin must create its socket there and connect to kubelet.sock: uid 0 does that as the
 * owner, with no capability at all (no DAC override is needed for one's own directory). Everything
 * else a backend does is reading and stat(): so no privilege, no escalation, no capabilities, a
 * read-only root filesystem and the runtime's default seccomp profile.
 */
function containerSecurityContext(
  privileged: boolean,
  addCapabilities: readonly string[],
): V1SecurityContext {
  return {
    runAsUser: 0,
    runAsGroup: 0,
    runAsNonRoot: false,
    privileged,
    allowPrivilegeEscalation: privileged,
    readOnlyRootFilesystem: true,
    capabilities: {
      drop: ["ALL"],
      ...(addCapabilities.length > 0 ? { add: [...addCapabilities] } : {}),
    },
    seccompProfile: { type: "RuntimeDefault" },
  };
}

function hostPathVolume(mount: HostPathMount): V1Volume {
  return { name: mount.name, hostPath: { path: mount.hostPath, type: mount.type } };
}

function hostPathVolumeMount(mount: HostPathMount): V1VolumeMount {
  return { name: mount.name, mountPath: mount.mountPath, readOnly: mount.readOnly };
}

/**
 * The plugin container's resources when neither the config (spec.plugin.resources) nor the operator's
 * --plugin-pod-defaults set any, from `make bench-plugin` (docs/benchmarks.md): the memory request is the
 * plugin's RSS after 12,000 Allocates on 800 devices (63.8-66.6 MiB in the newest runs; 60.9-61.3 MiB idle)
 * and a fifth more, rounded up; the limit doubles it, for the short-lived process that reads the config at
 * start beside it (61-64 MiB at its peak) and for heap growth in a burst of calls. No CPU limit: throttling
 * would delay Allocate, which the kubelet waits on to start a container, and re-registration after a kubelet
 * restart.
 */
export const DEFAULT_PLUGIN_RESOURCES = {
  requests: { cpu: "10m", memory: "80Mi" },
  limits: { memory: "160Mi" },
} as const;

/**
 * The config's own requests and limits when it sets either, else the operator's defaults
 * (render/pod-defaults.ts), else DEFAULT_PLUGIN_RESOURCES; whichever is chosen is taken whole, and an empty
 * requests or limits in it means none.
 */
function resourcesOf(config: DevicePluginConfig, ctx: RenderContext): V1ResourceRequirements | undefined {
  const chosen = effectiveResources(config.spec.plugin.resources, ctx.pluginPodDefaults) ?? {
    requests: { ...DEFAULT_PLUGIN_RESOURCES.requests },
    limits: { ...DEFAULT_PLUGIN_RESOURCES.limits },
  };
  const given = (values: Record<string, string> | undefined) =>
    values !== undefined && Object.keys(values).length > 0 ? { ...values } : undefined;
  const [requests, limits] = [given(chosen.requests), given(chosen.limits)];
  if (requests === undefined && limits === undefined) return undefined;
  return { ...(requests ? { requests } : {}), ...(limits ? { limits } : {}) };
}

/** Hex digits of a revision: 40 bits, so a config's revisions never meet in practice. */
const REVISION_LENGTH = 10;
/** Stands for the revision's ConfigMap name while the revision (which names it) is computed. */
const CONFIG_MAP_PLACEHOLDER = "config";

export interface RenderDaemonSetOptions {
  /** Default: `base`, the revision every node no upgrade has touched runs (see model/targeting.ts). */
  role?: PlacementRole;
  /** Extra annotations on the DaemonSet itself (the upgrade's state), never on its pods. */
  annotations?: Readonly<Record<string, string>>;
}

/** The revision of a config's plugin: a hash of its pod template, which is everything its pods run. */
export function pluginRevision(config: DevicePluginConfig, ctx: RenderContext): string {
  return revisionOf(podTemplate(config, ctx));
}

function revisionOf(template: V1PodTemplateSpec): string {
  return createHash("sha256")
    .update(canonicalJson(template as unknown as Parameters<typeof canonicalJson>[0]))
    .digest("hex")
    .slice(0, REVISION_LENGTH);
}

/** The terms of a config's own nodeSelectorTerm, when no other config of its resource name is known. */
function ownTargeting(spec: TargetingSpec): { terms: V1NodeSelectorTerm[] | undefined } {
  const result = effectiveTerms(requirementsOf(spec), expressionsOf(spec), []);
  return { terms: result.ok ? result.terms : undefined };
}

/**
 * The DaemonSet of the config's current revision, named `dpo-<config>-<revision>`. `OnDelete`: a
 * change of its role (moving to base) or a drift correction changes the template, and must never restart
 * the pods already running; the operator moves nodes between revisions itself, through node labels
 * (ADR 0003, ADR 0004).
 */
export function renderPluginDaemonSet(
  config: DevicePluginConfig,
  ctx: RenderContext,
  options: RenderDaemonSetOptions = {},
): V1DaemonSet {
  const base = podTemplate(config, ctx);
  const revision = revisionOf(base);
  const name = revisionObjectName(config.metadata.name, revision);
  const labels = effectivePodLabels(pluginLabels(config.metadata.name), ctx.pluginPodDefaults);
  const podLabels = { ...labels, [LABEL_REVISION]: revision };
  const podSpec = base.spec!;
  const container = podSpec.containers[0]!;
  const targeting = ctx.targeting ?? ownTargeting(config.spec);
  const affinity = placementAffinity(config.metadata.name, revision, options.role ?? "base", targeting.terms);
  const template: V1PodTemplateSpec = {
    metadata: { ...base.metadata, labels: podLabels },
    spec: {
      ...podSpec,
      affinity,
      tolerations: withReplaceToleration(config.metadata.name, podSpec.tolerations),
      containers: [
        { ...container, env: [...(container.env ?? []), { name: "DPO_REVISION", value: revision }] },
      ],
      volumes: (podSpec.volumes ?? []).map((v) =>
        v.configMap?.name === CONFIG_MAP_PLACEHOLDER ? { ...v, configMap: { ...v.configMap, name } } : v,
      ),
    },
  };
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: {
      name,
      namespace: ctx.namespace,
      labels: podLabels,
      ...(options.annotations && Object.keys(options.annotations).length > 0
        ? { annotations: { ...options.annotations } }
        : {}),
      ownerReferences: [configOwnerReference(config)],
    },
    spec: {
      selector: { matchLabels: pluginSelectorLabels(config.metadata.name, revision) },
      updateStrategy: { type: "OnDelete" },
      revisionHistoryLimit: 2,
      template,
    },
  };
}

/**
 * The kubelet's directories a plugin in DRA mode uses, instead of the device-plugins directory (no
 * kubelet.sock, no device plugin socket): its own driver's directory `<root-dir>/plugins/<driver>/`, where
 * it serves its DRA socket, and not the whole plugins directory, whose other drivers' sockets a config
 * author must not reach; its registration socket in the plugin watcher's directory (DRA plugins always
 * register through the watcher, whatever the operator's registration mode); the PodResources API (read
 * only, which pod holds which device); and the CDI directory, read-write and always: NodePrepareResources
 * answers with CDI device ids, so the CDI spec files the plugin writes are how a DRA device reaches a
 * container. DirectoryOrCreate for the driver's directory: the kubelet creates it only when a DRA plugin
 * registers, and the plugin would otherwise wait on a node that has none yet.
 */
function draKubeletMounts(driver: string, paths: KubeletRootPaths): HostPathMount[] {
  const driverDir = posix.join(paths.draPluginsDir, driver);
  return [
    {
      name: DRA_PLUGINS_VOLUME,
      hostPath: driverDir,
      mountPath: driverDir,
      type: "DirectoryOrCreate",
      readOnly: false,
    },
    {
      name: "plugins-registry",
      hostPath: paths.pluginsRegistryDir,
      mountPath: paths.pluginsRegistryDir,
      type: "Directory",
      readOnly: false,
    },
    {
      name: "pod-resources",
      hostPath: paths.podResourcesDir,
      mountPath: paths.podResourcesDir,
      type: "DirectoryOrCreate",
      readOnly: true,
    },
    {
      name: "cdi-specs",
      hostPath: CDI_SPEC_DIR,
      mountPath: CDI_SPEC_DIR,
      type: "DirectoryOrCreate",
      readOnly: false,
    },
  ];
}

/** The pod template of a config without its revision: what the revision hashes. */
function podTemplate(config: DevicePluginConfig, ctx: RenderContext): V1PodTemplateSpec {
  const labels = effectivePodLabels(pluginLabels(config.metadata.name), ctx.pluginPodDefaults);
  const { spec } = config;
  const backend = backendPodNeeds(spec.backend);
  // The kubelet's directories that follow its --root-dir, mounted at their host paths.
  const paths = kubeletRootPaths(ctx.kubeletRootDir);

  const dra = spec.publish === "DRA";
  // The kubelet's directories are written (sockets), and the CDI directory (specs): the only read-write
  // mounts. The PodResources directory is only read: connecting to a unix socket needs no writable mount.
  const deviceApiMounts: HostPathMount[] = [
    {
      name: "device-plugins",
      hostPath: DEVICE_PLUGINS_DIR,
      mountPath: DEVICE_PLUGINS_DIR,
      type: "Directory",
      readOnly: false,
    },
    ...(ctx.registrationMode === "watcher"
      ? [
          {
            name: "plugins-registry",
            hostPath: paths.pluginsRegistryDir,
            mountPath: paths.pluginsRegistryDir,
            type: "Directory" as const,
            readOnly: false,
          },
        ]
      : []),
    // Which pod holds which device. DirectoryOrCreate: a kubelet without the API (or with another
    // --root-dir) must not keep the plugin from starting; the plugin then says the socket is missing.
    {
      name: "pod-resources",
      hostPath: paths.podResourcesDir,
      mountPath: paths.podResourcesDir,
      type: "DirectoryOrCreate",
      readOnly: true,
    },
    // The plugin writes the CDI spec its Allocate answers point at; the runtime reads it on the host.
    ...(spec.cdi.enabled
      ? [
          {
            name: "cdi-specs",
            hostPath: CDI_SPEC_DIR,
            mountPath: CDI_SPEC_DIR,
            type: "DirectoryOrCreate" as const,
            readOnly: false,
          },
        ]
      : []),
  ];
  const kubeletMounts = dra ? draKubeletMounts(draDriverName(spec), paths) : deviceApiMounts;
  const hostMounts = [...kubeletMounts, ...backend.hostPaths];

  const env: V1EnvVar[] = [
    { name: "NODE_NAME", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "spec.nodeName" } } },
    { name: "POD_NAMESPACE", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } } },
    { name: "POD_UID", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.uid" } } },
    { name: "DPO_LOG_LEVEL", value: spec.plugin.logLevel },
    ...backend.env,
    // After the operator's own, so a value may refer to them as $(NODE_NAME); their names are refused.
    ...(spec.plugin.env ?? []).map((e) => ({ ...e })),
  ];

  const resources = resourcesOf(config, ctx);
  const container: V1Container = {
    name: PLUGIN_CONTAINER_NAME,
    image: spec.plugin.image !== "" ? spec.plugin.image : ctx.operatorImage,
    imagePullPolicy: spec.plugin.imagePullPolicy ?? DEFAULT_IMAGE_PULL_POLICY,
    args: pluginArgs(ctx, dra || spec.cdi.enabled, paths),
    env,
    ports: [
      { name: "metrics", containerPort: METRICS_PORT, protocol: "TCP" },
      { name: "health", containerPort: HEALTH_PORT, protocol: "TCP" },
    ],
    // Ready means registered with the kubelet; live means the gRPC server is serving. Liveness waits
    // longer, so a slow first registration is reported as not ready rather than killed.
    readinessProbe: {
      httpGet: { path: "/readyz", port: "health", scheme: "HTTP" },
      periodSeconds: 5,
      timeoutSeconds: 2,
      failureThreshold: 3,
      successThreshold: 1,
    },
    livenessProbe: {
      httpGet: { path: "/healthz", port: "health", scheme: "HTTP" },
      initialDelaySeconds: 10,
      periodSeconds: 10,
      timeoutSeconds: 2,
      failureThreshold: 3,
      successThreshold: 1,
    },
    ...(resources ? { resources } : {}),
    securityContext: containerSecurityContext(backend.privileged, backend.addCapabilities),
    volumeMounts: [
      { name: "config", mountPath: PLUGIN_CONFIG_DIR, readOnly: true },
      ...hostMounts.map(hostPathVolumeMount),
    ],
  };

  const imagePullSecrets = pluginImagePullSecrets(ctx, spec.plugin.imagePullSecrets);
  const priorityClassName = effectivePriorityClassName(spec.plugin.priorityClassName, ctx.pluginPodDefaults);
  const tolerations = effectiveTolerations(spec.tolerations, ctx.pluginPodDefaults);
  return {
    metadata: {
      labels,
      annotations: effectivePodAnnotations(
        spec.plugin.podAnnotations,
        { [ANNOTATION_CONFIG_HASH]: pluginConfigHash(config) },
        ctx.pluginPodDefaults,
      ),
    },
    spec: {
      serviceAccountName: ctx.pluginServiceAccount,
      ...(imagePullSecrets ? { imagePullSecrets } : {}),
      ...(spec.plugin.runtimeClassName ? { runtimeClassName: spec.plugin.runtimeClassName } : {}),
      automountServiceAccountToken: true,
      enableServiceLinks: false,
      ...(priorityClassName !== "" ? { priorityClassName } : {}),
      ...(Object.keys(spec.nodeSelector).length > 0 ? { nodeSelector: { ...spec.nodeSelector } } : {}),
      ...(tolerations.length > 0 ? { tolerations } : {}),
      terminationGracePeriodSeconds: 10,
      containers: [container],
      volumes: [
        { name: "config", configMap: { name: CONFIG_MAP_PLACEHOLDER, defaultMode: 0o444 } },
        ...hostMounts.map(hostPathVolume),
      ],
    },
  };
}
