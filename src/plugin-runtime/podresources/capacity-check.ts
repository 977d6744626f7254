// Whether the kubelet hands out fewer of the plugin's devices than the plugin advertises as healthy, for
// longer than a bound, while the plugin believes it is registered: then the kubelet has dropped it without
// the plugin noticing (its plugin-watcher registration socket removed, a stream it ended, a restart the
// plugin missed), and the plugin registers again. Pure: the runtime keeps the state and does the work.

/** How long the kubelet may list fewer devices than the plugin advertises before it registers again. */
export const DEFAULT_CAPACITY_HEAL_AFTER_MS = 30_000;
/** The longest wait between two heals while the kubelet keeps listing fewer (the wait doubles each time). */
export const CAPACITY_HEAL_MAX_MS = 5 * 60_000;

/** One reading of the kubelet's allocatable devices beside what the plugin advertises. */
export interface CapacityObservation {
  atMs: number;
  /** The plugin believes the kubelet registered it (and it serves, not standing by for an older one). */
  registered: boolean;
  /** The plugin stands by for an older instance: the kubelet is not meant to use it yet. */
  standingBy: boolean;
  /** The ids the plugin advertises as healthy. */
  pluginHealthy: ReadonlySet<string>;
  /**
   * The resource's ids the kubelet's GetAllocatableResources lists (its `allDevices ∩ healthyDevices`,
   * what it would hand out); undefined when it did not answer.
   */
  kubeletAllocatable: ReadonlySet<string> | undefined;
}

export interface CapacityState {
  /** Since when the kubelet lists fewer while the plugin is registered; undefined while it lists them all. */
  shortSinceMs?: number | undefined;
  /** Heals since the kubelet last listed every healthy device: the backoff's step. */
  healsWithoutRecovery: number;
  /** When the last heal started; undefined before the first. */
  lastHealAtMs?: number | undefined;
}

export const INITIAL_CAPACITY_STATE: CapacityState = { healsWithoutRecovery: 0 };

export type CapacityAction =
  | { kind: "none" }
  /** Register again: the kubelet listed `kubelet` of the plugin's `plugin` healthy devices for `shortForMs`. */
  | { kind: "reregister"; kubelet: number; plugin: number; shortForMs: number; message: string }
  /** The kubelet lists every healthy device again, `afterMs` after the last heal started. */
  | { kind: "healed"; afterMs: number };

/** The wait before the `heals + 1`-th heal in a row: `boundMs`, doubling with each heal that did not help. */
export function healWaitMs(boundMs: number, heals: number): number {
  return Math.min(boundMs * 2 ** Math.min(heals, 30), Math.max(CAPACITY_HEAL_MAX_MS, boundMs));
}

/** How many of the plugin's healthy ids the kubelet lists. */
function listedOf(plugin: ReadonlySet<string>, kubelet: ReadonlySet<string>): number {
  let n = 0;
  for (const id of plugin) if (kubelet.has(id)) n++;
  return n;
}

function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10} s`;
}

/**
 * The next state and what to do after one reading. Not judged: a reading the kubelet did not answer, and
 * one while the plugin is not registered or stands by (its own paths register it then; a Replace's new
 * instance must not take the resource early). Short: some healthy id of the plugin is missing from the
 * kubelet's list; once short for `healWait` (`boundMs`, doubled per heal that did not help, up to 5 min)
 * the plugin registers again and the clock restarts. A heal is over when the kubelet lists them all.
 */
export function judgeCapacity(
  state: CapacityState,
  obs: CapacityObservation,
  boundMs: number,
): { state: CapacityState; action: CapacityAction } {
  const none = { kind: "none" } as const;
  if (obs.kubeletAllocatable === undefined) return { state, action: none };
  if (!obs.registered || obs.standingBy) {
    return { state: { ...state, shortSinceMs: undefined }, action: none };
  }
  const listed = listedOf(obs.pluginHealthy, obs.kubeletAllocatable);
  if (listed >= obs.pluginHealthy.size) {
    const healing = state.lastHealAtMs !== undefined && state.healsWithoutRecovery > 0;
    const next: CapacityState = { healsWithoutRecovery: 0, lastHealAtMs: state.lastHealAtMs };
    return {
      state: next,
      action: healing ? { kind: "healed", afterMs: obs.atMs - state.lastHealAtMs! } : none,
    };
  }
  const since = state.shortSinceMs ?? obs.atMs;
  const shortForMs = obs.atMs - since;
  if (shortForMs < healWaitMs(boundMs, state.healsWithoutRecovery)) {
    return { state: { ...state, shortSinceMs: since }, action: none };
  }
  return {
    state: {
      shortSinceMs: obs.atMs,
      healsWithoutRecovery: state.healsWithoutRecovery + 1,
      lastHealAtMs: obs.atMs,
    },
    action: {
      kind: "reregister",
      kubelet: listed,
      plugin: obs.pluginHealthy.size,
      shortForMs,
      message: `kubelet advertised ${listed} of ${obs.pluginHealthy.size} healthy devices for ${seconds(shortForMs)}; registered again`,
    },
  };
}
