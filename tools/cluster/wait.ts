// Polls a condition until it holds or a deadline passes, reporting what was last seen on timeout.
import { setTimeout as delay } from "node:timers/promises";
import { performance } from "node:perf_hooks";
import { inspect } from "node:util";

export interface WaitOptions {
  timeoutMs?: number;
  intervalMs?: number;
}

/** Not-yet values: the probe returns one of these while the condition does not hold. */
type Pending = undefined | null | false;

/**
 * `probe` returns the awaited value once the condition holds and a falsy value (or throws) before.
 * It may call `observe` with a compact picture of the current state; that picture, or else the last
 * returned value or error, is what the timeout error shows.
 */
export async function waitFor<T>(
  description: string,
  probe: (observe: (seen: unknown) => void) => Promise<T | Pending> | T | Pending,
  options: WaitOptions = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const intervalMs = options.intervalMs ?? 250;
  // On the monotonic clock: a deadline the timer says has passed has passed (Date.now() can lag a timer).
  const deadline = performance.now() + timeoutMs;
  let lastSeen: unknown = "nothing yet";
  for (;;) {
    let observed = false;
    let cutOff = false;
    const observe = (seen: unknown): void => {
      observed = true;
      lastSeen = seen;
    };
    try {
      const value = await withDeadline(Promise.resolve(probe(observe)), deadline);
      if (value !== undefined && value !== null && value !== false) return value;
      if (!observed) lastSeen = value;
    } catch (error) {
      // A probe cut off by the deadline saw nothing new: keep what the previous one saw, and say so.
      if (error instanceof ProbeDeadline) {
        cutOff = true;
        if (!observed)
          lastSeen = `${describe(lastSeen)} (and the probe after it was still running at the deadline)`;
      } else if (!observed) {
        lastSeen = error;
      }
    }
    const remaining = deadline - performance.now();
    // A probe cut off by the deadline ends the wait, whatever a clock read a moment later says: another probe
    // would start after the deadline.
    if (cutOff || remaining <= 0) {
      throw new Error(
        `timed out after ${(timeoutMs / 1000).toFixed(1)}s waiting for ${description}; last seen: ${describe(lastSeen)}`,
      );
    }
    await delay(Math.min(intervalMs, remaining));
  }
}

class ProbeDeadline extends Error {}

/** A probe that hangs must not stretch the wait past its deadline. */
async function withDeadline<T>(work: Promise<T>, deadline: number): Promise<T> {
  const remaining = Math.max(deadline - performance.now(), 1);
  const abort = new AbortController();
  const expired = delay(remaining, undefined, { signal: abort.signal }).then(() => {
    throw new ProbeDeadline("probe still running at the deadline");
  });
  try {
    return await Promise.race([work, expired]);
  } finally {
    abort.abort();
    expired.catch(() => undefined);
  }
}

function describe(seen: unknown): string {
  if (seen instanceof Error) return `${seen.name}: ${seen.message}`;
  if (typeof seen === "string") return seen;
  return inspect(seen, { depth: 6, breakLength: Infinity, maxArrayLength: 50 });
}
