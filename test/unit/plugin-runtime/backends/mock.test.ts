// Mock backend: simulated devices, NUMA round-robin, and health driven by a watched JSON file.
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MockBackendSchema, type MockBackend } from "../../../../src/api/v1beta1/spec.js";
import { UnknownDevicesError } from "../../../../src/plugin-runtime/backends/device-list.js";
import {
  MOCK_DEVICE_IDS_ENV,
  MockDeviceBackend,
  REASON_MARKED_UNHEALTHY,
  applyHealthFile,
  type MockHealthFile,
  mockDevices,
  parseHealthFile,
} from "../../../../src/plugin-runtime/backends/mock.js";
import { byId, captureLogs, makeTempDir, silentLogger, waitForDevices } from "./backend-wait.js";

const config = (input: Partial<Record<keyof MockBackend, unknown>>): MockBackend =>
  MockBackendSchema.parse(input);

describe("mockDevices", () => {
  it.each([
    { numaNodes: 2, want: [0, 1, 0, 1] },
    { numaNodes: 3, want: [0, 1, 2, 0] },
    { numaNodes: 1, want: [0, 0, 0, 0] },
    { numaNodes: 0, want: [undefined, undefined, undefined, undefined] },
  ])("spreads 4 devices over $numaNodes NUMA nodes round-robin", ({ numaNodes, want }) => {
    const devices = mockDevices(config({ devices: 4, idPrefix: "foo", numaNodes }));
    expect(devices.map((d) => d.id)).toEqual(["foo-0", "foo-1", "foo-2", "foo-3"]);
    expect(devices.map((d) => d.numaNode)).toEqual(want);
  });

  it("reports the configured attributes plus the index, all healthy", () => {
    const [first, second] = mockDevices(config({ devices: 2, attributes: { model: "X100" } }));
    expect(first).toEqual({
      id: "mock-0",
      numaNode: 0,
      health: "Healthy",
      reason: "",
      attributes: { model: "X100", index: "0" },
    });
    expect(second?.attributes).toEqual({ model: "X100", index: "1" });
  });
});

describe("parseHealthFile", () => {
  it.each([
    { text: "{}", ok: true },
    { text: '{"a-0": "Unhealthy", "a-1": "Healthy"}', ok: true },
    { text: '{"a-0": {"health": "Unhealthy", "reason": "ECCError"}}', ok: true },
    { text: '{"a-0": {"health": "Healthy"}}', ok: true },
    { text: "not json", ok: false, problem: "not JSON" },
    { text: "[]", ok: false, problem: "file" },
    { text: '{"a-0": "unhealthy"}', ok: false, problem: "a-0" },
    { text: '{"a-0": {"health": "Unhealthy", "why": "x"}}', ok: false, problem: "a-0" },
    { text: '{"a-0": 1}', ok: false, problem: "a-0" },
    { text: '{"a-0": null}', ok: false, problem: "a-0" },
    { text: '{"a-0": ["Unhealthy"]}', ok: false, problem: "a-0" },
    { text: '{"a-0": {"reason": "x"}}', ok: false, problem: "a-0: health" },
    { text: '{"a-0": {"health": "Unhealthy", "reason": 5}}', ok: false, problem: "a-0: reason" },
    {
      text: `{"a-0": {"health": "Unhealthy", "reason": "${"x".repeat(257)}"}}`,
      ok: false,
      problem: "a-0: reason",
    },
    { text: `{"a-0": {"health": "Unhealthy", "reason": "${"x".repeat(256)}"}}`, ok: true },
    { text: '{"a-0": {"health": "Healthy"}}', ok: true },
  ])("$text → ok=$ok", ({ text, ok, problem }) => {
    const parsed = parseHealthFile(text);
    expect(parsed.ok).toBe(ok);
    if (!parsed.ok) expect(parsed.problem).toContain(problem);
  });
});

describe("applyHealthFile", () => {
  const devices = mockDevices(config({ devices: 3, idPrefix: "a" }));
  it.each<{ file: MockHealthFile; want: string[]; unknown: string[] }>([
    { file: {}, want: ["Healthy:", "Healthy:", "Healthy:"], unknown: [] },
    {
      file: { "a-1": "Unhealthy" },
      want: ["Healthy:", `Unhealthy:${REASON_MARKED_UNHEALTHY}`, "Healthy:"],
      unknown: [],
    },
    {
      file: { "a-0": { health: "Unhealthy", reason: "ECCError" }, "a-2": "Healthy" },
      want: ["Unhealthy:ECCError", "Healthy:", "Healthy:"],
      unknown: [],
    },
    {
      file: { "a-0": { health: "Healthy", reason: "Repaired" } },
      want: ["Healthy:Repaired", "Healthy:", "Healthy:"],
      unknown: [],
    },
    {
      file: { "b-0": "Unhealthy", "a-9": "Unhealthy" },
      want: ["Healthy:", "Healthy:", "Healthy:"],
      unknown: ["a-9", "b-0"],
    },
  ])("$file", ({ file, want, unknown }) => {
    const result = applyHealthFile(devices, file);
    expect(result.devices.map((d) => `${d.health}:${d.reason}`)).toEqual(want);
    expect(result.unknownIds).toEqual(unknown);
  });

  it("does not treat inherited object keys as entries", () => {
    const tricky = [
      { id: "constructor", numaNode: undefined, health: "Healthy" as const, reason: "", attributes: {} },
    ];
    expect(applyHealthFile(tricky, {}).devices[0]).toMatchObject({ health: "Healthy", reason: "" });
  });
});

describe("MockDeviceBackend", () => {
  let dir: { path: string; remove: () => Promise<void> };
  let healthFile: string;
  const backends: MockDeviceBackend[] = [];

  const startBackend = async (
    input: Partial<Record<keyof MockBackend, unknown>>,
    options: { pollIntervalMs?: number; logger?: ReturnType<typeof silentLogger> } = {},
  ) => {
    const backend = new MockDeviceBackend(config(input), {
      logger: options.logger ?? silentLogger(),
      ...options,
    });
    backends.push(backend);
    const initial = await backend.start();
    return { backend, initial };
  };

  /** Replaces the file the way careful writers do: write a temporary file, then rename it over. */
  const replaceHealthFile = async (content: unknown) => {
    const temporary = `${healthFile}.tmp`;
    await writeFile(temporary, typeof content === "string" ? content : JSON.stringify(content));
    await rename(temporary, healthFile);
  };

  beforeEach(async () => {
    dir = await makeTempDir("mock");
    healthFile = join(dir.path, "health.json");
  });

  afterEach(async () => {
    await Promise.all(backends.splice(0).map((backend) => backend.stop()));
    await dir.remove();
  });

  it("starts with every device healthy when the health file does not exist", async () => {
    const { initial } = await startBackend({ devices: 3, idPrefix: "foo", healthFile });
    expect(initial.map((d) => `${d.id}:${d.health}`)).toEqual([
      "foo-0:Healthy",
      "foo-1:Healthy",
      "foo-2:Healthy",
    ]);
  });

  it("applies the health file present at start", async () => {
    await replaceHealthFile({ "foo-2": { health: "Unhealthy", reason: "Overheated" } });
    const { initial } = await startBackend({ devices: 3, idPrefix: "foo", healthFile });
    expect(byId(initial, "foo-2")).toMatchObject({ health: "Unhealthy", reason: "Overheated" });
  });

  // How fast a change reaches the kubelet is measured end to end by `make bench-plugin` (health change →
  // ListAndWatch); here only that every change and recovery arrives, each within waitForDevices' deadline.
  it("delivers a health change and the recovery, ten rounds in a row", async () => {
    const { backend } = await startBackend({ devices: 4, idPrefix: "foo", numaNodes: 2, healthFile });
    for (let round = 0; round < 10; round += 1) {
      const fault = replaceHealthFile({ "foo-1": { health: "Unhealthy", reason: `Fault${round}` } });
      const down = await waitForDevices(
        backend,
        (devices) => byId(devices, "foo-1")?.reason === `Fault${round}`,
        `foo-1 unhealthy (round ${round})`,
      );
      await fault;
      expect(byId(down.devices, "foo-1")?.health).toBe("Unhealthy");
      expect(down.devices.filter((d) => d.health === "Unhealthy")).toHaveLength(1);

      const recovery = replaceHealthFile({ "foo-1": "Healthy" });
      const up = await waitForDevices(
        backend,
        (devices) => devices.every((d) => d.health === "Healthy"),
        `foo-1 recovered (round ${round})`,
      );
      await recovery;
      expect(up.devices.filter((d) => d.health === "Healthy")).toHaveLength(4);
    }
  });

  it("picks up in-place writes and a deleted file (everything healthy again)", async () => {
    const { backend } = await startBackend({ devices: 2, idPrefix: "foo", healthFile });
    await writeFile(healthFile, JSON.stringify({ "foo-0": "Unhealthy" }));
    await waitForDevices(
      backend,
      (d) => byId(d, "foo-0")?.health === "Unhealthy",
      "foo-0 unhealthy after in-place write",
    );
    await rm(healthFile);
    await waitForDevices(
      backend,
      (d) => d.every((x) => x.health === "Healthy"),
      "all healthy after the file is deleted",
    );
  });

  it("keeps the last known health when the file becomes invalid, and applies the next valid one", async () => {
    const logs = captureLogs();
    await replaceHealthFile({ "foo-0": "Unhealthy" });
    const { backend } = await startBackend(
      { devices: 2, idPrefix: "foo", healthFile },
      { logger: logs.logger },
    );
    expect(byId(backend.devices(), "foo-0")?.health).toBe("Unhealthy");
    const delivered: string[] = [];
    backend.subscribe((devices) => delivered.push(JSON.stringify(devices)));

    await replaceHealthFile("{ not json");
    await logs.waitFor(
      (l) => l.msg === "health file is invalid; keeping the last known health",
      "invalid-file warning",
    );
    const warning = logs.lines.find((l) => l.msg === "health file is invalid; keeping the last known health");
    expect(warning).toMatchObject({ level: 40, backend: "Mock", path: healthFile });
    await replaceHealthFile({ "foo-0": "Sick" });
    await logs.waitFor((l) => String(l.problem).includes("foo-0"), "warning naming the bad entry");
    expect(byId(backend.devices(), "foo-0")?.health).toBe("Unhealthy");
    expect(delivered).toEqual([]);

    await replaceHealthFile({ "foo-1": "Unhealthy" });
    const seen = await waitForDevices(
      backend,
      (d) => byId(d, "foo-1")?.health === "Unhealthy",
      "next valid file applied",
    );
    expect(byId(seen.devices, "foo-0")?.health).toBe("Healthy");
  });

  it("warns once about ids that are not devices", async () => {
    const logs = captureLogs();
    const { backend } = await startBackend(
      { devices: 2, idPrefix: "foo", healthFile },
      { logger: logs.logger },
    );
    await replaceHealthFile({ "bar-7": "Unhealthy", "foo-0": "Unhealthy" });
    await waitForDevices(backend, (d) => byId(d, "foo-0")?.health === "Unhealthy", "foo-0 unhealthy");
    await replaceHealthFile({ "bar-7": "Unhealthy", "foo-1": "Unhealthy" });
    await waitForDevices(backend, (d) => byId(d, "foo-1")?.health === "Unhealthy", "foo-1 unhealthy");
    const unknown = logs.lines.filter(
      (l) => l.msg === "health file names a device this backend does not have",
    );
    expect(unknown).toHaveLength(1);
    expect(unknown[0]).toMatchObject({ device: "bar-7", backend: "Mock" });
  });

  it("does not deliver a list when nothing changed", async () => {
    const { backend } = await startBackend({ devices: 2, idPrefix: "foo", healthFile });
    const delivered: number[] = [];
    backend.subscribe((devices) => delivered.push(devices.length));
    // Same health, different text: the file changed, the devices did not.
    await replaceHealthFile({ "foo-0": "Healthy" });
    await replaceHealthFile({ "foo-1": "Unhealthy" });
    await waitForDevices(backend, (d) => byId(d, "foo-1")?.health === "Unhealthy", "foo-1 unhealthy");
    expect(delivered).toEqual([2]);
  });

  it("finds a health file whose directory appears after start (polling re-arms the watch)", async () => {
    const nested = join(dir.path, "later", "health.json");
    const { backend } = await startBackend(
      { devices: 2, idPrefix: "foo", healthFile: nested },
      { pollIntervalMs: 50 },
    );
    await mkdir(join(dir.path, "later"));
    await writeFile(nested, JSON.stringify({ "foo-1": "Unhealthy" }));
    await waitForDevices(
      backend,
      (d) => byId(d, "foo-1")?.health === "Unhealthy",
      "foo-1 unhealthy from the late file",
    );
    await writeFile(nested, JSON.stringify({}));
    await waitForDevices(backend, (d) => byId(d, "foo-1")?.health === "Healthy", "foo-1 recovered");
  });

  it("allocates by listing the ids in MOCK_DEVICE_IDS and rejects unknown ids", async () => {
    const { backend } = await startBackend({ devices: 3, idPrefix: "foo" });
    expect(backend.preStartRequired).toBe(false);
    expect(backend.allocate(["foo-2", "foo-0"])).toEqual({
      envs: { [MOCK_DEVICE_IDS_ENV]: "foo-2,foo-0" },
      mounts: [],
      devices: [],
      annotations: {},
    });
    expect(() => backend.allocate(["foo-0", "foo-9"])).toThrow(UnknownDevicesError);
    expect(() => backend.allocate(["foo-9"])).toThrow(/foo-9/);
  });

  it("gives each device a CDI edit of its own: an env var named after it", async () => {
    const { backend } = await startBackend({ devices: 3, idPrefix: "foo" });
    expect(backend.cdiContainerEdits("foo-2")).toEqual({ env: ["MOCK_DEVICE_FOO_2=foo-2"] });
    expect(backend.cdiContainerEdits("foo-9")).toBeUndefined();
  });

  it("keeps delivering to other subscribers when one throws", async () => {
    const { backend } = await startBackend({ devices: 1, idPrefix: "foo", healthFile });
    backend.subscribe(() => {
      throw new Error("subscriber bug");
    });
    await replaceHealthFile({ "foo-0": "Unhealthy" });
    await waitForDevices(
      backend,
      (d) => byId(d, "foo-0")?.health === "Unhealthy",
      "foo-0 unhealthy despite a bad subscriber",
    );
  });

  it("stops idempotently and delivers nothing afterwards", async () => {
    const { backend } = await startBackend(
      { devices: 1, idPrefix: "foo", healthFile },
      { pollIntervalMs: 20 },
    );
    const { backend: witness } = await startBackend(
      { devices: 1, idPrefix: "foo", healthFile },
      { pollIntervalMs: 20 },
    );
    const delivered: number[] = [];
    backend.subscribe((devices) => delivered.push(devices.length));
    await backend.stop();
    await backend.stop();
    // The witness, still running, sees both changes; the stopped backend must see neither.
    await replaceHealthFile({ "foo-0": "Unhealthy" });
    await waitForDevices(
      witness,
      (d) => byId(d, "foo-0")?.health === "Unhealthy",
      "witness sees foo-0 unhealthy",
    );
    await replaceHealthFile({});
    await waitForDevices(
      witness,
      (d) => byId(d, "foo-0")?.health === "Healthy",
      "witness sees foo-0 recover",
    );
    expect(delivered).toEqual([]);
    expect(byId(backend.devices(), "foo-0")?.health).toBe("Healthy");
  });
});
