// The device-plugin runtime's options, status and events: what the CLI, the node report and the DRA runtime
// share with it, apart from the runtime's lifecycle (runtime.ts).
import type { Logger } from "../observability/json-log.js";
import type { DevicePluginConfig } from "../api/v1beta1/config.js";
import type { RegistrationMode } from "../contract/registration.js";
import type { DeviceBackend } from "./devices/backend.js";
import type { DeviceSetSnapshot } from "./devices/device-set.js";
import type { Allocations } from "./podresources/allocations.js";
import type { SelfHealRecord } from "./registration/capacity-heal.js";
import type { ReadNodeAnnotations } from "./registration/standby.js";

export interface PluginRuntimeOptions {
  config: DevicePluginConfig;
  devicePluginDir: string;
  pluginsRegistryDir: string;
  registration: RegistrationMode;
  nodeName: string;
  /** Carries the `config`, `resource` and `node` bindings; the runtime adds none of its own. */
  logger: Logger;
  /** Replaces the backend built from the config (tests). */
  backend?: DeviceBackend;
  /** How often to re-check the kubelet's directory when file-system events are missed. */
  pollIntervalMs?: number;
  /** First and largest delay between registration attempts. */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** Budget for the backend's pre-start hook (kept under the kubelet's 30 s). */
  preStartTimeoutMs?: number;
  /** Where the CDI spec of the devices goes when `spec.cdi.enabled` (default /var/run/cdi). */
  cdiDir?: string;
  /**
   * The kubelet's PodResources socket and how often to read it, for the devices' holders (metrics and
   * the node report's allocated count); absent: not read.
   */
  podResources?: {
    socketPath: string;
    intervalMs?: number;
    /**
     * How long the kubelet may hand out fewer devices than the plugin advertises as healthy before the
     * plugin registers again (capacity-check.ts); 0 or absent: never.
     */
    capacityHealAfterMs?: number;
  };
  /** The plugin revision (the pod's DPO_REVISION); without one the plugin never stands by. */
  revision?: string | undefined;
  /**
   * Reads this node's annotations (a GET of the plugin's own Node), for the standby decision when an older
   * instance of the plugin serves the node; absent (run outside a cluster): never stands by.
   */
  readNode?: ReadNodeAnnotations | undefined;
}

/** What the runtime is doing, for probes, the node report and tests. */
export interface RuntimeStatus {
  serving: boolean;
  registered: boolean;
  socketPath: string | undefined;
  registrationSocketPath: string | undefined;
  /**
   * The device plugin API version the kubelet accepted for the current registration: the one Register
   * succeeded with, or the one the plugin watcher's GetInfo answer offered when the kubelet accepted it.
   * Empty while not registered: nothing is negotiated then.
   */
  kubeletAPIVersion: string;
  lastRegistrationError: string | undefined;
  /** When `registered` last changed (epoch ms); the runtime's start while it never has. */
  registrationChangedAtMs: number;
  kubeletRestarts: number;
  /**
   * The socket of the older instance this one stands by for (a Replace with the new plugin started
   * ahead): serving, not registering until that one is gone. Absent while not standing by.
   */
  standingBy?: string | undefined;
  /** The last time the plugin registered again because the kubelet had dropped its devices; absent: never. */
  selfHeal?: SelfHealRecord | undefined;
}

export interface PluginRuntimeEvents {
  registered: [RuntimeStatus];
  unregistered: [RuntimeStatus];
  /** A registration attempt failed with a message different from the last one. */
  registrationError: [RuntimeStatus];
  /** The plugin started or stopped standing by for an older instance. */
  standby: [RuntimeStatus];
  devices: [DeviceSetSnapshot];
  /** The plugin registered again because the kubelet had dropped its devices, or the kubelet lists them again. */
  selfHeal: [RuntimeStatus];
  /** The kubelet's answer on which containers hold the devices changed. */
  allocations: [Allocations];
}
