// The part of a resource.k8s.io/v1 ResourceClaim the DRA plugin reads, and how it gets one: an injected
// getter, so this module makes no API call and a later slice plugs in the API client.

/**
 * One allocated device (resource.k8s.io/v1 DeviceRequestAllocationResult). Field names are the API's;
 * only what preparing a claim needs is typed.
 */
export interface DeviceRequestAllocationResult {
  /** The claim's request this device serves; `<request>/<subrequest>` when a subrequest was chosen. */
  readonly request: string;
  /** The DRA driver whose device this is: the kubelet calls each driver for its own results. */
  readonly driver: string;
  /** The ResourceSlice pool; this project's plugin publishes one pool per node, named after the node. */
  readonly pool: string;
  /** The device's name within the pool. */
  readonly device: string;
  /**
   * Set by the scheduler on each allocation of a device that allows multiple allocations (a time-sliced
   * device): claims holding one device each get their own. Preparing reads nothing from it, since each
   * claim gets its own CDI spec file and device name.
   */
  readonly shareID?: string;
}

/**
 * A ResourceClaim as the getter returns it. Everything is optional as in the API's generated clients, so
 * an object read with `@kubernetes/client-node` (ResourceV1ResourceClaim) can be passed as it is.
 */
export interface DraResourceClaim {
  readonly metadata?: {
    readonly name?: string;
    readonly namespace?: string;
    readonly uid?: string;
  };
  readonly status?: {
    readonly allocation?: {
      readonly devices?: {
        readonly results?: readonly DeviceRequestAllocationResult[];
      };
    };
  };
}

/** A claim as the kubelet names it in NodePrepareResources and NodeUnprepareResources. */
export interface ClaimReference {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
}

/**
 * Reads a ResourceClaim by namespace and name. Resolves with the claim, or undefined when it does not
 * exist; throws (or rejects) when it cannot tell. The uid is passed so an implementation can read
 * through a cache keyed by it; the plugin compares the returned object's uid itself. `signal` aborts
 * when the plugin's budget for the call is spent.
 */
export interface ResourceClaimGetter {
  getResourceClaim(ref: ClaimReference, signal: AbortSignal): Promise<DraResourceClaim | undefined>;
}
