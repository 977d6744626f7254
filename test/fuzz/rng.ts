// The fuzzers' seeded randomness: everything random in a run comes from one seed, so a run replays.

/** mulberry32: tiny, fast and good enough to spread inputs; the point is replayability, not quality. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export class Rng {
  constructor(readonly next: () => number) {}
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)]!;
  }
  bytes(n: number): Buffer {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = this.int(256);
    return b;
  }
  string(max: number): string {
    // Mostly printable, sometimes lone surrogates and NULs: ids come from the wire, not from us.
    const n = this.int(max + 1);
    let s = "";
    for (let i = 0; i < n; i++) {
      const r = this.next();
      s += String.fromCharCode(r < 0.8 ? 0x20 + this.int(95) : r < 0.9 ? 0 : 0xd800 + this.int(0x800));
    }
    return s;
  }
}
