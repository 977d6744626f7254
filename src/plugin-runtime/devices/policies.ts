// The allocation policies behind GetPreferredAllocation: which free devices a container should get.
import type { AllocationPolicy } from "../../api/v1beta1/spec.js";
import type { AdvertisedDevice } from "./types.js";

function isDigit(code: number): boolean {
  return code >= 48 && code <= 57;
}

/**
 * Orders strings the way people read device ids: digit runs compare by value, so `dev-2` < `dev-10`.
 * Strings equal by value (`dev-01`, `dev-1`) fall back to code-unit order, so the order is total and
 * every tie-break built on it is deterministic. Allocation-free: it runs inside sorts of 800+ ids.
 */
export function naturalCompare(a: string, b: string): number {
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const ca = a.charCodeAt(i);
    const cb = b.charCodeAt(j);
    if (isDigit(ca) && isDigit(cb)) {
      let startA = i;
      while (startA < a.length && a.charCodeAt(startA) === 48) startA++;
      let startB = j;
      while (startB < b.length && b.charCodeAt(startB) === 48) startB++;
      let endA = startA;
      while (endA < a.length && isDigit(a.charCodeAt(endA))) endA++;
      let endB = startB;
      while (endB < b.length && isDigit(b.charCodeAt(endB))) endB++;
      // Without leading zeros, the longer digit run is the larger number; compare as text otherwise,
      // which stays exact beyond Number.MAX_SAFE_INTEGER.
      if (endA - startA !== endB - startB) return endA - startA - (endB - startB);
      for (let k = 0; k < endA - startA; k++) {
        const diff = a.charCodeAt(startA + k) - b.charCodeAt(startB + k);
        if (diff !== 0) return diff;
      }
      i = endA;
      j = endB;
    } else {
      if (ca !== cb) return ca - cb;
      i++;
      j++;
    }
  }
  const rest = a.length - i - (b.length - j);
  if (rest !== 0) return rest;
  return a < b ? -1 : a > b ? 1 : 0;
}

type NumaKey = number | undefined;

/** Known NUMA nodes in ascending order; devices without topology information come last. */
function compareNuma(a: NumaKey, b: NumaKey): number {
  if (a === b) return 0;
  if (a === undefined) return 1;
  if (b === undefined) return -1;
  return a - b;
}

/** The free candidates on one physical device, and how much of the result already sits on it. */
interface PhysicalGroup {
  readonly physicalId: string;
  readonly numa: NumaKey;
  /** Position of the physical id in natural order: the last tie-break of every policy. */
  readonly rank: number;
  /** Free candidates, lowest replica index first. */
  readonly free: AdvertisedDevice[];
  /** Index of the next free candidate; those before it are taken. */
  next: number;
  /** Devices of this physical device in the result so far (must-include and picks). */
  used: number;
}

/** What a policy works on: candidates grouped by physical device, and the result built so far. */
interface Selection {
  /** Every group with candidates, in (physical natural order, NUMA) order. */
  readonly groups: readonly PhysicalGroup[];
  /** Devices in the result so far per NUMA node (must-include devices count). */
  readonly numaUsed: Map<NumaKey, number>;
}

function remaining(group: PhysicalGroup): number {
  return group.free.length - group.next;
}

function buildSelection(
  anchors: readonly AdvertisedDevice[],
  candidates: readonly AdvertisedDevice[],
): Selection {
  const physicalIds = new Set<string>();
  for (const device of candidates) physicalIds.add(device.physicalId);
  const rank = new Map([...physicalIds].sort(naturalCompare).map((id, index) => [id, index]));
  // Keyed by NUMA node too, so a device map whose replicas disagree about topology still groups sanely.
  const groupKey = (device: AdvertisedDevice): string => `${device.numaNode ?? ""}/${device.physicalId}`;
  const byKey = new Map<string, PhysicalGroup>();
  for (const device of candidates) {
    const key = groupKey(device);
    let group = byKey.get(key);
    if (group === undefined) {
      group = {
        physicalId: device.physicalId,
        numa: device.numaNode,
        rank: rank.get(device.physicalId) ?? 0,
        free: [],
        next: 0,
        used: 0,
      };
      byKey.set(key, group);
    }
    group.free.push(device);
  }
  const numaUsed = new Map<NumaKey, number>();
  for (const device of anchors) {
    const group = byKey.get(groupKey(device));
    if (group !== undefined) group.used++;
    numaUsed.set(device.numaNode, (numaUsed.get(device.numaNode) ?? 0) + 1);
  }
  for (const group of byKey.values()) {
    group.free.sort((x, y) => x.replica - y.replica || naturalCompare(x.id, y.id));
  }
  const groups = [...byKey.values()].sort((x, y) => x.rank - y.rank || compareNuma(x.numa, y.numa));
  return { groups, numaUsed };
}

function take(selection: Selection, group: PhysicalGroup, count: number): void {
  group.next += count;
  group.used += count;
  selection.numaUsed.set(group.numa, (selection.numaUsed.get(group.numa) ?? 0) + count);
}

function sumRemaining(groups: readonly PhysicalGroup[]): number {
  let total = 0;
  for (const group of groups) total += remaining(group);
  return total;
}

/**
 * Packs `count` devices from `groups` onto as few physical devices as possible, and among those
 * choices onto as few NUMA nodes as it can.
 *
 * 1. Physical devices that already hold must-include devices come first: their free replicas add no
 *    new physical device (best fit among them: the fewest free that still fits, else the most free).
 * 2. Then one physical device at a time, filling it before the next. Let m be the fewest physical
 *    devices that can still hold the rest (the m largest). Only "safe" devices are considered: after
 *    taking one, the others can still finish within m. Among those, in order:
 *    a NUMA node the result already touches; a node that can hold the whole rest, the fewest free
 *    first (best fit), else the node with the most free; lower NUMA node (unknown last); the
 *    physical device that fits the rest with the fewest free (best fit), else the one with the most;
 *    the physical id in natural order.
 * The safety rule keeps the physical-device count minimal (with must-include empty, the result
 * touches exactly the fewest physical devices that can hold it); NUMA packing is the tie-break.
 * Cost: O(physical devices touched x physical devices), no search.
 */
function packPhysicalDevices(selection: Selection, groups: readonly PhysicalGroup[], count: number): void {
  let need = count;
  const anchored = groups
    .filter((group) => group.used > 0 && remaining(group) > 0)
    .sort((x, y) => compareBestFit(remaining(x), remaining(y), need) || x.rank - y.rank);
  for (const group of anchored) {
    if (need === 0) return;
    const n = Math.min(need, remaining(group));
    take(selection, group, n);
    need -= n;
  }

  let pool = groups.filter((group) => remaining(group) > 0);
  while (need > 0 && pool.length > 0) {
    if (sumRemaining(pool) <= need) {
      for (const group of pool) take(selection, group, remaining(group));
      return;
    }
    const largestFirst = pool.map(remaining).sort((x, y) => y - x);
    // prefix[i] = sum of the i largest free counts; m = fewest devices whose free counts reach need.
    const prefix = [0];
    let m = 0;
    while ((prefix[m] ?? 0) < need) {
      prefix.push((prefix[m] ?? 0) + (largestFirst[m] ?? 0));
      m++;
    }
    const topM = prefix[m] ?? 0;
    const topBelowM = prefix[m - 1] ?? 0;
    const smallestOfTopBelowM = m >= 2 ? (largestFirst[m - 2] ?? 0) : Infinity;
    const isSafe = (group: PhysicalGroup): boolean => {
      const free = remaining(group);
      if (free >= need) return true;
      // The m-1 largest among the others: the m largest minus this one if it is among them.
      const others = free >= smallestOfTopBelowM ? topM - free : topBelowM;
      return need - free <= others;
    };

    const nodeFree = new Map<NumaKey, number>();
    for (const group of pool) nodeFree.set(group.numa, (nodeFree.get(group.numa) ?? 0) + remaining(group));
    const touched = (numa: NumaKey): number => ((selection.numaUsed.get(numa) ?? 0) > 0 ? 0 : 1);
    let best: PhysicalGroup | undefined;
    for (const group of pool) {
      if (!isSafe(group)) continue;
      if (best === undefined) {
        best = group;
        continue;
      }
      const order =
        touched(group.numa) - touched(best.numa) ||
        compareBestFit(nodeFree.get(group.numa) ?? 0, nodeFree.get(best.numa) ?? 0, need) ||
        compareNuma(group.numa, best.numa) ||
        compareBestFit(remaining(group), remaining(best), need) ||
        group.rank - best.rank;
      if (order < 0) best = group;
    }
    // The largest device is always safe, so best is set; stay total regardless.
    const chosen = best ?? pool[0];
    if (chosen === undefined) return;
    const n = Math.min(need, remaining(chosen));
    take(selection, chosen, n);
    need -= n;
    pool = pool.filter((group) => remaining(group) > 0);
  }
}

/**
 * Best fit for `need`: whatever can hold all of it comes first, the fewest free first; when neither
 * can, the one with the most free first (it leaves the least for the next step).
 */
function compareBestFit(freeA: number, freeB: number, need: number): number {
  const fitsA = freeA >= need;
  const fitsB = freeB >= need;
  if (fitsA !== fitsB) return fitsA ? -1 : 1;
  return fitsA ? freeA - freeB : freeB - freeA;
}

/**
 * All of the request on one NUMA node when one can hold it: the node holding must-include devices,
 * else the one with the fewest free devices that fits (known nodes before devices without topology,
 * then lower node). When none fits, the node with the most free is filled and the choice repeats,
 * which touches the fewest NUMA nodes. Within a node, devices are packed as in `Packed`.
 */
function alignToNumaNode(selection: Selection, count: number): void {
  const nodes = new Map<NumaKey, PhysicalGroup[]>();
  for (const group of selection.groups) {
    const members = nodes.get(group.numa);
    if (members === undefined) nodes.set(group.numa, [group]);
    else members.push(group);
  }
  let need = count;
  while (need > 0) {
    const open = [...nodes]
      .map(([numa, groups]) => ({ numa, groups, free: sumRemaining(groups) }))
      .filter((node) => node.free > 0);
    const holdingMustInclude = open.filter((node) => (selection.numaUsed.get(node.numa) ?? 0) > 0);
    const pool = holdingMustInclude.length > 0 ? holdingMustInclude : open;
    const withoutTopology = (numa: NumaKey): number => (numa === undefined ? 1 : 0);
    let best = pool[0];
    for (const node of pool.slice(1)) {
      if (best === undefined) break;
      // A known node that holds everything beats devices without topology that would too.
      const bothFit = node.free >= need && best.free >= need;
      const order =
        (bothFit ? withoutTopology(node.numa) - withoutTopology(best.numa) : 0) ||
        compareBestFit(node.free, best.free, need) ||
        compareNuma(node.numa, best.numa);
      if (order < 0) best = node;
    }
    if (best === undefined) return;
    const n = Math.min(need, best.free);
    packPhysicalDevices(selection, best.groups, n);
    need -= n;
  }
}

/** A binary min-heap; small and local because Spread needs one per NUMA node. */
class MinHeap<T> {
  private readonly items: T[] = [];
  constructor(private readonly before: (a: T, b: T) => number) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    this.items.push(item);
    let at = this.items.length - 1;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (this.before(this.items[at] as T, this.items[parent] as T) >= 0) break;
      this.swap(at, parent);
      at = parent;
    }
  }

  /** Restores the order after the top item's key grew; drops it when `keep` is false. */
  updateTop(keep: boolean): void {
    if (!keep) {
      const last = this.items.pop();
      if (last === undefined || this.items.length === 0) return;
      this.items[0] = last;
    }
    this.siftDown(0);
  }

  private siftDown(start: number): void {
    let at = start;
    for (;;) {
      const left = 2 * at + 1;
      const right = left + 1;
      let smallest = at;
      if (left < this.items.length && this.before(this.items[left] as T, this.items[smallest] as T) < 0) {
        smallest = left;
      }
      if (right < this.items.length && this.before(this.items[right] as T, this.items[smallest] as T) < 0) {
        smallest = right;
      }
      if (smallest === at) return;
      this.swap(at, smallest);
      at = smallest;
    }
  }

  private swap(a: number, b: number): void {
    const item = this.items[a] as T;
    this.items[a] = this.items[b] as T;
    this.items[b] = item;
  }
}

/**
 * Spreads `count` devices: each pick goes to the physical device with the fewest devices in the
 * result, then the NUMA node with the fewest (round-robin across nodes), then the physical device
 * with the most free replicas (the least loaded), then lower NUMA node (unknown last), then the
 * physical id in natural order; within a device the lowest free replica. Replicas of one physical
 * device are therefore used only once every other available physical device has one.
 * Cost: O(count x (NUMA nodes + log physical devices)).
 */
function spread(selection: Selection, count: number): void {
  const withinNode = (x: PhysicalGroup, y: PhysicalGroup): number =>
    x.used - y.used || remaining(y) - remaining(x) || x.rank - y.rank;
  const heaps = new Map<NumaKey, MinHeap<PhysicalGroup>>();
  for (const group of selection.groups) {
    if (remaining(group) === 0) continue;
    let heap = heaps.get(group.numa);
    if (heap === undefined) {
      heap = new MinHeap(withinNode);
      heaps.set(group.numa, heap);
    }
    heap.push(group);
  }
  const nodes = [...heaps].sort(([x], [y]) => compareNuma(x, y));
  for (let picked = 0; picked < count; picked++) {
    let bestHeap: MinHeap<PhysicalGroup> | undefined;
    let best: PhysicalGroup | undefined;
    for (const [numa, heap] of nodes) {
      const top = heap.peek();
      if (top === undefined) continue;
      if (best === undefined) {
        best = top;
        bestHeap = heap;
        continue;
      }
      const order =
        top.used - best.used ||
        (selection.numaUsed.get(numa) ?? 0) - (selection.numaUsed.get(best.numa) ?? 0) ||
        remaining(best) - remaining(top) ||
        compareNuma(numa, best.numa) ||
        top.rank - best.rank;
      if (order < 0) {
        best = top;
        bestHeap = heap;
      }
    }
    if (best === undefined || bestHeap === undefined) return;
    take(selection, best, 1);
    bestHeap.updateTop(remaining(best) > 0);
  }
}

/** Takes devices in reading order: physical devices in natural order, then replica index. */
function inReadingOrder(selection: Selection, count: number): void {
  let need = count;
  for (const group of selection.groups) {
    if (need === 0) return;
    const n = Math.min(need, remaining(group));
    take(selection, group, n);
    need -= n;
  }
}

/**
 * Chooses `count` of `candidates` (capped at how many there are) for a container that already holds
 * `anchors` (its must-include devices), following `policy`. Candidates must be distinct and must not
 * include the anchors. The answer does not depend on the order of either list, and comes in reading
 * order (physical id in natural order, then replica index) without sorting ids: at 800 candidates
 * a natural sort of the ids would cost more than the whole decision.
 */
export function choosePreferredDevices(
  policy: AllocationPolicy,
  anchors: readonly AdvertisedDevice[],
  candidates: readonly AdvertisedDevice[],
  count: number,
): AdvertisedDevice[] {
  const wanted = Math.min(Math.max(0, Math.floor(count)), candidates.length);
  if (wanted === 0) return [];
  const selection = buildSelection(anchors, candidates);
  switch (policy) {
    case "None":
      inReadingOrder(selection, wanted);
      break;
    case "Packed":
      packPhysicalDevices(selection, selection.groups, wanted);
      break;
    case "Spread":
      spread(selection, wanted);
      break;
    case "NUMAAligned":
      alignToNumaNode(selection, wanted);
      break;
  }
  // Every policy takes each device's free candidates from the front, so the taken ones are a prefix.
  return selection.groups.flatMap((group) => group.free.slice(0, group.next));
}
