// The generator's random choices, biased towards the bounds and short lengths where schemas go wrong.
import { Rng } from "../rng.js";

export class FuzzRng extends Rng {
  chance(p: number): boolean {
    return this.next() < p;
  }
  /** An integer in [lo, hi], a bound itself about one time in four. */
  intIn(lo: number, hi: number): number {
    if (hi <= lo) return lo;
    if (this.chance(0.25)) return this.pick([lo, hi, Math.min(lo + 1, hi), Math.max(hi - 1, lo)]);
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  /** A length in [min, max]: short most of the time, `max` itself one time in twenty. */
  length(min: number, max: number): number {
    const r = this.next();
    if (r < 0.05) return max;
    if (r < 0.15) return this.intIn(min, max);
    return this.intIn(min, Math.min(max, min + 12));
  }
}
