// The one exponential backoff, with the bounds each of its callers uses: work queue, informer, storage
// migration and node-report writer.
import { describe, expect, it } from "vitest";
import { backoffDelayMs, type ExponentialBackoff } from "../../../src/kube/backoff.js";

describe("backoffDelayMs", () => {
  const backoff: ExponentialBackoff = { baseMs: 200, maxMs: 5_000 };
  it.each([
    { failures: 1, retryAfterMs: undefined, delay: 200 },
    { failures: 2, retryAfterMs: undefined, delay: 400 },
    { failures: 4, retryAfterMs: undefined, delay: 1_600 },
    { failures: 5, retryAfterMs: undefined, delay: 3_200 },
    { failures: 6, retryAfterMs: undefined, delay: 5_000 },
    { failures: 10_000, retryAfterMs: undefined, delay: 5_000 },
    // A count of none is treated as the first failure.
    { failures: 0, retryAfterMs: undefined, delay: 200 },
    // Retry-After lengthens the delay up to the ceiling, and never shortens it.
    { failures: 1, retryAfterMs: 2_000, delay: 2_000 },
    { failures: 4, retryAfterMs: 1_000, delay: 1_600 },
    { failures: 1, retryAfterMs: 3_600_000, delay: 5_000 },
    { failures: 3, retryAfterMs: 0, delay: 800 },
  ])("failure $failures, Retry-After $retryAfterMs ms → $delay ms", ({ failures, retryAfterMs, delay }) => {
    expect(backoffDelayMs(backoff, failures, retryAfterMs)).toBe(delay);
  });

  it.each([
    {
      name: "a zero base after many failures",
      backoff: { baseMs: 0, maxMs: 1_000 },
      failures: 5_000,
      delay: 0,
    },
    {
      name: "a ceiling beyond 2^30 base delays",
      backoff: { baseMs: 1, maxMs: Number.MAX_VALUE },
      failures: 41,
      delay: 2 ** 40,
    },
    {
      name: "more doublings than a double holds",
      backoff: { baseMs: 1, maxMs: 60_000 },
      failures: 2_000,
      delay: 60_000,
    },
  ])("stays a finite number with $name", ({ backoff: bounds, failures, delay }) => {
    expect(backoffDelayMs(bounds, failures)).toBe(delay);
  });

  // The bounds each caller uses by default: the sequences they wait through while an API server is away.
  it.each([
    {
      caller: "work queue (per key)",
      backoff: { baseMs: 5, maxMs: 5 * 60_000 },
      delays: [5, 10, 20, 40, 80, 160, 320, 640, 1_280, 2_560],
      last: { failures: 17, delay: 300_000 },
    },
    {
      caller: "informer (list and watch)",
      backoff: { baseMs: 500, maxMs: 5_000 },
      delays: [500, 1_000, 2_000, 4_000, 5_000, 5_000, 5_000, 5_000, 5_000, 5_000],
      last: { failures: 100, delay: 5_000 },
    },
    {
      caller: "storage migration (per request)",
      backoff: { baseMs: 200, maxMs: 10_000 },
      delays: [200, 400, 800, 1_600, 3_200, 6_400, 10_000, 10_000, 10_000, 10_000],
      last: { failures: 100, delay: 10_000 },
    },
    {
      caller: "node-report writer",
      backoff: { baseMs: 500, maxMs: 8_000 },
      delays: [500, 1_000, 2_000, 4_000, 8_000, 8_000, 8_000, 8_000, 8_000, 8_000],
      last: { failures: 100, delay: 8_000 },
    },
  ])("$caller", ({ backoff: bounds, delays, last }) => {
    expect(delays.map((_, i) => backoffDelayMs(bounds, i + 1))).toEqual(delays);
    expect(backoffDelayMs(bounds, last.failures)).toBe(last.delay);
  });
});
