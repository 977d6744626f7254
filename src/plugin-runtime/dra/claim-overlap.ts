// Tells a prepare whether an unprepare of the same claim began after it did, so its late write is dropped.
//
// A prepare reads its claims from the API before it takes the plugin's file chain, so an unprepare of
// one of them can run in between, find no spec to remove, and answer success; the prepare's write that
// follows would leave a spec no later unprepare is sent for. Calls are ordered by a counter, not a
// clock, and only claims with a prepare in flight are remembered, so the maps stay as small as that.
export class ClaimOverlap {
  private sequence = 0;
  /** Prepares in flight per claim uid. */
  private readonly preparing = new Map<string, number>();
  /** Per claim uid with a prepare in flight, the sequence number of the last unprepare that began. */
  private readonly unpreparedAt = new Map<string, number>();

  /** A prepare of these uids begins; pass the returned token to unpreparedSince and to prepareEnded. */
  prepareBegan(uids: readonly string[]): number {
    for (const uid of uids) this.preparing.set(uid, (this.preparing.get(uid) ?? 0) + 1);
    return ++this.sequence;
  }

  /** An unprepare of these uids begins (before it waits for any file). */
  unprepareBegan(uids: readonly string[]): void {
    const at = ++this.sequence;
    for (const uid of uids) {
      if (this.preparing.has(uid)) this.unpreparedAt.set(uid, at);
    }
  }

  /** Whether an unprepare of `uid` began after the prepare that got `token`. */
  unpreparedSince(uid: string, token: number): boolean {
    return (this.unpreparedAt.get(uid) ?? 0) > token;
  }

  /** The prepare that began with these uids is done, written or not. */
  prepareEnded(uids: readonly string[]): void {
    for (const uid of uids) {
      const left = (this.preparing.get(uid) ?? 1) - 1;
      if (left > 0) {
        this.preparing.set(uid, left);
      } else {
        this.preparing.delete(uid);
        this.unpreparedAt.delete(uid);
      }
    }
  }

  /** Claims remembered, for tests: zero once no prepare is in flight. */
  get size(): number {
    return this.preparing.size + this.unpreparedAt.size;
  }
}
