// The DRA health stream's pure decisions: since when each device holds its status (kept while unchanged),
// and the complete response the kubelet gets (sorted, HEALTHY/UNHEALTHY, the reason as message, bounded).
import { describe, expect, it } from "vitest";
import {
  healthResponse,
  MAX_HEALTH_MESSAGE_LENGTH,
  trackHealth,
  type HealthSourceDevice,
  type TrackedHealth,
} from "../../../../src/plugin-runtime/dra/health-stream.js";
import { draHealthV1 } from "../../../../src/plugin-runtime/proto/index.js";

const ok = (name: string): HealthSourceDevice => ({ name, health: "Healthy", reason: "" });
const bad = (name: string, reason = "ECC"): HealthSourceDevice => ({ name, health: "Unhealthy", reason });
const since = (health: "Healthy" | "Unhealthy", sinceSeconds: number, reason = ""): TrackedHealth => ({
  health,
  reason,
  sinceSeconds,
});

describe("trackHealth", () => {
  it.each<{
    name: string;
    previous: [string, TrackedHealth][];
    devices: HealthSourceDevice[];
    want: [string, TrackedHealth][];
  }>([
    { name: "first sight: now", previous: [], devices: [ok("a")], want: [["a", since("Healthy", 200)]] },
    {
      name: "unchanged: the earlier time",
      previous: [["a", since("Healthy", 100)]],
      devices: [ok("a")],
      want: [["a", since("Healthy", 100)]],
    },
    {
      name: "flipped unhealthy: now",
      previous: [["a", since("Healthy", 100)]],
      devices: [bad("a")],
      want: [["a", since("Unhealthy", 200, "ECC")]],
    },
    {
      name: "a new reason: now",
      previous: [["a", since("Unhealthy", 100, "ECC")]],
      devices: [bad("a", "hot")],
      want: [["a", since("Unhealthy", 200, "hot")]],
    },
    {
      name: "a device gone is dropped; a repeated name counts once",
      previous: [
        ["a", since("Healthy", 100)],
        ["b", since("Healthy", 100)],
      ],
      devices: [ok("a"), bad("a")],
      want: [["a", since("Healthy", 100)]],
    },
  ])("$name", ({ previous, devices, want }) => {
    expect([...trackHealth(new Map(previous), devices, 200)]).toEqual(want);
  });
});

describe("healthResponse", () => {
  it("lists every device sorted by name, with pool, status, Unix seconds, the reason and the default timeout", () => {
    const tracked = new Map([
      ["b", since("Unhealthy", 150, "ECC")],
      ["a", since("Healthy", 100)],
    ]);
    expect(healthResponse("node-1", tracked)).toEqual({
      devices: [
        {
          device: { poolName: "node-1", deviceName: "a" },
          health: draHealthV1.HealthStatus.HEALTHY,
          lastUpdatedTime: 100,
          healthCheckTimeoutSeconds: 0,
          message: "",
        },
        {
          device: { poolName: "node-1", deviceName: "b" },
          health: draHealthV1.HealthStatus.UNHEALTHY,
          lastUpdatedTime: 150,
          healthCheckTimeoutSeconds: 0,
          message: "ECC",
        },
      ],
    });
  });

  it.each([
    { name: "no devices: an empty list (every device Unknown after the timeout)", tracked: [], count: 0 },
    { name: "one device", tracked: [["a", since("Healthy", 1)]] as [string, TrackedHealth][], count: 1 },
  ])("$name", ({ tracked, count }) => {
    expect(healthResponse("n", new Map(tracked)).devices).toHaveLength(count);
  });

  it("cuts a message to the kubelet's 1024 characters", () => {
    const long = "x".repeat(MAX_HEALTH_MESSAGE_LENGTH + 10);
    const [entry] = healthResponse("n", new Map([["a", since("Unhealthy", 1, long)]])).devices;
    expect(entry?.message).toHaveLength(MAX_HEALTH_MESSAGE_LENGTH);
  });
});
