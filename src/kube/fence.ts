// Leadership as a fence for writes: whether this replica may write now, judged on a monotonic clock from
// its last successful lease renewal, and the signal that cancels its in-flight requests once it may not.
import type { MonotonicClock } from "./clock.js";

/**
 * Why a write was refused: not leading at all, or leading but the last successful renewal is older than
 * the renew deadline, so another replica may soon (never sooner than one lease duration after that
 * renewal) take the lease.
 */
export type FenceClosedReason = "not-leading" | "renew-deadline-passed";

export type FenceState = { open: true; remainingMs: number } | { open: false; reason: FenceClosedReason };

export interface FenceInput {
  /**
   * Monotonic time at which the last successful acquire or renewal of the lease was sent (before the
   * request left, so earlier than the server stored it and than any peer saw it); undefined when not leading.
   */
  renewedAt: number | undefined;
  /** Monotonic time now. */
  now: number;
  renewDeadlineMs: number;
}

/**
 * Whether writes are allowed: only while `now < renewedAt + renewDeadline`. A peer takes the lease no
 * sooner than leaseDuration after it saw that renewal stored, on its own clock, and renewDeadline <
 * leaseDuration, so the fence closes strictly before anyone else can lead. Pure.
 */
export function decideFence(input: FenceInput): FenceState {
  const { renewedAt, now, renewDeadlineMs } = input;
  if (renewedAt === undefined) return { open: false, reason: "not-leading" };
  // A monotonic clock never runs back; if a caller's did, trust no more than one full deadline.
  const remainingMs = Math.min(renewDeadlineMs, renewedAt + renewDeadlineMs - now);
  if (remainingMs > 0) return { open: true, remainingMs };
  return { open: false, reason: "renew-deadline-passed" };
}

const REASON_TEXT: Record<FenceClosedReason, string> = {
  "not-leading": "this replica does not hold the lease",
  "renew-deadline-passed": "this replica's last lease renewal is older than the renew deadline",
};

/** A write refused (or cancelled in flight) because this replica may not write now. Retrying will not help. */
export class NotLeaderError extends Error {
  constructor(
    /** The refused request, e.g. "PATCH /apis/apps/v1/namespaces/dpo-system/daemonsets/x". */
    readonly operation: string,
    readonly reason: FenceClosedReason,
  ) {
    super(`${operation}: refused: ${REASON_TEXT[reason]}`);
    this.name = "NotLeaderError";
  }
}

/** What every write path consults immediately before it sends. */
export interface WriteFence {
  /** Throws NotLeaderError unless this replica may write now. */
  check(operation: string): void;
  /** Aborts when the fence closes, cancelling the requests sent while it was open. */
  readonly signal: AbortSignal;
}

/** The fence of a replica that writes without leader election: always open. */
export const UNFENCED: WriteFence = {
  check: () => undefined,
  signal: new AbortController().signal,
};

/**
 * The fence a LeaderElector keeps: opened by an acquisition, moved forward by each successful renewal,
 * closed at `renewedAt + renewDeadline` by a timer on the monotonic clock (and judged again on that clock
 * by every check, so a late timer never lets a write through). A closed term stays closed: leading again
 * takes a new acquisition.
 */
export class LeaseFence implements WriteFence {
  private renewedAt: number | undefined;
  /** Why the fence is closed while renewedAt is undefined: the first reason of the term that ended. */
  private closedReason: FenceClosedReason = "not-leading";
  private term = new AbortController();
  private cancelTimer: () => void = () => undefined;

  constructor(
    private readonly clock: MonotonicClock,
    private readonly renewDeadlineMs: number,
    /** Called once per term when the fence closes by itself (the renew deadline passed). */
    private readonly onExpired: () => void = () => undefined,
  ) {}

  state(): FenceState {
    if (this.renewedAt === undefined) return { open: false, reason: this.closedReason };
    return decideFence({
      renewedAt: this.renewedAt,
      now: this.clock.monotonicNow(),
      renewDeadlineMs: this.renewDeadlineMs,
    });
  }

  check(operation: string): void {
    const state = this.state();
    if (!state.open) throw new NotLeaderError(operation, state.reason);
  }

  get signal(): AbortSignal {
    return this.term.signal;
  }

  /** A new term: the acquisition that won the lease was sent at `sentAt` (monotonic). */
  open(sentAt: number): void {
    this.close("not-leading");
    this.term = new AbortController();
    this.renewedAt = sentAt;
    this.arm();
  }

  /** A renewal sent at `sentAt` succeeded; false when the term had already closed (it stays closed). */
  renewed(sentAt: number): boolean {
    if (this.renewedAt === undefined || this.term.signal.aborted) return false;
    if (!this.state().open) {
      this.expire();
      return false;
    }
    this.renewedAt = Math.max(this.renewedAt, sentAt);
    this.arm();
    return true;
  }

  /** Ends the term now: later checks refuse, and requests in flight are aborted. */
  close(reason: FenceClosedReason): void {
    this.cancelTimer();
    this.renewedAt = undefined;
    if (this.term.signal.aborted) return;
    this.closedReason = reason;
    this.term.abort(new NotLeaderError("request in flight", reason));
  }

  private arm(): void {
    this.cancelTimer();
    const state = this.state();
    if (!state.open) {
      this.expire();
      return;
    }
    this.cancelTimer = this.clock.setTimer(() => {
      // A timer may fire a little early against the monotonic clock: judge again, re-arm if still open.
      if (this.state().open) this.arm();
      else this.expire();
    }, state.remainingMs);
  }

  private expire(): void {
    if (this.term.signal.aborted) return;
    this.close("renew-deadline-passed");
    this.onExpired();
  }
}
