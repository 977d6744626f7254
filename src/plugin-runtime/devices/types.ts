// Device model shared by backends, the device set and allocation policies; knows nothing of gRPC.

export type Health = "Healthy" | "Unhealthy";

/** A physical device as a backend discovers it. */
export interface PhysicalDevice {
  /** Stable id of the physical device, unique on the node (e.g. `foo-0`, `0000:3b:00.0`, `ttyUSB0`). */
  readonly id: string;
  /** NUMA node the device is attached to; undefined when the backend does not know. */
  readonly numaNode: number | undefined;
  readonly health: Health;
  /** Why the device is unhealthy (or recovered); empty when there is nothing to say. */
  readonly reason: string;
  /** Descriptive attributes reported to the API (vendor, model, PCI address, ...). */
  readonly attributes: Readonly<Record<string, string>>;
}

/**
 * A device as the kubelet sees it: one per physical device without sharing, or `replicas` per physical
 * device (`<physical>::<k>`) with time-slicing. Health always follows the physical device.
 */
export interface AdvertisedDevice {
  readonly id: string;
  readonly physicalId: string;
  /** Replica index within the physical device; 0 without sharing. */
  readonly replica: number;
  readonly numaNode: number | undefined;
  readonly health: Health;
  readonly reason: string;
}

/** A device node a container gets (the kubelet's DeviceSpec). */
export interface ContainerDeviceSpec {
  readonly containerPath: string;
  readonly hostPath: string;
  /** cgroup permissions: a combination of r, w, m. */
  readonly permissions: string;
}

/** A bind mount a container gets (the kubelet's Mount). */
export interface ContainerMount {
  readonly containerPath: string;
  readonly hostPath: string;
  readonly readOnly: boolean;
}

/** What a backend says a container needs for a set of physical devices. */
export interface ContainerAllocation {
  readonly envs: Readonly<Record<string, string>>;
  readonly mounts: readonly ContainerMount[];
  readonly devices: readonly ContainerDeviceSpec[];
  readonly annotations: Readonly<Record<string, string>>;
}
