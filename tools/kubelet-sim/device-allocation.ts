// Devices handed to containers as the kubelet's device manager hands them out at pod admission
// (devicesToAllocate, then Allocate and PreStartContainer), and what it keeps of them per pod and container.
import type {
  AllocateResponse,
  Device,
  DevicePluginClient,
  DevicePluginOptions,
} from "../../src/plugin-runtime/proto/index.js";
import { callWithDeadline } from "./kubelet-grpc.js";

/** The kubelet's deadline on PreStartContainer (pluginapi.KubeletPreStartContainerRPCTimeoutInSecs). */
const PRE_START_CONTAINER_TIMEOUT_MS = 30_000;

export interface AllocateOptions {
  /** Devices of an init container of the same pod, taken first. */
  reuse?: readonly string[];
  /** The pod's uid: what release() gives back. */
  owner?: string;
  /** The container's name, with `owner`: what containerDevices() answers. */
  container?: string;
}

/**
 * What allocation reads and marks of one registered resource: the part of the device manager's record
 * of it (SimulatedResource) that allocation needs, so that the device manager imports this module and
 * not the other way round.
 */
export interface AllocatableResource {
  options: DevicePluginOptions;
  client: DevicePluginClient;
  /** Last device list received. */
  devices: Device[];
  connected: boolean;
  /** Device ids handed to containers. */
  allocated: Set<string>;
}

export class DeviceAllocations {
  /** Every PreStartContainer call made, in order, for assertions. */
  readonly preStartCalls: { resourceName: string; deviceIds: string[] }[] = [];
  /** Devices allocated per owner (a pod's uid), by resource: what release() gives back. */
  private readonly owners = new Map<string, Map<string, Set<string>>>();
  /**
   * Devices allocated per owner and container, by resource, in allocation order: the kubelet's
   * podDevices, which its PodResources API answers from (GetDevices(podUID, containerName)).
   */
  private readonly containers = new Map<string, Map<string, Map<string, string[]>>>();

  constructor(private readonly resources: ReadonlyMap<string, AllocatableResource>) {}

  /** Whether an owner still holds devices of `resourceName`. */
  holds(resourceName: string): boolean {
    return [...this.owners.values()].some((held) => held.has(resourceName));
  }

  /**
   * Gives back every device allocated for `owner` (a pod), as the kubelet does when the pod is no
   * longer active (UpdateAllocatedDevices). Devices allocated without an owner stay allocated.
   */
  release(owner: string): void {
    this.containers.delete(owner);
    const held = this.owners.get(owner);
    if (held === undefined) return;
    this.owners.delete(owner);
    for (const [resourceName, ids] of held) {
      const r = this.resources.get(resourceName);
      if (r !== undefined) for (const id of ids) r.allocated.delete(id);
    }
  }

  /** Devices allocated to `owner`, by resource. */
  allocatedTo(owner: string): Map<string, string[]> {
    return new Map([...(this.owners.get(owner) ?? [])].map(([resource, ids]) => [resource, [...ids]]));
  }

  /** Devices allocated to one container of `owner`, by resource (the kubelet's GetDevices). */
  containerDevices(owner: string, container: string): Map<string, string[]> {
    return new Map(
      [...(this.containers.get(owner)?.get(container) ?? [])].map(([resource, ids]) => [resource, [...ids]]),
    );
  }

  /**
   * Admits and starts one container that requests `count` devices, the way the kubelet does
   * (devicesToAllocate in pkg/kubelet/cm/devicemanager/manager.go, without NUMA alignment): devices
   * `reuse`d from an init container of the same pod come first; if they do not cover the request and
   * the plugin offers GetPreferredAllocation, it is asked with `must_include` = the devices already
   * chosen, `available` = the free devices plus those, `allocation_size` = the whole request, and the
   * part of its answer that is free is taken; the rest is filled from the free devices. Then Allocate,
   * then PreStartContainer with the container's devices when the plugin's options ask for it (30 s).
   */
  async allocate(
    resourceName: string,
    count: number,
    options: AllocateOptions = {},
  ): Promise<{ deviceIds: string[]; response: AllocateResponse }> {
    const r = this.resources.get(resourceName);
    // The kubelet's own errors (devicesToAllocate), which pod admission turns into UnexpectedAdmissionError.
    if (r === undefined) throw new Error(`cannot allocate unregistered device ${resourceName}`);
    // A plugin whose stream ended has every device marked unhealthy until it registers again.
    const healthy = new Set(
      r.connected ? r.devices.filter((d) => d.health === "Healthy").map((d) => d.ID) : [],
    );
    if (healthy.size === 0) {
      throw new Error(`no healthy devices present; cannot allocate unhealthy devices ${resourceName}`);
    }
    const reuse = options.reuse ?? [];
    const notReusable = reuse.filter((id) => !r.allocated.has(id) || !healthy.has(id));
    if (notReusable.length > 0) {
      throw new Error(`cannot reuse ${notReusable.join(", ")}: not allocated to the pod, or unhealthy`);
    }
    const chosen: string[] = [];
    const take = (ids: Iterable<string>): boolean => {
      for (const id of ids) {
        if (chosen.length >= count) break;
        if (!chosen.includes(id)) chosen.push(id);
      }
      return chosen.length >= count;
    };
    if (!take(reuse)) {
      const available = [...healthy].filter((id) => !r.allocated.has(id));
      const needed = count - chosen.length;
      if (available.length < needed) {
        throw new Error(
          `requested number of devices unavailable for ${resourceName}. Requested: ${needed}, Available: ${available.length}`,
        );
      }
      if (r.options.getPreferredAllocationAvailable) {
        const preferred = await callWithDeadline(
          r.client.getPreferredAllocation.bind(r.client),
          {
            containerRequests: [
              {
                availableDeviceIDs: [...available, ...chosen],
                mustIncludeDeviceIDs: [...chosen],
                allocationSize: count,
              },
            ],
          },
          10_000,
        );
        const free = new Set(available);
        take((preferred.containerResponses[0]?.deviceIDs ?? []).filter((id) => free.has(id)));
      }
      take(available);
    }
    const response = await callWithDeadline(
      r.client.allocate.bind(r.client),
      { containerRequests: [{ devicesIds: chosen }] },
      10_000,
    );
    for (const id of chosen) r.allocated.add(id);
    if (options.owner !== undefined) this.record(options.owner, options.container, resourceName, chosen);
    if (r.options.preStartRequired) {
      this.preStartCalls.push({ resourceName, deviceIds: [...chosen] });
      await callWithDeadline(
        r.client.preStartContainer.bind(r.client),
        { devicesIds: chosen },
        PRE_START_CONTAINER_TIMEOUT_MS,
      );
    }
    return { deviceIds: chosen, response };
  }

  /** The kubelet's podDevices: what `owner` (and its `container`) holds of `resourceName`. */
  private record(owner: string, container: string | undefined, resourceName: string, chosen: string[]): void {
    const held = this.owners.get(owner) ?? new Map<string, Set<string>>();
    this.owners.set(owner, held);
    const ids = held.get(resourceName) ?? new Set<string>();
    held.set(resourceName, ids);
    for (const id of chosen) ids.add(id);
    if (container !== undefined) {
      const byContainer = this.containers.get(owner) ?? new Map<string, Map<string, string[]>>();
      this.containers.set(owner, byContainer);
      const resources = byContainer.get(container) ?? new Map<string, string[]>();
      byContainer.set(container, resources);
      resources.set(resourceName, [...(resources.get(resourceName) ?? []), ...chosen]);
    }
  }
}
