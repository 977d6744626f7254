// Informer watches outlive the API server's bookmark interval instead of client-node 2's 30 s default.
import { KubeConfig, Watch } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { longLivedWatch, WATCH_INACTIVITY_TIMEOUT_MS } from "../../src/kube/informer.js";

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
