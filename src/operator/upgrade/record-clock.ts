// Ages of a node's upgrade record on this operator's own monotonic clock, so a deadline or a fence's
// settle time never compares a time one machine's wall clock wrote with another's (or with its own
// after a step).
//
// The record keeps its wall-clock stamps (startedAt, fencedAt): people read them, and an older operator
// judges them as before. This operator reads a stamp only as a name for the event: it notes, on its
// monotonic clock, when it first saw that stamp in that node's record, and measures the age from there.
// The stamp is what is persisted: a new leader (or this one after a restart) has seen none of them, so
// it starts its own measurement at the first record it reads instead of trusting the clock that wrote
// it. The cost is on the safe side: after a failover a node gets up to one more deadline, and a fence
// settles once more, never less. Nothing here decides; the planner stays a pure function of the times
// it is given.

/** A record's time the planner measures from. */
export type RecordTimeField = "startedAt" | "fencedAt";

/** One pass's view of the clock: the planner's `now`, and the time each record stamp was first seen. */
export interface RecordTimes {
  /** Now, in ms on this operator's monotonic clock. */
  readonly now: number;
  /** When this operator first saw `stamp` as the `field` of the node's record of the upgrade to `to`. */
  seen(node: string, to: string, field: RecordTimeField, stamp: number): number;
}

/** The monotonic clock of this process, in ms (performance.now: not moved by any setting of the time). */
function processMonotonicMs(): number {
  return performance.now();
}

/**
 * When this operator first saw each record stamp, per config, node and field. An entry is replaced when
 * the stamp or the upgrade changes, so there is one per config, node and field however many rollouts ran.
 */
export class RecordClock {
  /** Per config, per `node` and field: the upgrade, the stamp and when it was first seen. */
  private readonly firstSeen = new Map<string, Map<string, { to: string; stamp: number; at: number }>>();

  constructor(private readonly monotonicMs: () => number = processMonotonicMs) {}

  /** The times of one rollout pass of `config`: one reading of the clock for the whole pass. */
  forPass(config: string): RecordTimes {
    const now = this.monotonicMs();
    return {
      now,
      seen: (node, to, field, stamp) => {
        let entries = this.firstSeen.get(config);
        if (entries === undefined) {
          entries = new Map<string, { to: string; stamp: number; at: number }>();
          this.firstSeen.set(config, entries);
        }
        const key = `${field} ${node}`;
        const entry = entries.get(key);
        if (entry !== undefined && entry.to === to && entry.stamp === stamp) return entry.at;
        entries.set(key, { to, stamp, at: now });
        return now;
      },
    };
  }

  /** Drops what was seen of a config that is gone: no pass of it will come to replace its entries. */
  forget(config: string): void {
    this.firstSeen.delete(config);
  }

  /** Entries held, for tests. */
  get size(): number {
    let size = 0;
    for (const entries of this.firstSeen.values()) size += entries.size;
    return size;
  }
}
