// Interconnect-aware preference: among the sets of physical devices a request could get, the one whose
// devices are best connected to each other (and to the container's must-include devices). Generic: a
// backend that knows its links (NVIDIA, from `nvidia-smi topo -m`) gives a score per pair; the policies
// (policies.ts) still decide how many physical devices the request spans and which set wins among equals.
import type { AllocationPolicy } from "../../api/v1beta1/spec.js";
import { choosePreferredDevices, naturalCompare } from "./policies.js";
import type { AdvertisedDevice } from "./types.js";

/**
 * Link scores between physical devices, higher is better connected. A backend builds it once per device
 * set (not per request): GetPreferredAllocation only reads it.
 */
export interface Interconnect {
  /** Physical id → row of `scores`. */
  readonly index: ReadonlyMap<string, number>;
  /** Row-major `index.size × index.size`, symmetric; the diagonal is unused. */
  readonly scores: Uint16Array;
}

/** Builds an interconnect from a pair-score function over `ids`. */
export function interconnectOf(
  ids: readonly string[],
  score: (a: string, b: string) => number,
): Interconnect {
  const n = ids.length;
  const scores = new Uint16Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let j = i + 1; j < n; j++) {
      const s = Math.max(0, Math.min(0xffff, Math.round(score(ids[i] as string, ids[j] as string))));
      scores[i * n + j] = s;
      scores[j * n + i] = s;
    }
  }
  return { index: new Map(ids.map((id, i) => [id, i])), scores };
}

/**
 * How well a set of physical devices is connected: its weakest link first (the bottleneck a collective
 * over the set runs at), then the sum over every pair (more strong links is better). A set of one device
 * has no link and is as good as it gets.
 */
export interface Connectedness {
  readonly weakest: number;
  readonly total: number;
}

/** Compares two connectednesses: negative when `a` is better connected. Pure. */
export function compareConnectedness(a: Connectedness, b: Connectedness): number {
  return b.weakest - a.weakest || b.total - a.total;
}

/** The connectedness of a set of physical ids; undefined when the interconnect does not know one. Pure. */
export function connectedness(
  interconnect: Interconnect,
  physicalIds: Iterable<string>,
): Connectedness | undefined {
  const rows: number[] = [];
  for (const id of new Set(physicalIds)) {
    const row = interconnect.index.get(id);
    if (row === undefined) return undefined;
    rows.push(row);
  }
  const n = interconnect.index.size;
  let weakest = Infinity;
  let total = 0;
  for (let i = 0; i < rows.length; i++) {
    for (let j = i + 1; j < rows.length; j++) {
      const s = interconnect.scores[(rows[i] as number) * n + (rows[j] as number)] as number;
      if (s < weakest) weakest = s;
      total += s;
    }
  }
  return { weakest, total };
}

/**
 * Most partial sets the search extends per call, each extension O(devices in the set). Up to 8 GPUs the
 * whole search is at most 2^8 extensions and always exact. Where most GPUs are wanted and the sets of
 * those left out number at most the budget (12 of 16: 1,820), those are enumerated instead, exactly. 8 of
 * 16 GPUs takes up to about 39,000 extensions without pruning, so there the budget can end the search. Greedy sets grown from each GPU (or from the
 * must-include GPUs) seed it, and the answer is the best set found: never worse connected than the
 * policy's own choice or the greedy ones. Time-slicing does not grow the search: it runs over GPUs, not
 * replicas. Measured by bench-plugin.
 */
export const SEARCH_BUDGET = 10_000;

interface Gpu {
  readonly physicalId: string;
  readonly row: number;
  readonly rank: number;
  readonly numa: number | undefined;
  /** Free candidates, lowest replica first. */
  readonly free: AdvertisedDevice[];
  /** Weakest link to the must-include devices' GPUs (Infinity when there are none). */
  readonly anchorWeakest: number;
  readonly anchorTotal: number;
}

/**
 * Chooses `count` of `candidates` for a container holding `anchors`, as `choosePreferredDevices` does,
 * but with the best-connected set of physical devices:
 * 1. The policy's own choice fixes how many new physical devices the request spans and how many
 *    devices each takes (time-sliced replicas share their GPU's links; must-include GPUs keep theirs).
 * 2. Among the sets of that many available physical devices that can hold those counts, the best
 *    connected one (with the anchors' GPUs, see `Connectedness`) wins.
 * 3. Among equally connected sets: the policy's own choice; else, for Packed and NUMAAligned the set
 *    on the fewest NUMA nodes, for Spread the most; then the most devices shared with the policy's
 *    choice; then natural order of the physical ids.
 * Without an interconnect, or when it does not know a device involved, the policy's choice stands.
 * The answer is in reading order (physical id in natural order, then replica).
 */
export function chooseConnectedDevices(
  policy: AllocationPolicy,
  anchors: readonly AdvertisedDevice[],
  candidates: readonly AdvertisedDevice[],
  count: number,
  interconnect: Interconnect | undefined,
): AdvertisedDevice[] {
  const baseline = choosePreferredDevices(policy, anchors, candidates, count);
  if (interconnect === undefined || policy === "None" || baseline.length === 0) return baseline;

  const anchorIds = new Set(anchors.map((d) => d.physicalId));
  const anchorRows: number[] = [];
  for (const id of anchorIds) {
    const row = interconnect.index.get(id);
    if (row === undefined) return baseline;
    anchorRows.push(row);
  }
  // The baseline's devices on must-include GPUs stay; its other GPUs are what the search may replace.
  const kept: AdvertisedDevice[] = [];
  const baselineCounts = new Map<string, number>();
  for (const device of baseline) {
    if (anchorIds.has(device.physicalId)) kept.push(device);
    else baselineCounts.set(device.physicalId, (baselineCounts.get(device.physicalId) ?? 0) + 1);
  }
  const m = baselineCounts.size;
  if (m === 0) return baseline;

  const n = interconnect.index.size;
  const byId = new Map<string, AdvertisedDevice[]>();
  for (const device of candidates) {
    if (anchorIds.has(device.physicalId)) continue;
    const list = byId.get(device.physicalId);
    if (list === undefined) byId.set(device.physicalId, [device]);
    else list.push(device);
  }
  const ids = [...byId.keys()].sort(naturalCompare);
  const gpus: Gpu[] = [];
  for (const [rank, physicalId] of ids.entries()) {
    const row = interconnect.index.get(physicalId);
    if (row === undefined) return baseline;
    const free = (byId.get(physicalId) ?? []).sort(
      (x, y) => x.replica - y.replica || naturalCompare(x.id, y.id),
    );
    let anchorWeakest = Infinity;
    let anchorTotal = 0;
    for (const a of anchorRows) {
      const s = interconnect.scores[row * n + a] as number;
      if (s < anchorWeakest) anchorWeakest = s;
      anchorTotal += s;
    }
    gpus.push({ physicalId, row, rank, numa: free[0]?.numaNode, free, anchorWeakest, anchorTotal });
  }
  let anchorWeakest = Infinity;
  let anchorTotal = 0;
  for (let i = 0; i < anchorRows.length; i++) {
    for (let j = i + 1; j < anchorRows.length; j++) {
      const s = interconnect.scores[(anchorRows[i] as number) * n + (anchorRows[j] as number)] as number;
      if (s < anchorWeakest) anchorWeakest = s;
      anchorTotal += s;
    }
  }

  const counts = [...baselineCounts.values()].sort((x, y) => y - x);
  // One device per GPU (no time-slicing, or Spread) fits any set: every candidate GPU has one free.
  const onePerGpu = (counts[0] ?? 0) <= 1;
  const canHold = (set: readonly Gpu[]): boolean => {
    if (onePerGpu) return true;
    const free = set.map((g) => g.free.length).sort((x, y) => y - x);
    return counts.every((c, i) => (free[i] ?? 0) >= c);
  };
  const anchorNuma = new Set(anchors.map((d) => d.numaNode));
  const numaCount = (set: readonly Gpu[]): number => {
    const nodes = new Set(anchorNuma);
    for (const g of set) nodes.add(g.numa);
    return nodes.size;
  };
  const numaOrder = policy === "Spread" ? -1 : 1;
  const overlap = (set: readonly Gpu[]): number => set.filter((g) => baselineCounts.has(g.physicalId)).length;

  const baselineSet = gpus.filter((g) => baselineCounts.has(g.physicalId));
  let best: { set: Gpu[]; weakest: number; total: number; isBaseline: boolean } | undefined;
  {
    let weakest = anchorWeakest;
    let total = anchorTotal;
    for (let i = 0; i < baselineSet.length; i++) {
      const g = baselineSet[i] as Gpu;
      weakest = Math.min(weakest, g.anchorWeakest);
      total += g.anchorTotal;
      for (let j = 0; j < i; j++) {
        const s = interconnect.scores[g.row * n + (baselineSet[j] as Gpu).row] as number;
        weakest = Math.min(weakest, s);
        total += s;
      }
    }
    best = { set: baselineSet, weakest, total, isBaseline: true };
  }

  let maxScore = 0;
  for (const g of gpus) {
    for (const h of gpus)
      if (g !== h) maxScore = Math.max(maxScore, interconnect.scores[g.row * n + h.row] as number);
    for (const a of anchorRows) maxScore = Math.max(maxScore, interconnect.scores[g.row * n + a] as number);
  }

  /** Whether a set this connected could beat the best so far (ties with the baseline cannot). */
  const mayBeat = (weakest: number, total: number): boolean => {
    if (best === undefined) return true;
    const order = best.weakest - weakest || best.total - total;
    return order < 0 || (order === 0 && !best.isBaseline);
  };
  let bestNuma: { set: Gpu[]; numa: number; overlap: number } | undefined;
  /** Whether a complete set beats the best so far (ties go to the best so far, the baseline first). */
  const better = (set: Gpu[], weakest: number, total: number): boolean => {
    if (best === undefined) return true;
    const order = best.weakest - weakest || best.total - total;
    if (order !== 0) return order < 0;
    if (best.isBaseline) return false;
    if (bestNuma?.set !== best.set) {
      bestNuma = { set: best.set, numa: numaCount(best.set), overlap: overlap(best.set) };
    }
    const numa = numaOrder * (numaCount(set) - bestNuma.numa);
    if (numa !== 0) return numa < 0;
    return overlap(set) > bestNuma.overlap;
  };

  /** The devices of the winning set: the largest count to the GPU with the most free (natural order among equals). */
  const answer = (winner: typeof best): AdvertisedDevice[] => {
    if (winner === undefined || winner.isBaseline) return baseline;
    const order = [...winner.set].sort((x, y) => y.free.length - x.free.length || x.rank - y.rank);
    const picked: AdvertisedDevice[] = [...kept];
    order.forEach((g, i) => picked.push(...g.free.slice(0, counts[i] ?? 0)));
    return picked.sort((x, y) => naturalCompare(x.physicalId, y.physicalId) || x.replica - y.replica);
  };

  const chosen: Gpu[] = [];
  let visits = 0;
  const search = (start: number, weakest: number, total: number): void => {
    if (chosen.length === m) {
      if (canHold(chosen) && better(chosen, weakest, total)) {
        best = { set: [...chosen], weakest, total, isBaseline: false };
      }
      return;
    }
    const left = m - chosen.length;
    for (let i = start; i <= gpus.length - left; i++) {
      if (visits >= SEARCH_BUDGET) return;
      visits++;
      const g = gpus[i] as Gpu;
      let w = Math.min(weakest, g.anchorWeakest);
      let t = total + g.anchorTotal;
      for (const c of chosen) {
        const s = interconnect.scores[g.row * n + c.row] as number;
        if (s < w) w = s;
        t += s;
      }
      // Bounds: the weakest link only gets weaker as devices join; each pair still to come adds at
      // most the best score there is.
      const still = left - 1;
      const pairsToCome = still * (chosen.length + 1 + anchorRows.length) + (still * (still - 1)) / 2;
      const bound = best;
      if (bound !== undefined) {
        if (w < bound.weakest) continue;
        if (w === bound.weakest) {
          const most = t + pairsToCome * maxScore;
          if (most < bound.total || (most === bound.total && bound.isBaseline)) continue;
        }
      }
      chosen.push(g);
      search(i + 1, w, t);
      chosen.pop();
    }
  };
  // Most GPUs wanted (12 of 16, say): enumerate the few left out instead, each set in O(left out²).
  const leftOut = gpus.length - m;
  if (leftOut < m && combinations(gpus.length, leftOut) <= SEARCH_BUDGET) {
    const contrib = gpus.map((g) => {
      let sum = g.anchorTotal;
      for (const h of gpus) if (h !== g) sum += interconnect.scores[g.row * n + h.row] as number;
      return sum;
    });
    let totalAll = anchorTotal;
    const pairs: [score: number, a: number, b: number][] = [];
    gpus.forEach((g, i) => {
      totalAll += g.anchorTotal;
      for (const a of anchorRows) pairs.push([interconnect.scores[g.row * n + a] as number, i, -1]);
      for (let j = i + 1; j < gpus.length; j++) {
        const score = interconnect.scores[g.row * n + (gpus[j] as Gpu).row] as number;
        totalAll += score;
        pairs.push([score, i, j]);
      }
    });
    pairs.sort((x, y) => x[0] - y[0]);
    const out: number[] = [];
    const excluded = new Array<boolean>(gpus.length).fill(false);
    const visit = (start: number): void => {
      if (out.length === leftOut) {
        let total = totalAll;
        for (let x = 0; x < out.length; x++) {
          const e = gpus[out[x] as number] as Gpu;
          total -= contrib[out[x] as number] as number;
          for (let y = 0; y < x; y++)
            total += interconnect.scores[e.row * n + (gpus[out[y] as number] as Gpu).row] as number;
        }
        let weakest = anchorWeakest;
        for (const [score, a, b] of pairs) {
          if (excluded[a] === true || (b >= 0 && excluded[b] === true)) continue;
          weakest = Math.min(weakest, score);
          break;
        }
        if (!mayBeat(weakest, total)) return;
        const set = gpus.filter((_, i) => excluded[i] !== true);
        if (canHold(set) && better(set, weakest, total)) best = { set, weakest, total, isBaseline: false };
        return;
      }
      for (let i = start; i <= gpus.length - (leftOut - out.length); i++) {
        out.push(i);
        excluded[i] = true;
        visit(i + 1);
        excluded[i] = false;
        out.pop();
      }
    };
    visit(0);
    return answer(best);
  }

  // Greedy seeds first (from each GPU, or from the anchors): a good set found early prunes the search.
  const grow = (seed: Gpu | undefined): void => {
    const set: Gpu[] = [];
    let weakest = anchorWeakest;
    let total = anchorTotal;
    const add = (g: Gpu): void => {
      weakest = Math.min(weakest, g.anchorWeakest);
      total += g.anchorTotal;
      for (const c of set) {
        const s = interconnect.scores[g.row * n + c.row] as number;
        if (s < weakest) weakest = s;
        total += s;
      }
      set.push(g);
    };
    if (seed !== undefined) add(seed);
    while (set.length < m) {
      let pick: Gpu | undefined;
      let pickWeakest = -1;
      let pickTotal = -1;
      for (const g of gpus) {
        if (set.includes(g)) continue;
        let w = Math.min(weakest, g.anchorWeakest);
        let t = g.anchorTotal;
        for (const c of set) {
          const s = interconnect.scores[g.row * n + c.row] as number;
          if (s < w) w = s;
          t += s;
        }
        if (w > pickWeakest || (w === pickWeakest && t > pickTotal)) {
          pick = g;
          pickWeakest = w;
          pickTotal = t;
        }
      }
      if (pick === undefined) return;
      add(pick);
    }
    if (canHold(set) && better(set, weakest, total)) best = { set, weakest, total, isBaseline: false };
  };
  if (anchorRows.length > 0) grow(undefined);
  else for (const g of gpus) grow(g);

  search(0, anchorWeakest, anchorTotal);

  return answer(best);
}

/** n choose k, saturating above 2^53. */
function combinations(n: number, k: number): number {
  let c = 1;
  for (let i = 0; i < k; i++) c = (c * (n - i)) / (i + 1);
  return c;
}
