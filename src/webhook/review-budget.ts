// How many bytes of ConversionReviews the webhook holds at once: a review is read only once its declared size
// fits beside the ones being read and converted, so a burst of large reviews waits its turn (or is told to come
// back) instead of taking the operator's heap down.
import type { Clock } from "../kube/clock.js";

export interface ReviewBudgetOptions {
  /** Bytes of request bodies read or being converted at once; one review of the body limit always fits. */
  maxBytes: number;
  /** Reviews waiting for room at most; one more is refused at once. */
  maxWaiting: number;
  /** How long a review waits for room before it is refused. */
  maxWaitMs: number;
  clock: Pick<Clock, "setTimer">;
}

interface Waiter {
  bytes: number;
  grant: (release: (() => void) | undefined) => void;
  cancelTimer: () => void;
}

export class ReviewBudget {
  private inFlight = 0;
  private readonly waiting: Waiter[] = [];

  constructor(private readonly opts: ReviewBudgetOptions) {}

  /** Bytes held by reviews being read or converted now. */
  get bytesInFlight(): number {
    return this.inFlight;
  }

  get reviewsWaiting(): number {
    return this.waiting.length;
  }

  /**
   * Resolves with the function that gives the room back once the review is answered, or with undefined when
   * there was no room in time (or too many already wait): the caller refuses the review without reading it.
   */
  acquire(bytes: number): Promise<(() => void) | undefined> {
    // A review larger than the whole budget would never fit; the body limit refuses those first.
    const size = Math.min(Math.max(0, bytes), this.opts.maxBytes);
    if (this.waiting.length === 0 && this.fits(size)) return Promise.resolve(this.take(size));
    if (this.waiting.length >= this.opts.maxWaiting) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const waiter: Waiter = { bytes: size, grant: resolve, cancelTimer: () => {} };
      waiter.cancelTimer = this.opts.clock.setTimer(() => {
        const at = this.waiting.indexOf(waiter);
        if (at < 0) return;
        this.waiting.splice(at, 1);
        resolve(undefined);
        // The one that timed out may have been what held smaller ones behind it.
        this.pump();
      }, this.opts.maxWaitMs);
      this.waiting.push(waiter);
    });
  }

  private fits(bytes: number): boolean {
    // An empty budget always admits one review, so a review of exactly the body limit is never starved.
    return this.inFlight === 0 || this.inFlight + bytes <= this.opts.maxBytes;
  }

  private take(bytes: number): () => void {
    this.inFlight += bytes;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inFlight -= bytes;
      this.pump();
    };
  }

  /** Admits waiting reviews in arrival order while the first of them fits. */
  private pump(): void {
    while (this.waiting.length > 0 && this.fits(this.waiting[0]!.bytes)) {
      const waiter = this.waiting.shift()!;
      waiter.cancelTimer();
      waiter.grant(this.take(waiter.bytes));
    }
  }
}
