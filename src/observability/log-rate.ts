// A cap on how many lines one kind of log line may write per window, for lines whose rate a caller outside the
// cluster's control decides (a webhook's refusals): past the cap, lines are counted instead of written, and the
// next line let through says how many were dropped.

export interface LogRateDecision {
  /** Whether to write this line. */
  write: boolean;
  /** Lines dropped since the last line written: put it in this line, so the log says what it left out. */
  suppressed: number;
}

export interface LogRateLimiterOptions {
  /** Lines written per window at most. */
  linesPerWindow: number;
  windowMs: number;
  /** Milliseconds from any origin that never jump back (performance.now in production). */
  now?: () => number;
}

export class LogRateLimiter {
  private windowStart = Number.NEGATIVE_INFINITY;
  private written = 0;
  private dropped = 0;
  private readonly now: () => number;

  constructor(private readonly opts: LogRateLimiterOptions) {
    if (!(opts.linesPerWindow >= 1) || !(opts.windowMs > 0))
      throw new Error(`LogRateLimiter: linesPerWindow must be >= 1 and windowMs > 0`);
    this.now = opts.now ?? (() => performance.now());
  }

  /** Call once per line that would be written; write it only when `write` is true. */
  take(): LogRateDecision {
    const now = this.now();
    if (now - this.windowStart >= this.opts.windowMs) {
      this.windowStart = now;
      this.written = 0;
    }
    if (this.written >= this.opts.linesPerWindow) {
      this.dropped++;
      return { write: false, suppressed: this.dropped };
    }
    this.written++;
    const suppressed = this.dropped;
    this.dropped = 0;
    return { write: true, suppressed };
  }
}
