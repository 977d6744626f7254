// What the conversion webhook holds at once: the byte budget for reviews in flight, the capped warning log
// lines, and the bounded `to` label.
import { describe, expect, it } from "vitest";
import { ManualClock, flushPromises } from "../../../src/kube/clock.js";
import { LogRateLimiter } from "../../../src/observability/log-rate.js";
import { reviewVersionLabel } from "../../../src/webhook/index.js";
import { ReviewBudget } from "../../../src/webhook/review-budget.js";

function budget(clock = new ManualClock()): ReviewBudget {
  return new ReviewBudget({ maxBytes: 100, maxWaiting: 2, maxWaitMs: 1_000, clock });
}

describe("ReviewBudget", () => {
  it("admits reviews at once while their bytes fit, and gives the room back on release", async () => {
    const b = budget();
    const first = await b.acquire(60);
    const second = await b.acquire(40);
    expect(first).toBeTypeOf("function");
    expect(second).toBeTypeOf("function");
    expect(b.bytesInFlight).toBe(100);
    first!();
    first!(); // a second release gives nothing back twice
    expect(b.bytesInFlight).toBe(40);
  });

  it("holds a review that does not fit until room is given back, in arrival order", async () => {
    const b = budget();
    const held = await b.acquire(90);
    const order: string[] = [];
    const big = b.acquire(50).then((r) => (order.push("big"), r));
    const small = b.acquire(5).then((r) => (order.push("small"), r));
    await flushPromises();
    // The small one would fit, but it arrived after the big one: no overtaking, so large reviews are not starved.
    expect(order).toEqual([]);
    expect(b.reviewsWaiting).toBe(2);
    held!();
    await flushPromises();
    expect(order).toEqual(["big", "small"]);
    expect(b.bytesInFlight).toBe(55);
    (await big)!();
    (await small)!();
    expect(b.bytesInFlight).toBe(0);
  });

  it("refuses at once when too many wait, and after the longest wait", async () => {
    const clock = new ManualClock();
    const b = budget(clock);
    const held = await b.acquire(100);
    const waiting = [b.acquire(10), b.acquire(10)];
    expect(await b.acquire(10)).toBeUndefined();
    await clock.advance(999);
    expect(b.reviewsWaiting).toBe(2);
    await clock.advance(1);
    expect(await Promise.all(waiting)).toEqual([undefined, undefined]);
    expect(b.reviewsWaiting).toBe(0);
    held!();
    expect(b.bytesInFlight).toBe(0);
    expect(clock.pendingTimers()).toBe(0);
  });

  it("always admits one review when nothing is in flight, even one over the budget", async () => {
    const b = budget();
    const release = await b.acquire(10_000);
    expect(b.bytesInFlight).toBe(100);
    release!();
  });
});

describe("LogRateLimiter", () => {
  it("writes the first lines of a window, counts the rest, and names the count on the next line written", () => {
    let now = 0;
    const limiter = new LogRateLimiter({ linesPerWindow: 2, windowMs: 10_000, now: () => now });
    const decisions = Array.from({ length: 5 }, () => limiter.take());
    expect(decisions.map((d) => d.write)).toEqual([true, true, false, false, false]);
    now = 10_000;
    expect(limiter.take()).toEqual({ write: true, suppressed: 3 });
    expect(limiter.take()).toEqual({ write: true, suppressed: 0 });
    expect(limiter.take().write).toBe(false);
  });

  it("refuses a limit that would write nothing", () => {
    expect(() => new LogRateLimiter({ linesPerWindow: 0, windowMs: 1 })).toThrow(/linesPerWindow/);
  });
});

describe("reviewVersionLabel", () => {
  it.each([
    ["dpo.dev/v1beta1", "dpo.dev/v1beta1"],
    ["dpo.dev/v1alpha1", "dpo.dev/v1alpha1"],
    ["dpo.dev/v9", "other"],
    ["", "other"],
    [undefined, "other"],
  ])("labels %j as %j", (version, label) => {
    expect(reviewVersionLabel(version)).toBe(label);
  });
});
