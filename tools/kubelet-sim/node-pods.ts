// The records a simulated node keeps of its pods: the plugin pods it runs and the pods it admitted with
// devices. They sit below simulated-node.ts and the modules that fill them, so neither imports the other.
import type { V1Container, V1Pod } from "@kubernetes/client-node";
import type { ImageRuntime, Launch, PluginProcess } from "./container-runtime.js";
import type { ReadinessProber } from "./readiness-prober.js";

/** A plugin pod on a node as the simulator set it up. */
export interface PreparedPod {
  node: string;
  slot: string;
  namespace: string;
  name: string;
  uid: string;
  /** The container's image: which build of dpo runs (see KubeletSimulatorOptions.images). */
  image: string;
  runtime: ImageRuntime;
  launch: Launch;
  /** The plugin's probe port on this host (and its metrics port with `pluginMetrics`), and the readiness probe of its container (if any). */
  healthPort: number;
  metricsUrl: string | undefined;
  readinessProbe: V1Container["readinessProbe"];
  /** The pod as the simulator last saw it, for the status it writes. */
  pod: V1Pod;
}

/** A plugin pod with its process running: what the node's `pods` map holds. */
export interface PodRecord extends PreparedPod {
  plugin: PluginProcess;
  startedAt: string;
  ready: boolean;
  prober: ReadinessProber | undefined;
}

/** A container the simulated kubelet admitted: the devices it got and the env its Allocate answer set. */
export interface AdmittedContainer {
  name: string;
  /** Extended resource → device ids. */
  devices: Record<string, string[]>;
  env: Record<string, string>;
}

/** A pod admitted through the device manager and running on a simulated node. */
export interface AdmittedPod {
  node: string;
  /** `namespace/name`. */
  pod: string;
  uid: string;
  containers: AdmittedContainer[];
  /**
   * For a pod with ResourceClaims: each claim (by its name in spec.resourceClaims; the claim made for
   * extended resources mapped to DRA by its own name) → the CDI device ids NodePrepareResources returned
   * for it, what the container runtime would inject. Empty otherwise.
   */
  cdiDeviceIds: Record<string, string[]>;
}
