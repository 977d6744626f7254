// The interface every hardware backend implements: discovery, health events, allocation details and
// an optional pre-start hook. The gRPC server never talks to hardware; it talks to this.
import type { CdiContainerEdits } from "../../cdi/spec.js";
import type { Interconnect } from "./interconnect.js";
import type { ContainerAllocation, PhysicalDevice } from "./types.js";

/** Called with the complete, current device list whenever discovery or health changes. */
export type DeviceListener = (devices: readonly PhysicalDevice[]) => void;

export interface DeviceBackend {
  /** Backend type as written in the config (`Mock`, `DevFS`, `PCI`, `NVIDIA`). */
  readonly type: string;
  /** True when containers must go through preStart before they start (advertised to the kubelet). */
  readonly preStartRequired: boolean;
  /**
   * Discovers the devices and starts watching them. Resolves with the first device list; later
   * changes (health, hot-plug, recovery) are delivered to subscribers.
   */
  start(): Promise<readonly PhysicalDevice[]>;
  /** The current device list (the last one delivered). */
  devices(): readonly PhysicalDevice[];
  /** Registers a listener for device-list changes; returns a function that unsubscribes it. */
  subscribe(listener: DeviceListener): () => void;
  /**
   * What a container needs for these physical devices (device nodes, mounts, env, annotations).
   * Ids are known physical ids; the caller has already checked them. Must not block.
   */
  allocate(physicalIds: readonly string[]): ContainerAllocation;
  /**
   * What a container runtime must do for one physical device requested by its CDI name (the device's
   * entry in the CDI spec): never empty, and complete for that device alone, since runtimes merge the
   * edits of every device a container gets (so env names are per device). Undefined for unknown ids.
   */
  cdiContainerEdits(physicalId: string): CdiContainerEdits | undefined;
  /** Prepares devices before a container starts; only called when preStartRequired. */
  preStart?(physicalIds: readonly string[], signal: AbortSignal): Promise<void>;
  /**
   * What keeps the backend from a full picture right now (a tool that fails, a source it cannot read),
   * one line each, for `dpo probe`; empty when nothing does. Optional: backends that cannot fail this way
   * have none.
   */
  diagnostics?(): readonly string[];
  /**
   * How well the physical devices are connected to each other (NVIDIA: NVLink and PCIe from
   * `nvidia-smi topo -m`), for GetPreferredAllocation; undefined when not known. Must not block.
   */
  interconnect?(): Interconnect | undefined;
  /** Stops watching; idempotent. */
  stop(): Promise<void>;
}
