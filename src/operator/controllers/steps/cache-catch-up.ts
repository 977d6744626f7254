// How long a config's pass waits for a cache that has not yet shown the pass's own writes: a capped
// exponential backoff over the passes in a row that found it behind, from the start again once it caught up.
import { backoffDelayMs, type ExponentialBackoff } from "../../../kube/index.js";
import type { StepDeps } from "../reconciler-deps.js";

/**
 * 100 ms after the first pass that finds the cache behind (a watch that is up brings a write within
 * milliseconds), doubling up to 5 s, the informer's longest wait before it watches again. While a watch is
 * down every pass finds the cache behind, and each pass plans the rollout over every node: without the
 * backoff each config would do that ten times a second until the watch is back.
 */
export const CACHE_CATCH_UP_BACKOFF: ExponentialBackoff = { baseMs: 100, maxMs: 5_000 };

/** One config's lag as its passes saw it. */
export interface CatchUpState {
  /** Passes in a row that found the cache behind this config's own writes. */
  passesBehind: number;
}

/**
 * The pure decision of one pass: behind, it waits one backoff step longer than the pass before; caught up
 * (the watch is back and the cache shows the writes), it does not wait, and the next lag starts again
 * from CACHE_CATCH_UP_BACKOFF.baseMs.
 */
export function decideCatchUp(
  state: CatchUpState,
  behind: boolean,
): { state: CatchUpState; retryMs?: number } {
  if (!behind) return { state: { passesBehind: 0 } };
  const passesBehind = state.passesBehind + 1;
  return { state: { passesBehind }, retryMs: backoffDelayMs(CACHE_CATCH_UP_BACKOFF, passesBehind) };
}

/** Each config's CatchUpState, per operator (keyed by its Node informer, as the write expectations are). */
export class CatchUpWaits {
  private readonly byInformer = new WeakMap<object, Map<string, CatchUpState>>();

  /** Whether this pass found the cache behind; the wait before the next pass, if it must wait. */
  next(deps: StepDeps, config: string, behind: boolean): number | undefined {
    let perConfig = this.byInformer.get(deps.nodes);
    if (perConfig === undefined) {
      perConfig = new Map();
      this.byInformer.set(deps.nodes, perConfig);
    }
    const { state, retryMs } = decideCatchUp(perConfig.get(config) ?? { passesBehind: 0 }, behind);
    // A config that caught up keeps no entry, so deleted configs leave nothing behind.
    if (state.passesBehind === 0) perConfig.delete(config);
    else perConfig.set(config, state);
    return retryMs;
  }
}
