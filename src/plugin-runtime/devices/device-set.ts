// The node's current devices as the kubelet sees them: backend snapshots expanded by the sharing policy,
// versioned, with change notifications for ListAndWatch streams and the node report.
import type { Sharing } from "../../api/v1beta1/spec.js";
import type { DeviceBackend } from "./backend.js";
import { advertiseDevices } from "./sharing.js";
import type { AdvertisedDevice, PhysicalDevice } from "./types.js";

export interface DeviceSetSnapshot {
  /** Increases by one on every change the kubelet must hear about. */
  readonly version: number;
  readonly physical: readonly PhysicalDevice[];
  readonly advertised: readonly AdvertisedDevice[];
  readonly byId: ReadonlyMap<string, AdvertisedDevice>;
  /**
   * Physical devices the node's other publish path holds (pods admitted through the device plugin before
   * a switch to DRA, or through DRA before the way back): in `physical`, never in `advertised`, so this
   * path does not hand them out a second time while those pods run.
   */
  readonly heldElsewhere: ReadonlySet<string>;
  /** `physical` less `heldElsewhere`: what this path may hand out, and what `advertised` expands. */
  readonly unheld: readonly PhysicalDevice[];
  /** When this snapshot was taken (performance.now()), for health-latency measurements. */
  readonly changedAt: number;
}

export type DeviceSetListener = (snapshot: DeviceSetSnapshot) => void;

function sameAdvertised(a: readonly AdvertisedDevice[], b: readonly AdvertisedDevice[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x.id !== y.id || x.health !== y.health || x.numaNode !== y.numaNode || x.reason !== y.reason)
      return false;
  }
  return true;
}

function samePhysical(a: readonly PhysicalDevice[], b: readonly PhysicalDevice[]): boolean {
  if (a.length !== b.length) return false;
  return a.every((x, i) => {
    const y = b[i]!;
    return (
      x.id === y.id &&
      x.health === y.health &&
      x.reason === y.reason &&
      x.numaNode === y.numaNode &&
      JSON.stringify(x.attributes) === JSON.stringify(y.attributes)
    );
  });
}

/** Whether two id sets hold the same ids. */
function sameIdSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  return a.size === b.size && [...a].every((x) => b.has(x));
}

export class DeviceSet {
  private current: DeviceSetSnapshot;
  private readonly listeners = new Set<DeviceSetListener>();
  private unsubscribe: (() => void) | undefined;
  private held: ReadonlySet<string> = new Set();

  constructor(
    private readonly backend: DeviceBackend,
    private readonly sharing: Sharing,
  ) {
    this.current = this.snapshotOf([], 0);
  }

  /** Starts the backend and follows its device lists. */
  async start(): Promise<DeviceSetSnapshot> {
    const initial = await this.backend.start();
    this.current = this.snapshotOf(initial, 1);
    this.unsubscribe = this.backend.subscribe((devices) => this.update(devices));
    // A change delivered between start() resolving and subscribe() is picked up here.
    this.update(this.backend.devices());
    return this.current;
  }

  snapshot(): DeviceSetSnapshot {
    return this.current;
  }

  /** Registers a listener for changes; returns a function that removes it. */
  onChange(listener: DeviceSetListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Which physical devices the other publish path holds now (the kubelet's PodResources answer); they
   * leave `advertised` until freed. A change is one more snapshot, as a backend change is.
   */
  holdElsewhere(physicalIds: ReadonlySet<string>): void {
    if (sameIdSet(physicalIds, this.held)) return;
    this.held = new Set(physicalIds);
    this.publish(this.snapshotOf(this.current.physical, this.current.version + 1));
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.listeners.clear();
    await this.backend.stop();
  }

  private update(physical: readonly PhysicalDevice[]): void {
    const next = this.snapshotOf(physical, this.current.version + 1);
    if (
      sameAdvertised(next.advertised, this.current.advertised) &&
      samePhysical(physical, this.current.physical)
    ) {
      return;
    }
    this.publish(next);
  }

  private publish(next: DeviceSetSnapshot): void {
    this.current = next;
    for (const listener of [...this.listeners]) listener(next);
  }

  private snapshotOf(physical: readonly PhysicalDevice[], version: number): DeviceSetSnapshot {
    const held = this.held;
    const unheld = held.size === 0 ? [...physical] : physical.filter((d) => !held.has(d.id));
    const advertised = advertiseDevices(unheld, this.sharing);
    return {
      version,
      physical: [...physical],
      advertised,
      byId: new Map(advertised.map((d) => [d.id, d])),
      heldElsewhere: held,
      unheld,
      changedAt: performance.now(),
    };
  }
}
