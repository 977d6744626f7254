// The publisher's decisions on device health where slices keep taints (KEP-5055): which devices each slice
// holds with taints on and off, that an unchanged tainted pool is not rewritten, that a taint goes on
// recovery and a device gone from the node leaves; and how the plugin finds out whether taints are kept
// (a dry run, and the answers to real writes).
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import {
  planSlices,
  resourceSliceName,
  type PoolDevice,
  type PoolInput,
  type ResourceSlice,
} from "../../../../src/plugin-runtime/dra/slices.js";
import {
  DeviceTaintProbe,
  taintProbeSlice,
  taintSupportFromWrite,
  type TaintSupport,
} from "../../../../src/plugin-runtime/dra/taint-support.js";
import { publishedDeviceChunks, UNHEALTHY_TAINT_KEY } from "../../../../src/plugin-runtime/dra/taints.js";
import type { ApiRequest } from "../../../../src/plugin-runtime/report/api-client.js";

const logger = pino({ level: process.env["DPO_TEST_LOG"] ?? "silent" });
const NOW = new Date("2026-11-27T10:00:00.123Z");
const LATER = new Date("2026-11-27T11:30:00Z");
const T0 = "2026-11-27T10:00:00Z";

const healthy = (name: string): PoolDevice => ({ name, health: "Healthy", attributes: {} });
const unhealthy = (name: string, reason = "ECC"): PoolDevice => ({
  name,
  health: "Unhealthy",
  reason,
  attributes: {},
});
const taint = (value: string, timeAdded = T0) => ({
  key: UNHEALTHY_TAINT_KEY,
  value,
  effect: "NoSchedule",
  timeAdded,
});

function pool(devices: readonly PoolDevice[]): PoolInput {
  return { driver: "d.example.com", node: "n", configName: "c", devices };
}

/** What the API server holds after the plan: the writes applied, each with a resourceVersion. */
function applied(existing: readonly ResourceSlice[], plan: ReturnType<typeof planSlices>): ResourceSlice[] {
  const byName = new Map(existing.map((s) => [s.metadata.name, s]));
  let rv = 10;
  for (const op of plan.ops) {
    if (op.op === "delete") byName.delete(op.name);
    else
      byName.set(op.slice.metadata.name, {
        ...op.slice,
        metadata: { ...op.slice.metadata, resourceVersion: String(++rv) },
      });
  }
  return [...byName.values()];
}

/** One pass of the publisher's decisions: chunks from health and taint support, then the plan. */
function pass(devices: readonly PoolDevice[], existing: readonly ResourceSlice[], kept: boolean, now: Date) {
  const plan = planSlices(pool(devices), existing, 0, publishedDeviceChunks(devices, existing, kept, now));
  return { plan, after: applied(existing, plan) };
}

const published = (slices: readonly ResourceSlice[]) => slices.flatMap((s) => s.spec.devices ?? []);

describe("publishedDeviceChunks", () => {
  it.each([
    {
      name: "taints kept: an unhealthy device stays, tainted with its reason",
      devices: [healthy("a"), unhealthy("b", "ECC error: 12")],
      kept: true,
      want: [{ name: "a" }, { name: "b", taints: [taint("ECC_error_12")] }],
    },
    {
      name: "taints dropped (1.35): the unhealthy device is left out",
      devices: [healthy("a"), unhealthy("b")],
      kept: false,
      want: [{ name: "a" }],
    },
    {
      name: "taints kept, no reason: the value says Unhealthy",
      devices: [unhealthy("a", "")],
      kept: true,
      want: [{ name: "a", taints: [taint("Unhealthy")] }],
    },
    {
      name: "taints kept, all healthy: no taints, the same as without",
      devices: [healthy("b"), healthy("a")],
      kept: true,
      want: [{ name: "a" }, { name: "b" }],
    },
    {
      name: "taints kept, every device unhealthy: all stay",
      devices: [unhealthy("a"), unhealthy("b", "hot")],
      kept: true,
      want: [
        { name: "a", taints: [taint("ECC")] },
        { name: "b", taints: [taint("hot")] },
      ],
    },
    {
      name: "taints dropped, every device unhealthy: one empty slice",
      devices: [unhealthy("a")],
      kept: false,
      want: [],
    },
  ])("$name", ({ devices, kept, want }) => {
    const chunks = publishedDeviceChunks(devices, [], kept, NOW);
    expect(chunks.flat()).toEqual(want);
    expect(chunks.length).toBe(1);
  });

  it("a time-sliced device stays shared while it is tainted, and after", () => {
    const shared = (d: ReturnType<typeof unhealthy>) => ({ ...d, allowMultipleAllocations: true });
    const tainted = publishedDeviceChunks([shared(unhealthy("a")), shared(healthy("b"))], [], true, NOW);
    expect(tainted.flat().map((d) => [d.name, d.allowMultipleAllocations, d.taints?.length ?? 0])).toEqual([
      ["a", true, 1],
      ["b", true, 0],
    ]);
    const leftOut = publishedDeviceChunks([shared(unhealthy("a")), shared(healthy("b"))], [], false, NOW);
    expect(leftOut.flat().map((d) => [d.name, d.allowMultipleAllocations])).toEqual([["b", true]]);
  });

  it("once a device is tainted, 64 devices a slice; untainted, 128", () => {
    const many = Array.from({ length: 100 }, (_, i) => healthy(`d${String(i).padStart(3, "0")}`));
    expect(publishedDeviceChunks(many, [], true, NOW).map((c) => c.length)).toEqual([100]);
    const oneBad = [...many.slice(1), unhealthy("d000")];
    expect(publishedDeviceChunks(oneBad, [], true, NOW).map((c) => c.length)).toEqual([64, 36]);
    expect(publishedDeviceChunks(oneBad, [], false, NOW).map((c) => c.length)).toEqual([99]);
  });
});

describe("the publisher's plan through a device's failure and recovery (taints kept)", () => {
  it("taints the device, keeps the pool unchanged while it stays unhealthy, and removes the taint on recovery", () => {
    const first = pass([healthy("a"), healthy("b")], [], true, NOW);
    expect(first.plan.ops.map((op) => op.op)).toEqual(["create"]);

    const failed = pass([healthy("a"), unhealthy("b", "ECC")], first.after, true, NOW);
    expect(failed.plan.generation).toBe(2);
    expect(published(failed.after)).toEqual([{ name: "a" }, { name: "b", taints: [taint("ECC")] }]);

    // Still unhealthy an hour and a half later: the same taint, the same timeAdded, nothing written.
    const still = pass([healthy("a"), unhealthy("b", "ECC")], failed.after, true, LATER);
    expect(still.plan.ops).toEqual([]);

    // A new reason keeps timeAdded (the device has been unhealthy since then) but rewrites the value.
    const other = pass([healthy("a"), unhealthy("b", "hot")], failed.after, true, LATER);
    expect(published(other.after)).toEqual([{ name: "a" }, { name: "b", taints: [taint("hot")] }]);

    const recovered = pass([healthy("a"), healthy("b")], other.after, true, LATER);
    expect(recovered.plan.ops.map((op) => op.op)).toEqual(["update"]);
    expect(published(recovered.after)).toEqual([{ name: "a" }, { name: "b" }]);

    // A device gone from the node leaves the slice, tainted or not.
    const gone = pass([healthy("a")], failed.after, true, LATER);
    expect(published(gone.after)).toEqual([{ name: "a" }]);
  });

  it("where taints are dropped the device leaves the slice and comes back on recovery, as before", () => {
    const first = pass([healthy("a"), healthy("b")], [], false, NOW);
    const failed = pass([healthy("a"), unhealthy("b")], first.after, false, NOW);
    expect(published(failed.after)).toEqual([{ name: "a" }]);
    const recovered = pass([healthy("a"), healthy("b")], failed.after, false, NOW);
    expect(published(recovered.after)).toEqual([{ name: "a" }, { name: "b" }]);
  });

  it("a slice whose taints the API server dropped is rewritten once taints are off: the device leaves", () => {
    const first = pass([healthy("a"), unhealthy("b")], [], true, NOW);
    // What a 1.35 API server stored of it: the device without its taint.
    const stored = first.after.map((s) => ({
      ...s,
      spec: { ...s.spec, devices: (s.spec.devices ?? []).map(({ name }) => ({ name })) },
    }));
    const fixed = pass([healthy("a"), unhealthy("b")], stored, false, NOW);
    expect(published(fixed.after)).toEqual([{ name: "a" }]);
  });
});

describe("taintSupportFromWrite", () => {
  const withDevices = (devices: ResourceSlice["spec"]["devices"]) => ({ spec: { devices } });
  it.each<{
    name: string;
    sent: ResourceSlice["spec"]["devices"];
    got: ResourceSlice["spec"]["devices"];
    want: TaintSupport | undefined;
  }>([
    { name: "no taint sent: nothing learned", sent: [{ name: "a" }], got: [{ name: "a" }], want: undefined },
    {
      name: "taint back, timeAdded filled in by the server",
      sent: [{ name: "a", taints: [{ key: UNHEALTHY_TAINT_KEY, value: "x", effect: "NoSchedule" }] }],
      got: [{ name: "a", taints: [taint("x")] }],
      want: "Kept",
    },
    {
      name: "taint gone (gate off)",
      sent: [{ name: "a", taints: [taint("x")] }],
      got: [{ name: "a" }],
      want: "Dropped",
    },
    {
      name: "taints field empty",
      sent: [{ name: "a", taints: [taint("x")] }],
      got: [{ name: "a", taints: [] }],
      want: "Dropped",
    },
    {
      name: "one of two tainted devices lost it",
      sent: [
        { name: "a", taints: [taint("x")] },
        { name: "b", taints: [taint("y")] },
      ],
      got: [{ name: "a", taints: [taint("x")] }, { name: "b" }],
      want: "Dropped",
    },
  ])("$name", ({ sent, got, want }) => {
    expect(taintSupportFromWrite(withDevices(sent), withDevices(got))).toBe(want);
  });
});

describe("DeviceTaintProbe", () => {
  /** An API that answers dry runs by `answer`: the slice echoed, its taints stripped, or an error. */
  function api(answer: "keep" | "drop" | "fail") {
    const requests: ApiRequest[] = [];
    return {
      requests,
      client: {
        request<T>(req: ApiRequest): Promise<T> {
          requests.push(req);
          if (answer === "fail") return Promise.reject(new Error("forbidden"));
          const body = req.body as ResourceSlice;
          const devices = (body.spec.devices ?? []).map((d) => (answer === "keep" ? d : { name: d.name }));
          return Promise.resolve({ ...body, spec: { ...body.spec, devices } } as T);
        },
      },
    };
  }

  it.each([
    { answer: "keep" as const, kept: true, state: "Kept" },
    { answer: "drop" as const, kept: false, state: "Dropped" },
    { answer: "fail" as const, kept: false, state: "Unknown" },
  ])("a dry run answered by $answer: kept $kept, state $state", async ({ answer, kept, state }) => {
    const fake = api(answer);
    const probe = new DeviceTaintProbe({ client: fake.client, driver: "d.example.com", node: "n", logger });
    expect(await probe.kept()).toBe(kept);
    expect(probe.state()).toBe(state);
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]).toMatchObject({
      method: "POST",
      path: "/apis/resource.k8s.io/v1/resourceslices?dryRun=All",
    });
    expect(fake.requests[0]!.body).toEqual(taintProbeSlice("d.example.com", "n"));
    // Known: never asked again; failed: not again within the retry delay.
    await probe.kept();
    expect(fake.requests).toHaveLength(1);
  });

  it("asks again after a failed probe only once the retry delay has passed", async () => {
    let now = 1_000;
    const fake = api("fail");
    const probe = new DeviceTaintProbe({
      client: fake.client,
      driver: "d.example.com",
      node: "n",
      logger,
      retryMs: 500,
      now: () => now,
    });
    expect(await probe.kept()).toBe(false);
    now += 499;
    expect(await probe.kept()).toBe(false);
    expect(fake.requests).toHaveLength(1);
    now += 1;
    await probe.kept();
    expect(fake.requests).toHaveLength(2);
  });

  it("learns from real writes: taints dropped after all, and kept again", async () => {
    const probe = new DeviceTaintProbe({
      client: api("keep").client,
      driver: "d.example.com",
      node: "n",
      logger,
    });
    expect(await probe.kept()).toBe(true);
    const sent = taintProbeSlice("d.example.com", "n");
    const stripped = { ...sent, spec: { ...sent.spec, devices: [{ name: "probe" }] } };
    expect(probe.learn(sent, sent)).toBe(false);
    expect(probe.learn(sent, stripped)).toBe(true);
    expect(probe.state()).toBe("Dropped");
    expect(await probe.kept()).toBe(false);
    expect(probe.learn(sent, sent)).toBe(true);
    expect(probe.state()).toBe("Kept");
  });

  it("the probe slice passes the API server and dpo's admission policy: a DNS name of its own, the node's own node and pool", () => {
    const slice = taintProbeSlice("d.example.com", "node-1");
    expect(slice.metadata.name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    expect(slice.metadata.name).not.toBe(resourceSliceName("d.example.com", "node-1", 0));
    expect(slice.spec.nodeName).toBe("node-1");
    expect(slice.spec.pool.name).toBe("node-1");
    expect(slice.spec.devices?.[0]?.taints?.[0]).toMatchObject({
      key: UNHEALTHY_TAINT_KEY,
      effect: "NoSchedule",
    });
  });
});
