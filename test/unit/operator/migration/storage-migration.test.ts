// The pure parts of the storage-version migrator: the progress annotation, key order and skipping, whether a
// CRD needs a migration, where a run resumes, the patch bodies and the retry backoff; then the run itself
// against an in-memory API for what a real API server will not do on cue (503s, expired continue tokens,
// storedVersions changing mid-run).
import { pino } from "pino";
import { beforeEach, describe, expect, it, vi } from "vitest";
import type { Clock } from "../../../../src/kube/clock.js";
import { GoneError, InvalidError, TransientError } from "../../../../src/kube/errors.js";
import { kubeRequest, type KubeRequest } from "../../../../src/kube/request.js";
import {
  compareKeys,
  formatProgress,
  isDone,
  objectKey,
  parseProgress,
  planMigration,
  progressPatch,
  resumePoint,
  retryDelayMs,
  REWRITE_PATCH,
  STORAGE_MIGRATION_ANNOTATION,
  storedVersionsPatch,
  type CrdView,
  type MigrationProgress,
} from "../../../../src/operator/migration/plan.js";
import { migrateStorage } from "../../../../src/operator/migration/storage-migration.js";

vi.mock("../../../../src/kube/request.js", () => ({ kubeRequest: vi.fn() }));

const progress: MigrationProgress = {
  storageVersion: "v1beta1",
  storedVersions: ["v1alpha1", "v1beta1"],
  lastKey: "ns-a/config-7",
  count: 42,
};

describe("parseProgress", () => {
  it.each([
    { name: "absent", text: undefined },
    { name: "empty", text: "" },
  ])("$name annotation: no progress, no problem", ({ text }) => {
    expect(parseProgress(text)).toEqual({ progress: undefined });
  });

  it("reads what formatProgress wrote", () => {
    expect(parseProgress(formatProgress(progress))).toEqual({ progress });
  });

  it("ignores fields it does not know (a newer writer may add some)", () => {
    expect(parseProgress(JSON.stringify({ ...progress, startedAt: "2024-01-01T00:00:00Z" }))).toEqual({
      progress,
    });
  });

  it.each([
    { name: "not JSON", text: "{lastKey: a", problem: /^not JSON/ },
    { name: "a JSON string", text: '"v1beta1"', problem: /not a JSON object/ },
    { name: "a JSON array", text: "[1,2]", problem: /not a JSON object/ },
    { name: "null", text: "null", problem: /not a JSON object/ },
    {
      name: "no storageVersion",
      text: JSON.stringify({ ...progress, storageVersion: undefined }),
      problem: /storageVersion/,
    },
    {
      name: "empty storageVersion",
      text: JSON.stringify({ ...progress, storageVersion: "" }),
      problem: /storageVersion/,
    },
    {
      name: "storedVersions a string",
      text: JSON.stringify({ ...progress, storedVersions: "v1" }),
      problem: /storedVersions/,
    },
    {
      name: "storedVersions with a number",
      text: JSON.stringify({ ...progress, storedVersions: ["v1", 2] }),
      problem: /storedVersions/,
    },
    { name: "no lastKey", text: JSON.stringify({ ...progress, lastKey: undefined }), problem: /lastKey/ },
    { name: "lastKey a number", text: JSON.stringify({ ...progress, lastKey: 7 }), problem: /lastKey/ },
    { name: "negative count", text: JSON.stringify({ ...progress, count: -1 }), problem: /count/ },
    { name: "fractional count", text: JSON.stringify({ ...progress, count: 1.5 }), problem: /count/ },
    { name: "count a string", text: JSON.stringify({ ...progress, count: "42" }), problem: /count/ },
  ])("$name: no progress, and says why", ({ text, problem }) => {
    const parsed = parseProgress(text);
    expect(parsed.progress).toBeUndefined();
    expect("problem" in parsed ? parsed.problem : undefined).toMatch(problem);
  });
});

describe("formatProgress and progressPatch", () => {
  it("writes compact JSON with a fixed field order, whatever order the input has", () => {
    const shuffled = {
      count: 42,
      lastKey: "ns-a/config-7",
      storedVersions: ["v1alpha1", "v1beta1"],
      storageVersion: "v1beta1",
    };
    expect(formatProgress(shuffled)).toBe(
      '{"storageVersion":"v1beta1","storedVersions":["v1alpha1","v1beta1"],"lastKey":"ns-a/config-7","count":42}',
    );
  });

  it.each([
    { name: "records progress", arg: progress, value: formatProgress(progress) },
    { name: "removes the annotation", arg: undefined, value: null },
  ])("the merge patch $name", ({ arg, value }) => {
    expect(progressPatch(arg)).toEqual({
      metadata: { annotations: { [STORAGE_MIGRATION_ANNOTATION]: value } },
    });
  });
});

describe("the rewrite and storedVersions patches", () => {
  it("rewrites with an empty merge patch, which changes no field", () => {
    expect(REWRITE_PATCH).toEqual({});
    expect(JSON.stringify(REWRITE_PATCH)).toBe("{}");
  });

  it("trims storedVersions only if it still is what the migration started from", () => {
    expect(storedVersionsPatch(["v1alpha1", "v1beta1"], "v1beta1")).toEqual([
      { op: "test", path: "/status/storedVersions", value: ["v1alpha1", "v1beta1"] },
      { op: "replace", path: "/status/storedVersions", value: ["v1beta1"] },
    ]);
  });
});

describe("object keys", () => {
  it.each([
    { metadata: { namespace: "ns", name: "a" }, key: "ns/a" },
    { metadata: { name: "cluster-scoped" }, key: "cluster-scoped" },
    { metadata: { namespace: "", name: "empty-namespace" }, key: "empty-namespace" },
  ])("$metadata → $key", ({ metadata, key }) => {
    expect(objectKey(metadata)).toBe(key);
  });

  it.each([
    { a: "a", b: "b", order: -1 },
    { a: "b", b: "a", order: 1 },
    { a: "a", b: "a", order: 0 },
    // Bytewise, as etcd orders: "-" (0x2d) < "/" (0x2f) < digits < lower case; localeCompare disagrees.
    { a: "ns-a/x", b: "ns/x", order: -1 },
    { a: "ns/x", b: "ns0/x", order: -1 },
    { a: "Zeta", b: "alpha", order: -1 },
    { a: "obj-10", b: "obj-9", order: -1 },
    { a: "obj", b: "obj-1", order: -1 },
  ])("compareKeys($a, $b) = $order", ({ a, b, order }) => {
    expect(Math.sign(compareKeys(a, b))).toBe(order);
    expect(Math.sign(compareKeys(b, a))).toBe(0 - order);
  });

  it("sorts a page as etcd lists it", () => {
    const keys = ["ns/b", "ns-2/a", "ns/a", "ns0/a", "ns/a-1"];
    expect([...keys].sort(compareKeys)).toEqual(["ns-2/a", "ns/a", "ns/a-1", "ns/b", "ns0/a"]);
  });

  it.each([
    { key: "ns/a", lastKey: undefined, done: false },
    { key: "ns/a", lastKey: "ns/a", done: true },
    { key: "ns/a", lastKey: "ns/b", done: true },
    { key: "ns/c", lastKey: "ns/b", done: false },
    { key: "ns/b-1", lastKey: "ns/b", done: false },
    { key: "ns-a/z", lastKey: "ns/a", done: true },
    { key: "obj-10", lastKey: "obj-9", done: true },
  ])("isDone($key, last $lastKey) = $done", ({ key, lastKey, done }) => {
    expect(isDone(key, lastKey)).toBe(done);
  });
});

function crd(versions: CrdView["spec"]["versions"], storedVersions: string[] | undefined): CrdView {
  return {
    metadata: { name: "devicepluginconfigs.dpo.dev" },
    spec: { group: "dpo.dev", names: { plural: "devicepluginconfigs" }, scope: "Cluster", versions },
    ...(storedVersions === undefined ? {} : { status: { storedVersions } }),
  };
}

const twoVersions = [
  { name: "v1alpha1", served: true, storage: false },
  { name: "v1beta1", served: true, storage: true },
];

describe("planMigration", () => {
  it.each([
    { name: "only the storage version stored", stored: ["v1beta1"], needed: false },
    { name: "an old version stored too", stored: ["v1alpha1", "v1beta1"], needed: true },
    { name: "the storage version listed first", stored: ["v1beta1", "v1alpha1"], needed: true },
    { name: "only an old version stored", stored: ["v1alpha1"], needed: true },
    { name: "the storage version twice", stored: ["v1beta1", "v1beta1"], needed: true },
    { name: "no storedVersions yet", stored: undefined, needed: true },
    { name: "an empty storedVersions", stored: [], needed: true },
  ])("$name ($stored): needed = $needed", ({ stored, needed }) => {
    const plan = planMigration(crd(twoVersions, stored));
    expect(plan.needed).toBe(needed);
    expect(plan.storageVersion).toBe("v1beta1");
  });

  it("names what the migration works on", () => {
    expect(planMigration(crd(twoVersions, ["v1alpha1", "v1beta1"]))).toEqual({
      needed: true,
      storageVersion: "v1beta1",
      storedVersions: ["v1alpha1", "v1beta1"],
      group: "dpo.dev",
      plural: "devicepluginconfigs",
      namespaced: false,
    });
  });

  it.each([
    { name: "no storage version", versions: [{ name: "v1", storage: false }] },
    {
      name: "two storage versions",
      versions: [
        { name: "v1", storage: true },
        { name: "v2", storage: true },
      ],
    },
  ])("refuses a CRD with $name", ({ versions }) => {
    expect(() => planMigration(crd(versions, ["v1"]))).toThrow(/storage versions/);
  });
});

describe("resumePoint", () => {
  it.each([
    {
      name: "no progress",
      recorded: undefined,
      storage: "v1beta1",
      stored: ["v1alpha1", "v1beta1"],
      resumes: false,
    },
    {
      name: "the same migration",
      recorded: progress,
      storage: "v1beta1",
      stored: ["v1alpha1", "v1beta1"],
      resumes: true,
    },
    {
      name: "storedVersions in another order",
      recorded: progress,
      storage: "v1beta1",
      stored: ["v1beta1", "v1alpha1"],
      resumes: true,
    },
    {
      name: "another storage version",
      recorded: progress,
      storage: "v1",
      stored: ["v1alpha1", "v1beta1"],
      resumes: false,
    },
    {
      name: "a version stored since",
      recorded: progress,
      storage: "v1beta1",
      stored: ["v1alpha1", "v1beta1", "v1"],
      resumes: false,
    },
    {
      name: "a version trimmed since",
      recorded: progress,
      storage: "v1beta1",
      stored: ["v1beta1"],
      resumes: false,
    },
  ])("$name: resumes = $resumes", ({ recorded, storage, stored, resumes }) => {
    expect(resumePoint(recorded, storage, stored)).toEqual(
      resumes ? { lastKey: progress.lastKey, count: progress.count } : undefined,
    );
  });
});

describe("retryDelayMs", () => {
  const policy = { attempts: 5, baseDelayMs: 200, maxDelayMs: 5_000 };
  it.each([
    { attempt: 1, retryAfter: undefined, delay: 200 },
    { attempt: 2, retryAfter: undefined, delay: 400 },
    { attempt: 4, retryAfter: undefined, delay: 1_600 },
    { attempt: 10, retryAfter: undefined, delay: 5_000 },
    { attempt: 1, retryAfter: 2, delay: 2_000 },
    { attempt: 4, retryAfter: 1, delay: 1_600 },
    { attempt: 1, retryAfter: 3_600, delay: 5_000 },
  ])("try $attempt, Retry-After $retryAfter s → $delay ms", ({ attempt, retryAfter, delay }) => {
    expect(retryDelayMs(attempt, retryAfter, policy)).toBe(delay);
  });
});

/** An API server in memory: one cluster-scoped CRD, its objects, and errors injected per request. */
class FakeApi {
  crd: CrdView = crd(twoVersions, ["v1alpha1", "v1beta1"]);
  readonly objects = Array.from({ length: 10 }, (_, i) => `config-${i}`);
  /** Objects patched, in order, one entry per accepted patch. */
  readonly patched: string[] = [];
  /** Consulted before each request; an error it returns is thrown as the API server's answer. */
  inject: (req: KubeRequest) => Error | undefined = () => undefined;
  /** Runs just before the storedVersions patch is evaluated (another writer getting there first). */
  beforeStatusPatch: () => void = () => undefined;

  handle(req: KubeRequest): unknown {
    const injected = this.inject(req);
    if (injected) throw injected;
    const crdPath = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${this.crd.metadata.name}`;
    if (req.path === crdPath && req.method === "GET") return structuredClone(this.crd);
    if (req.path === crdPath && req.method === "PATCH") {
      const patch = req.body as { metadata: { annotations: Record<string, string | null> } };
      const annotations = { ...this.crd.metadata.annotations };
      for (const [k, v] of Object.entries(patch.metadata.annotations)) {
        if (v === null) delete annotations[k];
        else annotations[k] = v;
      }
      this.crd.metadata.annotations = annotations;
      return structuredClone(this.crd);
    }
    if (req.path === `${crdPath}/status`) {
      this.beforeStatusPatch();
      const [test, replace] = req.body as { value: string[] }[];
      if (JSON.stringify(test?.value) !== JSON.stringify(this.crd.status?.storedVersions)) {
        throw new InvalidError(
          "the server rejected our request: testing value /status/storedVersions failed",
          {
            code: 422,
          },
        );
      }
      this.crd.status = { storedVersions: replace?.value ?? [] };
      return structuredClone(this.crd);
    }
    if (req.path === "/apis/dpo.dev/v1beta1/devicepluginconfigs") {
      const start = Number(req.query?.["continue"] ?? 0);
      const end = start + Number(req.query?.["limit"]);
      return {
        items: this.objects.slice(start, end).map((name) => ({ metadata: { name } })),
        metadata: end < this.objects.length ? { continue: String(end) } : {},
      };
    }
    const name = /^\/apis\/dpo\.dev\/v1beta1\/devicepluginconfigs\/(.+)$/.exec(req.path)?.[1];
    if (name !== undefined && req.method === "PATCH") {
      expect(req.body).toEqual({});
      expect(req.contentType).toBe("application/merge-patch+json");
      this.patched.push(name);
      return { metadata: { name } };
    }
    throw new Error(`unexpected request ${req.method} ${req.path}`);
  }

  progress(): unknown {
    const text = this.crd.metadata.annotations?.[STORAGE_MIGRATION_ANNOTATION];
    return text === undefined ? undefined : JSON.parse(text);
  }
}

/** Backoff sleeps end at once, so retries cost no test time. */
const instantClock: Clock = {
  now: () => 0,
  setTimer(callback) {
    setImmediate(callback);
    return () => undefined;
  },
};

describe("migrateStorage against an in-memory API", () => {
  let api: FakeApi;
  let recorded: { type: string; reason: string; message: string }[];
  const run = () =>
    migrateStorage({
      kubeConfig: {} as never,
      crdName: "devicepluginconfigs.dpo.dev",
      logger: pino({ level: "silent" }),
      events: {
        record: (_obj, type, reason, message) => {
          recorded.push({ type, reason, message });
          return Promise.resolve();
        },
      },
      pageSize: 4,
      clock: instantClock,
    });

  beforeEach(() => {
    api = new FakeApi();
    recorded = [];
    vi.mocked(kubeRequest).mockClear();
    vi.mocked(kubeRequest).mockImplementation((_kc, req) =>
      Promise.resolve().then(() => api.handle(req) as never),
    );
  });

  it("retries throttling and server errors, counts the retries, and still patches every object once", async () => {
    let failures = 3;
    api.inject = (req) =>
      (req.path.endsWith("/config-5") || req.path.endsWith("devicepluginconfigs")) && failures-- > 0
        ? new TransientError("etcdserver: request timed out", { code: 503 })
        : undefined;
    const outcome = await run();
    expect(outcome).toEqual({
      state: "Migrated",
      storageVersion: "v1beta1",
      from: ["v1alpha1"],
      objects: 10,
      retries: 3,
    });
    expect(api.patched).toEqual(api.objects);
    expect(api.crd.status?.storedVersions).toEqual(["v1beta1"]);
    expect(api.progress()).toBeUndefined();
    expect(recorded).toEqual([
      {
        type: "Normal",
        reason: "StorageMigrated",
        message: "rewrote 10 objects from v1alpha1 to v1beta1; storedVersions is now [v1beta1]",
      },
    ]);
  });

  it("lists again when a continue token expired, without patching any object twice", async () => {
    let expired = false;
    api.inject = (req) => {
      if (req.query?.["continue"] === "8" && !expired) {
        expired = true;
        return new GoneError("The provided continue parameter is too old", { code: 410, reason: "Expired" });
      }
      return undefined;
    };
    expect(await run()).toMatchObject({ state: "Migrated", objects: 10 });
    expect(expired).toBe(true);
    expect(api.patched).toEqual(api.objects);
  });

  it("gives up when the API server stays unavailable, keeping the progress of the pages done", async () => {
    api.inject = (req) =>
      req.path.endsWith("/config-6") ? new TransientError("connection refused", { code: 0 }) : undefined;
    await expect(run()).rejects.toBeInstanceOf(TransientError);
    expect(api.progress()).toEqual({
      storageVersion: "v1beta1",
      storedVersions: ["v1alpha1", "v1beta1"],
      lastKey: "config-3",
      count: 4,
    });
    expect(api.crd.status?.storedVersions).toEqual(["v1alpha1", "v1beta1"]);
  });

  it("does not drop a version stored while it ran: the storedVersions test fails and it says so", async () => {
    api.beforeStatusPatch = () => {
      api.crd.status = { storedVersions: ["v1alpha1", "v1beta1", "v1"] };
    };
    const outcome = await run();
    expect(outcome).toMatchObject({
      state: "StoredVersionsChanged",
      expected: ["v1alpha1", "v1beta1"],
      current: ["v1alpha1", "v1beta1", "v1"],
    });
    expect(api.crd.status?.storedVersions).toEqual(["v1alpha1", "v1beta1", "v1"]);
    expect(recorded).toEqual([]);
  });

  it("reports every object the API server refuses, and records progress only up to the first", async () => {
    api.inject = (req) =>
      req.path.endsWith("/config-2") || req.path.endsWith("/config-7")
        ? new InvalidError("spec.backend: Invalid value", { code: 422 })
        : undefined;
    const outcome = await run();
    expect(outcome).toMatchObject({
      state: "Failed",
      failures: [
        { key: "config-2", message: "spec.backend: Invalid value" },
        { key: "config-7", message: "spec.backend: Invalid value" },
      ],
      objects: 8,
    });
    expect(api.progress()).toMatchObject({ lastKey: "config-1", count: 2 });
    expect(api.crd.status?.storedVersions).toEqual(["v1alpha1", "v1beta1"]);
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ type: "Warning", reason: "StorageMigrationFailed" });
    expect(recorded[0]?.message).toContain("config-2: spec.backend: Invalid value");
  });

  it("writes nothing when storedVersions is only the storage version", async () => {
    api.crd.status = { storedVersions: ["v1beta1"] };
    expect(await run()).toEqual({ state: "UpToDate" });
    expect(vi.mocked(kubeRequest).mock.calls.map(([, req]) => req.method)).toEqual(["GET"]);
  });
});
