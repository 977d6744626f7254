// How long a config's pass waits for a cache behind its own writes (a watch that is down): the pure
// decision over passes in a row, and the reconciler's requeues on its injected clock while the Node
// watch stays down and after it is back.
import { describe, expect, it } from "vitest";
import {
  CACHE_CATCH_UP_BACKOFF,
  decideCatchUp,
  type CatchUpState,
} from "../../../../../src/operator/controllers/steps/cache-catch-up.js";

describe("decideCatchUp", () => {
  /** Each pass's finding (behind or not) in turn, and the wait each one asks for. */
  function run(findings: boolean[]): (number | undefined)[] {
    let state: CatchUpState = { passesBehind: 0 };
    return findings.map((behind) => {
      const decided = decideCatchUp(state, behind);
      state = decided.state;
      return decided.retryMs;
    });
  }

  it.each<{ name: string; findings: boolean[]; waits: (number | undefined)[] }>([
    { name: "caught up: no wait", findings: [false, false], waits: [undefined, undefined] },
    { name: "one lag (the usual write): the base", findings: [true, false], waits: [100, undefined] },
    {
      name: "a watch that stays down: doubling to the cap, and held there",
      findings: Array<boolean>(10).fill(true),
      waits: [100, 200, 400, 800, 1_600, 3_200, 5_000, 5_000, 5_000, 5_000],
    },
    {
      name: "the watch back: the next lag starts from the base again",
      findings: [true, true, true, true, false, true, true],
      waits: [100, 200, 400, 800, undefined, 100, 200],
    },
  ])("$name", ({ findings, waits }) => {
    expect(run(findings)).toEqual(waits);
  });

  it("never waits past the cap however long the watch stays down", () => {
    const state: CatchUpState = { passesBehind: Number.MAX_SAFE_INTEGER - 1 };
    expect(decideCatchUp(state, true).retryMs).toBe(CACHE_CATCH_UP_BACKOFF.maxMs);
  });
});
