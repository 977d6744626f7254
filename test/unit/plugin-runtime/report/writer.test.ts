// The node report writer against a scripted API: create then status, coalescing, skipping, retries, the last write.
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { DeviceNodeStateStatus } from "../../../../src/api/v1beta1/devicenodestate.js";
import { advertiseDevices } from "../../../../src/plugin-runtime/devices/sharing.js";
import type { PhysicalDevice } from "../../../../src/plugin-runtime/devices/types.js";
import { metricValue } from "../../../../src/observability/metrics.js";
import { PluginMetrics } from "../../../../src/plugin-runtime/metrics.js";
import { ApiError, type ApiRequest } from "../../../../src/plugin-runtime/report/api-client.js";
import { NodeStateWriter, type ReportSource } from "../../../../src/plugin-runtime/report/writer.js";
import type { RuntimeStatus } from "../../../../src/plugin-runtime/runtime.js";
import { waitFor } from "../../../../tools/cluster/wait.js";

const PATH = "/apis/dpo.dev/v1beta1/namespaces/dpo-system/devicenodestates/example-foo-node-a-1c111f8095";
const QUERY = "?fieldManager=dpo-plugin&force=true";
const NO_SHARING = { strategy: "None", failRequestsGreaterThanOne: false } as const;

class FakeSource implements ReportSource {
  runtime: RuntimeStatus = {
    serving: true,
    registered: true,
    socketPath: "/dp/dpo-foo.sock",
    registrationSocketPath: undefined,
    kubeletAPIVersion: "v1beta1",
    lastRegistrationError: undefined,
    registrationChangedAtMs: Date.parse("2025-01-01T00:00:00Z"),
    kubeletRestarts: 0,
  };
  physical: PhysicalDevice[] = [0, 1, 2, 3].map((i) => ({
    id: `foo-${i}`,
    numaNode: i % 2,
    health: "Healthy",
    reason: "",
    attributes: {},
  }));
  private readonly listeners = new Set<() => void>();
  private allocated: number | undefined;

  status(): RuntimeStatus {
    return this.runtime;
  }
  snapshot(): { physical: PhysicalDevice[]; advertised: ReturnType<typeof advertiseDevices> } {
    return { physical: this.physical, advertised: advertiseDevices(this.physical, NO_SHARING) };
  }
  allocatedDevices(): number | undefined {
    return this.allocated;
  }
  setAllocated(allocated: number | undefined): void {
    this.allocated = allocated;
    for (const listener of this.listeners) listener();
  }
  subscribe(onChange: () => void): () => void {
    this.listeners.add(onChange);
    return () => this.listeners.delete(onChange);
  }
  get subscribers(): number {
    return this.listeners.size;
  }
  setHealth(id: string, health: "Healthy" | "Unhealthy", reason = ""): void {
    this.physical = this.physical.map((d) => (d.id === id ? { ...d, health, reason } : d));
    for (const listener of this.listeners) listener();
  }
  setRegistered(registered: boolean, atMs: number): void {
    this.runtime = { ...this.runtime, registered, registrationChangedAtMs: atMs };
    for (const listener of this.listeners) listener();
  }
}

interface Sent extends ApiRequest {
  at: number;
}

/** An API that records requests and answers each through `answer` (which may hang or throw). */
class FakeApi {
  readonly sent: Sent[] = [];
  inFlight = 0;
  maxInFlight = 0;
  answer: (req: ApiRequest) => Promise<unknown> = () => Promise.resolve({});

  async request(req: ApiRequest): Promise<unknown> {
    this.sent.push({ ...req, at: Date.now() });
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      return await this.answer(req);
    } finally {
      this.inFlight--;
    }
  }
  statusWrites(): DeviceNodeStateStatus[] {
    return this.sent
      .filter((r) => r.path === `${PATH}/status${QUERY}`)
      .map((r) => (r.body as { status: DeviceNodeStateStatus }).status);
  }
  objectWrites(): Sent[] {
    return this.sent.filter((r) => r.path === `${PATH}${QUERY}`);
  }
}

/** Resolves when `signal` aborts, rejecting like the client does; never otherwise. */
function hangUntilAborted(req: ApiRequest): Promise<never> {
  return new Promise((_resolve, reject) => {
    if (req.signal?.aborted) reject(new ApiError("aborted", { code: 0, reason: "Aborted" }));
    req.signal?.addEventListener("abort", () =>
      reject(new ApiError("aborted", { code: 0, reason: "Aborted" })),
    );
  });
}

interface Harness {
  source: FakeSource;
  api: FakeApi;
  metrics: PluginMetrics;
  logs: Record<string, unknown>[];
  writer: NodeStateWriter;
}

const writers: NodeStateWriter[] = [];
afterEach(async () => {
  await Promise.all(writers.splice(0).map((w) => w.stop({ budgetMs: 50 })));
});

function harness(
  options: {
    minIntervalMs?: number;
    allocatedMinIntervalMs?: number;
    retryBaseMs?: number;
    retryMaxMs?: number;
    now?: () => number;
  } = {},
): Harness {
  const source = new FakeSource();
  const api = new FakeApi();
  const metrics = new PluginMetrics();
  const logs: Record<string, unknown>[] = [];
  const logger = pino(
    { level: "debug" },
    { write: (line: string) => logs.push(JSON.parse(line) as Record<string, unknown>) },
  );
  const writer = new NodeStateWriter({
    api,
    source,
    namespace: "dpo-system",
    config: { name: "example-foo", uid: "uid-1" },
    nodeName: "node-a",
    resourceName: "hardware-vendor.example/foo",
    pluginVersion: "0.1.0",
    logger,
    metrics,
    minIntervalMs: options.minIntervalMs ?? 50,
    allocatedMinIntervalMs: options.allocatedMinIntervalMs ?? 50,
    retryBaseMs: options.retryBaseMs ?? 20,
    retryMaxMs: options.retryMaxMs ?? 200,
    now: options.now,
  });
  writers.push(writer);
  return { source, api, metrics, logs, writer };
}

function unhealthyIds(status: DeviceNodeStateStatus | undefined): string[] {
  return (status?.devices ?? []).filter((d) => d.health === "Unhealthy").map((d) => d.id);
}

describe("NodeStateWriter", () => {
  it("creates the object with server-side apply, then applies the status subresource", async () => {
    const { api, writer, metrics } = harness();
    writer.start();
    await waitFor("the first status write", () => writer.written);
    expect(api.sent.map((r) => [r.method, r.path, r.contentType])).toEqual([
      ["PATCH", `${PATH}${QUERY}`, "application/apply-patch+yaml"],
      ["PATCH", `${PATH}/status${QUERY}`, "application/apply-patch+yaml"],
    ]);
    const object = api.sent[0]?.body as Record<string, unknown>;
    expect(object).toMatchObject({
      kind: "DeviceNodeState",
      metadata: {
        name: "example-foo-node-a-1c111f8095",
        namespace: "dpo-system",
        ownerReferences: [{ uid: "uid-1" }],
      },
      spec: { configName: "example-foo", nodeName: "node-a" },
    });
    expect(object).not.toHaveProperty("status");
    expect(api.statusWrites()[0]).toMatchObject({
      registration: { state: "Registered", since: "2025-01-01T00:00:00.000Z", socket: "/dp/dpo-foo.sock" },
      advertised: 4,
      healthy: 4,
    });
    expect(await metricValue(metrics.reportWrites, { result: "ok" })).toBe(1);
  });

  it("folds a burst of changes into a few writes that end in the latest state", async () => {
    const { source, api, writer } = harness({ minIntervalMs: 100 });
    writer.start();
    await waitFor("the first write", () => writer.written);
    const started = Date.now();
    for (let i = 0; i < 40; i++) {
      source.setHealth("foo-1", i % 2 === 0 ? "Unhealthy" : "Healthy", "Flapping");
      await new Promise((resolve) => setImmediate(resolve));
    }
    source.setHealth("foo-2", "Unhealthy", "Overheated");
    await waitFor(
      "the last state written",
      (observe) => {
        observe(unhealthyIds(writer.written));
        return unhealthyIds(writer.written).join() === "foo-2";
      },
      { timeoutMs: 5_000, intervalMs: 20 },
    );
    const elapsed = Date.now() - started;
    const writes = api.statusWrites().length - 1;
    // One write per interval at most, plus the one that was due when the burst began.
    expect(writes).toBeLessThanOrEqual(Math.ceil(elapsed / 100) + 1);
    expect(writes).toBeLessThan(10);
    expect(api.maxInFlight).toBe(1);
    const starts = api.sent.filter((r) => r.path.includes("/status")).map((r) => r.at);
    for (let i = 1; i < starts.length; i++) expect(starts[i]! - starts[i - 1]!).toBeGreaterThanOrEqual(95);
  });

  it("writes the kubelet's allocated count when it changes, and leaves it out while unknown", async () => {
    const { source, writer } = harness({ minIntervalMs: 0 });
    writer.start();
    await waitFor("the first write", () => writer.written);
    expect(writer.written && "allocated" in writer.written).toBe(false);
    source.setAllocated(0);
    await waitFor("allocated 0 written", () => writer.written?.allocated === 0);
    source.setAllocated(3);
    await waitFor("allocated 3 written", () => writer.written?.allocated === 3);
  });

  it("writes a change of the allocated count alone at most once per interval, with the latest count; other news at once", async () => {
    const { source, api, writer } = harness({ minIntervalMs: 0, allocatedMinIntervalMs: 400 });
    writer.start();
    await waitFor("the first write", () => writer.written);
    const statusSends = () => api.sent.filter((r) => r.path.includes("/status"));
    const firstAt = statusSends()[0]!.at;
    // Pods come and go: five counts in a row make one write, of the last count, once the interval is up.
    for (const count of [1, 2, 3, 2, 4]) source.setAllocated(count);
    await waitFor("allocated 4 written", () => writer.written?.allocated === 4);
    expect(statusSends()[1]!.at - firstAt).toBeGreaterThanOrEqual(395);
    expect(api.statusWrites().map((s) => s.allocated)).toEqual([undefined, 4]);

    // A new count waits again, but a health change does not wait, and takes the count along.
    const before = api.statusWrites().length;
    source.setAllocated(5);
    source.setHealth("foo-1", "Unhealthy", "Overheated");
    await waitFor("the health change written", () => unhealthyIds(writer.written).join() === "foo-1");
    expect(writer.written?.allocated).toBe(5);
    expect(api.statusWrites().length).toBe(before + 1);
  });

  it("sends nothing when a change leaves the report as it was", async () => {
    const { source, api, writer, metrics } = harness();
    writer.start();
    await waitFor("the first write", () => writer.written);
    source.setHealth("foo-0", "Healthy");
    await waitFor(
      "the change looked at",
      async () => (await metricValue(metrics.reportWrites, { result: "unchanged" })) === 1,
    );
    expect(api.sent).toHaveLength(2);
  });

  it("keeps one write in flight and follows it with one write of what changed meanwhile", async () => {
    const { source, api, writer } = harness({ minIntervalMs: 0 });
    let release: (() => void) | undefined;
    api.answer = (req) =>
      req.path.includes("/status") && release === undefined
        ? new Promise((resolve) => (release = () => resolve({})))
        : Promise.resolve({});
    writer.start();
    await waitFor("the first status write sent", () => api.statusWrites().length === 1);
    source.setHealth("foo-0", "Unhealthy", "A");
    source.setHealth("foo-3", "Unhealthy", "B");
    expect(api.statusWrites()).toHaveLength(1);
    release?.();
    await waitFor("the follow-up write", () => unhealthyIds(writer.written).join() === "foo-0,foo-3");
    expect(api.statusWrites()).toHaveLength(2);
    expect(api.maxInFlight).toBe(1);
  });

  it.each([
    {
      what: "no connection",
      error: new ApiError("connect ECONNREFUSED", { code: 0, reason: "ECONNREFUSED" }),
    },
    { what: "503", error: new ApiError("etcd is away", { code: 503, reason: "ServiceUnavailable" }) },
    { what: "429", error: new ApiError("slow down", { code: 429, reason: "TooManyRequests" }) },
    {
      what: "401 (a token that rotated)",
      error: new ApiError("Unauthorized", { code: 401, reason: "Unauthorized" }),
    },
  ])("retries by itself with growing delays after $what", async ({ error }) => {
    const { api, writer, metrics } = harness({ retryBaseMs: 20, retryMaxMs: 1_000 });
    let failures = 3;
    api.answer = () => (failures-- > 0 ? Promise.reject(error) : Promise.resolve({}));
    writer.start();
    await waitFor("a write after the failures", () => writer.written, { timeoutMs: 5_000, intervalMs: 10 });
    expect(await metricValue(metrics.reportWrites, { result: "error" })).toBe(3);
    const at = api.sent.map((r) => r.at);
    // 20, 40, 80 ms: each pause at least as long as the one before (timer slack aside).
    expect(at[2]! - at[1]!).toBeGreaterThanOrEqual(35);
    expect(at[3]! - at[2]!).toBeGreaterThanOrEqual(75);
  });

  it("says clearly when RBAC refuses the write, and retries slowly", async () => {
    const { api, writer, logs } = harness({ retryBaseMs: 10, retryMaxMs: 300 });
    let refusals = 2;
    api.answer = () =>
      refusals-- > 0
        ? Promise.reject(
            new ApiError(
              'devicenodestates.dpo.dev "example-foo-node-a-1c111f8095" is forbidden: User "x" cannot patch',
              {
                code: 403,
                reason: "Forbidden",
              },
            ),
          )
        : Promise.resolve({});
    writer.start();
    await waitFor("a write once allowed", () => writer.written, { timeoutMs: 5_000, intervalMs: 10 });
    const at = api.sent.map((r) => r.at);
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(290);
    const refused = logs.find((l) => l["msg"] === "the API server refused the node report");
    expect(refused).toMatchObject({ level: 50, code: 403, reason: "Forbidden" });
    expect(String(refused?.["hint"])).toMatch(
      /create and patch on devicenodestates and patch on devicenodestates\/status/,
    );
    // The same refusal again is not shouted twice.
    expect(logs.filter((l) => l["level"] === 50)).toHaveLength(1);
  });

  it("re-creates the object when the status write finds it deleted", async () => {
    const { source, api, writer } = harness();
    writer.start();
    await waitFor("the first write", () => writer.written);
    let gone = true;
    api.answer = (req) =>
      req.path.includes("/status") && gone
        ? ((gone = false),
          Promise.reject(
            new ApiError('devicenodestates.dpo.dev "x" not found', { code: 404, reason: "NotFound" }),
          ))
        : Promise.resolve({});
    source.setHealth("foo-0", "Unhealthy", "A");
    await waitFor("the change written", () => unhealthyIds(writer.written).join() === "foo-0", {
      timeoutMs: 5_000,
    });
    expect(api.objectWrites()).toHaveLength(2);
    expect(api.sent.at(-2)?.path).toBe(`${PATH}${QUERY}`);
  });

  it("moves a device's since on every flip, even between two writes", async () => {
    let nowMs = Date.parse("2025-01-01T00:00:00Z");
    const { source, writer, api } = harness({ minIntervalMs: 60_000, now: () => nowMs });
    writer.start();
    await waitFor("the first write", () => writer.written);
    nowMs += 1_000;
    source.setHealth("foo-1", "Unhealthy", "A");
    nowMs += 1_000;
    source.setHealth("foo-1", "Healthy");
    nowMs += 1_000;
    source.setHealth("foo-1", "Unhealthy", "B");
    await writer.stop({ budgetMs: 500 });
    const final = api.statusWrites().at(-1);
    expect(final?.devices.find((d) => d.id === "foo-1")).toMatchObject({
      health: "Unhealthy",
      reason: "B",
      since: "2025-01-01T00:00:03.000Z",
    });
    expect(final?.devices.find((d) => d.id === "foo-0")?.since).toBe("2025-01-01T00:00:00.000Z");
  });

  it("writes NotRegistered with the reason on stop and stops following changes", async () => {
    const { source, api, writer } = harness();
    writer.start();
    await waitFor("the first write", () => writer.written);
    await writer.stop({ budgetMs: 500, reason: "the plugin stopped (SIGTERM)" });
    expect(api.statusWrites().at(-1)?.registration).toMatchObject({
      state: "NotRegistered",
      lastError: "the plugin stopped (SIGTERM)",
    });
    // Unsubscribed: later changes cannot reach the writer.
    expect(source.subscribers).toBe(0);
  });

  it("keeps stop within its budget when the API server does not answer", async () => {
    const { api, writer, metrics } = harness();
    api.answer = hangUntilAborted;
    writer.start();
    await waitFor("a request in flight", () => api.inFlight === 1);
    // The promise is that stop() returns although the request hangs; 5 s is a deadline, not a measure.
    const stopping = writer.stop({ budgetMs: 200 });
    await waitFor("stop() to return", () => stopping.then(() => true), { timeoutMs: 5_000 });
    expect(api.inFlight).toBe(0);
    expect(await metricValue(metrics.reportWrites, { result: "ok" })).toBe(0);
  });

  it("writes nothing when stopped before it started", async () => {
    const { api, writer } = harness();
    await writer.stop({ budgetMs: 100 });
    expect(api.sent).toHaveLength(0);
  });

  it("reports the registration change with the runtime's time of change", async () => {
    const { source, writer } = harness();
    writer.start();
    await waitFor("the first write", () => writer.written);
    source.runtime = { ...source.runtime, lastRegistrationError: "kubelet said no" };
    source.setRegistered(false, Date.parse("2025-01-01T01:00:00Z"));
    await waitFor("NotRegistered written", () => writer.written?.registration.state === "NotRegistered");
    expect(writer.written?.registration).toEqual({
      state: "NotRegistered",
      since: "2025-01-01T01:00:00.000Z",
      lastError: "kubelet said no",
      socket: "/dp/dpo-foo.sock",
    });
  });
});
