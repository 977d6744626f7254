// Time source for the controller machinery: the system clock in production, a manual clock in unit tests.

/** Milliseconds since the epoch and one-shot timers; everything in src/kube reads time only through this. */
export interface Clock {
  now(): number;
  /** Calls `callback` once after `delayMs`; the returned function cancels it. */
  setTimer(callback: () => void, delayMs: number): () => void;
}

/**
 * A Clock that also reads a monotonic time: milliseconds from an arbitrary origin that never jump, whatever
 * happens to the wall clock (NTP steps, an administrator's date). Durations that guard safety, such as
 * how long a lease renewal stays valid, are measured on it; `now()` stays for times written to objects.
 */
export interface MonotonicClock extends Clock {
  monotonicNow(): number;
}

export const systemClock: MonotonicClock = {
  now: () => Date.now(),
  monotonicNow: () => performance.now(),
  setTimer(callback, delayMs) {
    const timer = setTimeout(callback, Math.max(0, delayMs));
    return () => clearTimeout(timer);
  },
};

/**
 * Resolves after `delayMs`, or as soon as `signal` aborts. It never rejects, so loops can sleep
 * without a try/catch and check `signal.aborted` afterwards.
 */
export function sleep(clock: Clock, delayMs: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const onAbort = (): void => {
      cancel();
      resolve();
    };
    const cancel = clock.setTimer(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, delayMs);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Settles like `promise`, or resolves to `onTimeout` when `timeoutMs` passes first. */
export async function withTimeout<T, U>(
  clock: Clock,
  promise: Promise<T>,
  timeoutMs: number,
  onTimeout: U,
): Promise<T | U> {
  let cancel: () => void = () => undefined;
  const timeout = new Promise<U>((resolve) => {
    cancel = clock.setTimer(() => resolve(onTimeout), timeoutMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    cancel();
  }
}

interface ManualTimer {
  at: number;
  seq: number;
  callback: () => void;
}

/**
 * A clock that moves only when a test calls `advance`. Timers fire in due order, and after each one
 * the pending promise continuations run, so async code driven by timers behaves as it would in real
 * time without a test ever sleeping.
 */
export class ManualClock implements MonotonicClock {
  private current: number;
  /** Wall time minus monotonic time: moved by jumpWallClock, never by advance. */
  private wallOffset = 0;
  private timers: ManualTimer[] = [];
  private seq = 0;

  constructor(startMs = 1_700_000_000_000) {
    this.current = startMs;
  }

  now(): number {
    return this.current + this.wallOffset;
  }

  /** Starts where now() started, and moves only with advance(). */
  monotonicNow(): number {
    return this.current;
  }

  /** Steps the wall clock (now()) by `deltaMs`, back when negative; timers and monotonicNow() are unmoved. */
  jumpWallClock(deltaMs: number): void {
    this.wallOffset += deltaMs;
  }

  setTimer(callback: () => void, delayMs: number): () => void {
    const timer: ManualTimer = { at: this.current + Math.max(0, delayMs), seq: this.seq++, callback };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }

  pendingTimers(): number {
    return this.timers.length;
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way (including new ones). */
  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    await flushPromises();
    for (;;) {
      const next = this.timers.filter((t) => t.at <= target).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (next === undefined) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.current = Math.max(this.current, next.at);
      next.callback();
      await flushPromises();
    }
    this.current = target;
    await flushPromises();
  }
}

/** Lets every queued promise continuation run: the microtask queue drains before the next macrotask. */
export function flushPromises(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
