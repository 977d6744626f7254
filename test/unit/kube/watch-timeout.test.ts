// Informer watches outlive the API server's bookmark interval instead of client-node 2's 30 s default, and
// a watch the server sends no bookmarks is left to its own deadline.
import { KubeConfig, Watch } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import {
  longLivedWatch,
  WATCH_DEADLINE_GRACE_MS,
  WATCH_INACTIVITY_TIMEOUT_MS,
  watchSilenceLimitMs,
} from "../../../src/kube/watch.js";

const inactivityTimeoutOf = (watch: Watch): unknown =>
  (watch as unknown as { requestTimeoutMs?: unknown }).requestTimeoutMs;

describe("longLivedWatch", () => {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server: "https://127.0.0.1:6443", skipTLSVerify: false }],
    users: [{ name: "u", token: "t" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });

  it("waits longer than the API server's one-minute bookmark interval before calling a watch dead", () => {
    expect(WATCH_INACTIVITY_TIMEOUT_MS).toBeGreaterThan(60_000);
    expect(inactivityTimeoutOf(longLivedWatch(kc))).toBe(WATCH_INACTIVITY_TIMEOUT_MS);
  });

  it("finds the client's own timeout where it sets it, shorter than a bookmark interval", () => {
    // If client-node renames the field, longLivedWatch throws at start-up; this pins what it replaces.
    expect(inactivityTimeoutOf(new Watch(kc))).toBe(30_000);
  });
});

describe("watchSilenceLimitMs", () => {
  it.each([
    // [timeoutSeconds, a bookmark seen, limit]
    [300, false, 300_000 + WATCH_DEADLINE_GRACE_MS],
    [599, false, 599_000 + WATCH_DEADLINE_GRACE_MS],
    [300, true, WATCH_INACTIVITY_TIMEOUT_MS],
    [undefined, false, WATCH_INACTIVITY_TIMEOUT_MS],
    [0, false, WATCH_INACTIVITY_TIMEOUT_MS],
    [Number.NaN, false, WATCH_INACTIVITY_TIMEOUT_MS],
  ] as const)("timeoutSeconds %s, bookmark seen %s: %i ms", (timeoutSeconds, heartbeating, want) => {
    expect(watchSilenceLimitMs(timeoutSeconds, heartbeating)).toBe(want);
  });

  it("never cuts a watch without bookmarks before the server's own deadline", () => {
    for (const seconds of [1, 60, 300, 600]) {
      expect(watchSilenceLimitMs(seconds, false)).toBeGreaterThan(seconds * 1_000);
    }
  });
});
