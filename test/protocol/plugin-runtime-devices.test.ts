// The plugin runtime's device plugin service over real unix sockets, the way the kubelet calls it:
// ListAndWatch, Allocate, GetPreferredAllocation and PreStartContainer.
import * as grpc from "@grpc/grpc-js";
import { rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { pino } from "pino";
import type { DeviceBackend, DeviceListener } from "../../src/plugin-runtime/devices/backend.js";
import { MockDeviceBackend } from "../../src/plugin-runtime/backends/mock.js";
import { resourceEnvName } from "../../src/plugin-runtime/devices/env.js";
import {
  DevicePluginClient,
  type AllocateResponse,
  type PreferredAllocationResponse,
} from "../../src/plugin-runtime/proto/index.js";
import { makeConfig, RESOURCE, startHarness, tempDir, waitFor, type Harness } from "./support.js";
import { call, callError, registered } from "./grpc-calls.js";

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

describe("ListAndWatch", () => {
  it("sends the whole list at once with NUMA topology, and serves several streams", async () => {
    harness = await startHarness(makeConfig({}));
    const r = await registered(harness);
    expect(r.devices).toEqual([
      { ID: "foo-0", health: "Healthy", topology: { nodes: [{ ID: 0 }] } },
      { ID: "foo-1", health: "Healthy", topology: { nodes: [{ ID: 1 }] } },
      { ID: "foo-2", health: "Healthy", topology: { nodes: [{ ID: 0 }] } },
      { ID: "foo-3", health: "Healthy", topology: { nodes: [{ ID: 1 }] } },
    ]);
    const second = new DevicePluginClient(
      `unix://${join(harness.dir, r.endpoint)}`,
      grpc.credentials.createInsecure(),
    );
    const got = await new Promise<number>((resolve, reject) => {
      const s = second.listAndWatch({});
      s.once("data", (res: { devices: unknown[] }) => {
        resolve(res.devices.length);
        s.cancel();
      });
      s.once("error", (e: grpc.ServiceError) => (e.code === grpc.status.CANCELLED ? undefined : reject(e)));
    });
    second.close();
    expect(got).toBe(4);
  });

  it("advertises replicas with time-slicing", async () => {
    harness = await startHarness(
      makeConfig({ sharing: { strategy: "TimeSlicing", replicas: 3, failRequestsGreaterThanOne: false } }),
    );
    const r = await registered(harness);
    expect(r.devices.map((d) => d.ID).slice(0, 4)).toEqual(["foo-0::0", "foo-0::1", "foo-0::2", "foo-1::0"]);
    expect(r.devices).toHaveLength(12);
  });

  it("reports a health change and the recovery, with the reason", async () => {
    const tmp = tempDir("health");
    try {
      const healthFile = join(tmp.dir, "health.json");
      harness = await startHarness(
        makeConfig({
          backend: { type: "Mock", mock: { devices: 4, idPrefix: "foo", numaNodes: 2, healthFile } },
          sharing: { strategy: "TimeSlicing", replicas: 2, failRequestsGreaterThanOne: false },
        }),
      );
      const r = await registered(harness);
      const before = r.updates;
      // Atomic replace, as a tool writing the file would do it.
      await writeFile(
        `${healthFile}.tmp`,
        JSON.stringify({ "foo-1": { health: "Unhealthy", reason: "XidError" } }),
      );
      await rename(`${healthFile}.tmp`, healthFile);
      await waitFor(
        "foo-1 replicas to turn Unhealthy",
        (observe) => {
          observe(r.devices);
          const bad = r.devices.filter((d) => d.health === "Unhealthy").map((d) => d.ID);
          return bad.join(",") === "foo-1::0,foo-1::1";
        },
        { timeoutMs: 2_000, intervalMs: 5 },
      );
      expect(r.updates).toBeGreaterThan(before);
      expect(harness.kubelet.capacity(RESOURCE)).toEqual({ capacity: 8, allocatable: 6 });
      const snap = harness.runtime.devices.snapshot();
      expect(snap.physical.find((d) => d.id === "foo-1")).toMatchObject({
        health: "Unhealthy",
        reason: "XidError",
      });

      await writeFile(healthFile, JSON.stringify({ "foo-1": "Healthy" }));
      await waitFor(
        "foo-1 to recover",
        (observe) => {
          observe(r.devices);
          return r.devices.every((d) => d.health === "Healthy");
        },
        { timeoutMs: 2_000, intervalMs: 5 },
      );
      expect(harness.kubelet.capacity(RESOURCE)).toEqual({ capacity: 8, allocatable: 8 });
    } finally {
      tmp.cleanup();
    }
  });
});

describe("Allocate", () => {
  it("answers each container request in order with the resource env var and backend details", async () => {
    harness = await startHarness(makeConfig({ cdi: { enabled: true, kind: "vendor.example/foo" } }));
    const r = await registered(harness);
    const res: AllocateResponse = await call(r.client.allocate.bind(r.client), {
      containerRequests: [
        { devicesIds: ["foo-2"] },
        { devicesIds: ["foo-0", "foo-3"] },
        { devicesIds: ["foo-1"] },
      ],
    });
    expect(res.containerResponses).toHaveLength(3);
    const env = resourceEnvName(RESOURCE);
    expect(res.containerResponses.map((c) => c.envs[env])).toEqual(["foo-2", "foo-0,foo-3", "foo-1"]);
    expect(res.containerResponses[1]!.envs["MOCK_DEVICE_IDS"]).toBe("foo-0,foo-3");
    expect(res.containerResponses[1]!.cdiDevices).toEqual([
      { name: "vendor.example/foo=foo-0" },
      { name: "vendor.example/foo=foo-3" },
    ]);
  });

  it("refuses unknown ids with INVALID_ARGUMENT naming them", async () => {
    harness = await startHarness(makeConfig({}));
    const r = await registered(harness);
    const err = await callError(r.client.allocate.bind(r.client), {
      containerRequests: [{ devicesIds: ["foo-0"] }, { devicesIds: ["foo-1", "bar-9", "baz"] }],
    });
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toContain("container_requests[1]");
    expect(err.details).toContain("bar-9");
    expect(err.details).toContain("baz");
  });

  it("refuses unhealthy devices with FAILED_PRECONDITION", async () => {
    const tmp = tempDir("unhealthy");
    try {
      const healthFile = join(tmp.dir, "health.json");
      await writeFile(healthFile, JSON.stringify({ "foo-2": "Unhealthy" }));
      harness = await startHarness(
        makeConfig({
          backend: { type: "Mock", mock: { devices: 4, idPrefix: "foo", numaNodes: 2, healthFile } },
        }),
      );
      const r = await registered(harness);
      const err = await callError(r.client.allocate.bind(r.client), {
        containerRequests: [{ devicesIds: ["foo-2"] }],
      });
      expect(err.code).toBe(grpc.status.FAILED_PRECONDITION);
      expect(err.details).toContain("foo-2");
    } finally {
      tmp.cleanup();
    }
  });

  it("refuses more than one replica when failRequestsGreaterThanOne is set", async () => {
    harness = await startHarness(
      makeConfig({ sharing: { strategy: "TimeSlicing", replicas: 4, failRequestsGreaterThanOne: true } }),
    );
    const r = await registered(harness);
    await call(r.client.allocate.bind(r.client), { containerRequests: [{ devicesIds: ["foo-0::1"] }] });
    const err = await callError(r.client.allocate.bind(r.client), {
      containerRequests: [{ devicesIds: ["foo-0::1", "foo-1::1"] }],
    });
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it("refuses an empty request, and survives malformed bytes", async () => {
    harness = await startHarness(makeConfig({}));
    const r = await registered(harness);
    const empty = await callError(r.client.allocate.bind(r.client), { containerRequests: [] });
    expect(empty.code).toBe(grpc.status.INVALID_ARGUMENT);

    // A client that sends bytes that are no AllocateRequest at all.
    const Raw = grpc.makeGenericClientConstructor(
      {
        allocate: {
          path: "/v1beta1.DevicePlugin/Allocate",
          requestStream: false,
          responseStream: false,
          requestSerialize: (b: Buffer) => b,
          requestDeserialize: (b: Buffer) => b,
          responseSerialize: (b: Buffer) => b,
          responseDeserialize: (b: Buffer) => b,
        },
      },
      "v1beta1.DevicePlugin",
    );
    const raw = new Raw(`unix://${join(harness.dir, r.endpoint)}`, grpc.credentials.createInsecure());
    const garbage = await new Promise<grpc.ServiceError | null>((resolve) =>
      raw.makeUnaryRequest(
        "/v1beta1.DevicePlugin/Allocate",
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]),
        (err) => resolve(err),
      ),
    );
    raw.close();
    expect(garbage?.code).toBeDefined();
    expect(garbage?.code).not.toBe(grpc.status.OK);
    // Still serving.
    const ok = await call(r.client.allocate.bind(r.client), {
      containerRequests: [{ devicesIds: ["foo-0"] }],
    });
    expect(ok.containerResponses).toHaveLength(1);
  });

  it("allocates through the kubelet's path: preferred allocation, then Allocate", async () => {
    harness = await startHarness(
      makeConfig({
        sharing: { strategy: "TimeSlicing", replicas: 4, failRequestsGreaterThanOne: false },
        topology: { allocationPolicy: "Packed" },
      }),
    );
    await registered(harness);
    const first = await harness.kubelet.allocate(RESOURCE, 2);
    expect(first.deviceIds).toHaveLength(2);
    expect(new Set(first.deviceIds.map((id) => id.split("::")[0])).size).toBe(1);
  });
});

/** A CDI spec file as a container runtime reads it: the fields this project writes, nothing assumed. */

describe("GetPreferredAllocation", () => {
  const layout = {
    backend: { type: "Mock" as const, mock: { devices: 4, idPrefix: "foo", numaNodes: 2 } },
    sharing: { strategy: "TimeSlicing" as const, replicas: 2, failRequestsGreaterThanOne: false },
  };
  const all = [
    "foo-0::0",
    "foo-0::1",
    "foo-1::0",
    "foo-1::1",
    "foo-2::0",
    "foo-2::1",
    "foo-3::0",
    "foo-3::1",
  ];

  async function prefer(
    policy: "Packed" | "Spread" | "NUMAAligned",
    available: string[],
    must: string[],
    size: number,
  ) {
    harness = await startHarness(makeConfig({ ...layout, topology: { allocationPolicy: policy } }));
    const r = await registered(harness);
    const res: PreferredAllocationResponse = await call(r.client.getPreferredAllocation.bind(r.client), {
      containerRequests: [
        { availableDeviceIDs: available, mustIncludeDeviceIDs: must, allocationSize: size },
      ],
    });
    return res.containerResponses[0]!.deviceIDs;
  }

  it("Packed fills one physical device before the next", async () => {
    const ids = await prefer("Packed", all, [], 2);
    expect(new Set(ids.map((id) => id.split("::")[0])).size).toBe(1);
  });

  it("Spread uses distinct physical devices and NUMA nodes first", async () => {
    const ids = await prefer("Spread", all, [], 2);
    const physical = ids.map((id) => Number(id.split("::")[0]!.split("-")[1]));
    expect(new Set(physical).size).toBe(2);
    expect(new Set(physical.map((p) => p % 2)).size).toBe(2);
  });

  it("NUMAAligned keeps the request on one NUMA node and honours must_include", async () => {
    const ids = await prefer("NUMAAligned", all, ["foo-1::0"], 4);
    expect(ids).toHaveLength(4);
    expect(ids).toContain("foo-1::0");
    // NUMA node 1 holds foo-1 and foo-3.
    expect(ids.every((id) => id.startsWith("foo-1::") || id.startsWith("foo-3::"))).toBe(true);
  });

  it("refuses a negative allocation size", async () => {
    harness = await startHarness(makeConfig({ ...layout, topology: { allocationPolicy: "Packed" } }));
    const r = await registered(harness);
    const err = await callError(r.client.getPreferredAllocation.bind(r.client), {
      containerRequests: [{ availableDeviceIDs: all, mustIncludeDeviceIDs: [], allocationSize: -1 }],
    });
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toContain("allocation_size");
  });
});

describe("PreStartContainer", () => {
  /** The mock backend with a pre-start hook whose outcome the test chooses. */
  class PreStartBackend implements DeviceBackend {
    readonly type = "Mock";
    readonly preStartRequired = true;
    readonly calls: string[][] = [];
    mode: "ok" | "fail" | "hang" = "ok";
    constructor(private readonly inner: MockDeviceBackend) {}
    start() {
      return this.inner.start();
    }
    devices() {
      return this.inner.devices();
    }
    subscribe(listener: DeviceListener) {
      return this.inner.subscribe(listener);
    }
    allocate(ids: readonly string[]) {
      return this.inner.allocate(ids);
    }
    cdiContainerEdits(id: string) {
      return this.inner.cdiContainerEdits(id);
    }
    stop() {
      return this.inner.stop();
    }
    preStart(ids: readonly string[], signal: AbortSignal): Promise<void> {
      this.calls.push([...ids]);
      if (this.mode === "fail") return Promise.reject(new Error("firmware not loaded"));
      if (this.mode === "hang") {
        return new Promise((_, reject) =>
          signal.addEventListener("abort", () => reject(new Error("aborted"))),
        );
      }
      return Promise.resolve();
    }
  }

  it("advertises pre_start_required, runs the hook, and answers in time when it fails or hangs", async () => {
    const backend = new PreStartBackend(
      new MockDeviceBackend(
        { devices: 2, idPrefix: "foo", numaNodes: 1, attributes: {} },
        { logger: pino({ level: "silent" }) },
      ),
    );
    harness = await startHarness(makeConfig({}), { backend, preStartTimeoutMs: 300 });
    const r = await registered(harness);
    expect(r.options.preStartRequired).toBe(true);

    await call(r.client.preStartContainer.bind(r.client), { devicesIds: ["foo-1"] });
    expect(backend.calls).toEqual([["foo-1"]]);

    backend.mode = "fail";
    const failed = await callError(r.client.preStartContainer.bind(r.client), { devicesIds: ["foo-0"] });
    expect(failed.code).toBe(grpc.status.INTERNAL);
    expect(failed.details).toContain("firmware not loaded");

    backend.mode = "hang";
    // The runtime answers by itself after its 300 ms budget; 5 s is a deadline for that, not a measure.
    const answered = callError(r.client.preStartContainer.bind(r.client), { devicesIds: ["foo-0"] });
    const hung = await waitFor("PreStartContainer to answer", () => answered, { timeoutMs: 5_000 });
    expect(hung.code).toBe(grpc.status.DEADLINE_EXCEEDED);
  });
});
