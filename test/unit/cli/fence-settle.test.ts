// `dpo operator --fence-settle`: seconds (fractions allowed) to milliseconds, 0 for none, and a clear error
// naming the flag for anything else.
import { describe, expect, it } from "vitest";
import { fenceSettleMs, OPERATOR_FLAGS } from "../../../src/cli/operator.js";
import { FENCE_SETTLE_MS } from "../../../src/operator/upgrade/rollout.js";

describe("--fence-settle", () => {
  it.each([
    ["5", 5_000],
    ["0", 0],
    ["0.25", 250],
    ["600", 600_000],
  ])("%s s → %d ms", (value, ms) => {
    expect(fenceSettleMs(value)).toBe(ms);
  });

  it.each(["-1", "601", "abc", "", " ", "Infinity", undefined])("refuses %j, naming the flag", (value) => {
    expect(() => fenceSettleMs(value)).toThrow(/^--fence-settle: must be a number of seconds from 0 to 600/);
  });

  it("defaults to the rollout's settle time", () => {
    const flag = OPERATOR_FLAGS.find((f) => f.name === "fence-settle");
    expect(flag?.env).toBe("DPO_FENCE_SETTLE");
    expect(fenceSettleMs(flag?.default)).toBe(FENCE_SETTLE_MS);
  });
});
