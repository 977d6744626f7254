// The pure parts of the storage-version migration: whether a CRD needs one, where a run resumes, the
// progress annotation that says so, the patches it sends, how long it waits before trying a request again,
// and how far a run got and how it ended.
import { backoffDelayMs } from "../../kube/backoff.js";

/** Where progress is kept between runs: on the CRD itself, so it survives restarts and leader changes. */
export const STORAGE_MIGRATION_ANNOTATION = "dpo.dev/storage-migration";

/** The fields of a CustomResourceDefinition the migration reads. */
export interface CrdView {
  metadata: { name: string; uid?: string; resourceVersion?: string; annotations?: Record<string, string> };
  spec: {
    group: string;
    names: { plural: string };
    scope: "Namespaced" | "Cluster";
    versions: { name: string; served?: boolean; storage?: boolean }[];
  };
  status?: { storedVersions?: string[] };
}

/** What the progress annotation holds: which migration it belongs to and how far it got. */
export interface MigrationProgress {
  /** The storage version the objects are being rewritten to. */
  storageVersion: string;
  /** status.storedVersions when the migration started; a different list means a different migration. */
  storedVersions: string[];
  /** The key (`namespace/name`, or `name` when cluster-scoped) of the last object of the done prefix. */
  lastKey: string;
  /** Objects rewritten up to and including lastKey. */
  count: number;
}

export type ProgressParse = { progress: MigrationProgress } | { progress: undefined; problem?: string };

/** Parses the annotation; anything malformed is reported as a problem, never thrown, and means "no progress". */
export function parseProgress(text: string | undefined): ProgressParse {
  if (text === undefined || text === "") return { progress: undefined };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { progress: undefined, problem: `not JSON: ${(err as Error).message}` };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { progress: undefined, problem: "not a JSON object" };
  }
  const { storageVersion, storedVersions, lastKey, count } = value as Record<string, unknown>;
  if (typeof storageVersion !== "string" || storageVersion === "") {
    return { progress: undefined, problem: "storageVersion is not a non-empty string" };
  }
  if (!Array.isArray(storedVersions) || !storedVersions.every((v) => typeof v === "string" && v !== "")) {
    return { progress: undefined, problem: "storedVersions is not a list of version names" };
  }
  if (typeof lastKey !== "string" || lastKey === "") {
    return { progress: undefined, problem: "lastKey is not a non-empty string" };
  }
  if (typeof count !== "number" || !Number.isSafeInteger(count) || count < 0) {
    return { progress: undefined, problem: "count is not a non-negative integer" };
  }
  return { progress: { storageVersion, storedVersions: storedVersions as string[], lastKey, count } };
}

/** The annotation value: compact JSON with a fixed field order, so equal progress gives equal text. */
export function formatProgress(progress: MigrationProgress): string {
  return JSON.stringify({
    storageVersion: progress.storageVersion,
    storedVersions: progress.storedVersions,
    lastKey: progress.lastKey,
    count: progress.count,
  });
}

/** The merge patch that records progress on the CRD, or (undefined) removes the annotation. */
export function progressPatch(progress: MigrationProgress | undefined): object {
  return {
    metadata: {
      annotations: {
        [STORAGE_MIGRATION_ANNOTATION]: progress === undefined ? null : formatProgress(progress),
      },
    },
  };
}

/**
 * The patch that rewrites an object: empty, so it changes nothing, yet the API server decodes the object,
 * encodes it in the storage version and compares bytes. It writes only when they differ, i.e. when the
 * object was stored in another version (resourceVersion changes) and is a no-op otherwise.
 */
export const REWRITE_PATCH: Readonly<Record<string, never>> = Object.freeze({});

/**
 * The JSON patch that trims status.storedVersions. The `test` op makes it conditional on the list read
 * when the migration started: a version added meanwhile (a new storage version, whose objects this run
 * did not rewrite) fails the test instead of being dropped.
 */
export function storedVersionsPatch(observed: string[], storageVersion: string): object[] {
  return [
    { op: "test", path: "/status/storedVersions", value: observed },
    { op: "replace", path: "/status/storedVersions", value: [storageVersion] },
  ];
}

/** An object's key in etcd order: `namespace/name`, or `name` for cluster-scoped objects. */
export function objectKey(metadata: { name?: string; namespace?: string }): string {
  const name = metadata.name ?? "";
  return metadata.namespace ? `${metadata.namespace}/${name}` : name;
}

/**
 * Orders keys as etcd does (bytewise). Not localeCompare: that would disagree with the list order, and a
 * resumed run would skip objects it never rewrote. Names are ASCII, so UTF-16 order is byte order.
 */
export function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Whether an object was done by an earlier page or run: its key sorts at or before the last key done. */
export function isDone(key: string, lastKey: string | undefined): boolean {
  return lastKey !== undefined && compareKeys(key, lastKey) <= 0;
}

export type MigrationPlan =
  | { needed: false; storageVersion: string }
  | {
      needed: true;
      storageVersion: string;
      /** status.storedVersions as read: the `test` value of the final patch. */
      storedVersions: string[];
      group: string;
      plural: string;
      namespaced: boolean;
    };

/** Whether the CRD needs a migration: only when storedVersions is anything but exactly [storage version]. */
export function planMigration(crd: CrdView): MigrationPlan {
  const storage = crd.spec.versions.filter((v) => v.storage === true);
  if (storage.length !== 1 || storage[0] === undefined) {
    throw new Error(
      `CRD ${crd.metadata.name} has ${storage.length} storage versions; the API server allows exactly one`,
    );
  }
  const storageVersion = storage[0].name;
  const storedVersions = crd.status?.storedVersions ?? [];
  if (storedVersions.length === 1 && storedVersions[0] === storageVersion) {
    return { needed: false, storageVersion };
  }
  return {
    needed: true,
    storageVersion,
    storedVersions: [...storedVersions],
    group: crd.spec.group,
    plural: crd.spec.names.plural,
    namespaced: crd.spec.scope === "Namespaced",
  };
}

/**
 * Where to resume: the recorded progress counts only for the same migration (storage version and
 * storedVersions, in any order); otherwise it is stale, and the run starts from the beginning.
 */
export function resumePoint(
  progress: MigrationProgress | undefined,
  storageVersion: string,
  storedVersions: string[],
): { lastKey: string; count: number } | undefined {
  if (progress === undefined || progress.storageVersion !== storageVersion) return undefined;
  const sorted = (list: string[]): string[] => [...list].sort(compareKeys);
  if (!sameList(sorted(progress.storedVersions), sorted(storedVersions))) return undefined;
  return { lastKey: progress.lastKey, count: progress.count };
}

/** Whether two lists hold the same items in the same order. */
export function sameList(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

export interface RetryPolicy {
  /** Tries per request, the first included. */
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 5, baseDelayMs: 200, maxDelayMs: 10_000 };

/** Exponential backoff after failed try `attempt` (1-based), stretched to the server's Retry-After. */
export function retryDelayMs(
  attempt: number,
  retryAfterSeconds: number | undefined,
  policy: RetryPolicy,
): number {
  const backoff = { baseMs: policy.baseDelayMs, maxMs: policy.maxDelayMs };
  return backoffDelayMs(backoff, attempt, retryAfterSeconds === undefined ? 0 : retryAfterSeconds * 1000);
}

export interface MigrationFailure {
  /** The object's key, `namespace/name` or `name`. */
  key: string;
  /** The API server's message. */
  message: string;
}

export interface Counters {
  /** Objects rewritten in the storage version, over every run of this migration (deleted ones not counted). */
  objects: number;
  /** Retries of transient errors in this run. */
  retries: number;
}

export type MigrationOutcome =
  | { state: "UpToDate" }
  | ({ state: "Migrated"; storageVersion: string; from: string[] } & Counters)
  /** Some objects could not be rewritten: storedVersions was left alone. */
  | ({ state: "Failed"; storageVersion: string; failures: MigrationFailure[] } & Counters)
  /** storedVersions changed while the objects were rewritten (the `test` op failed); run again later. */
  | ({
      state: "StoredVersionsChanged";
      storageVersion: string;
      expected: string[];
      current: string[];
      message: string;
    } & Counters)
  /** The signal aborted the run; the progress annotation says where the next run resumes. */
  | ({ state: "Aborted"; storageVersion: string; lastKey: string | undefined } & Counters);

/** What became of one object: rewritten in the storage version, deleted meanwhile, or refused. */
export type RewriteResult = "rewritten" | "gone" | { failed: string };

/**
 * How far one run got. `done` is the prefix of keys all rewritten: the only progress worth recording,
 * because a resumed run skips everything up to it. After a failure it stops moving, so the failed object
 * is retried next time, while the run goes on past it (`seen`) to find every other object that fails.
 */
export class RunProgress {
  done: { lastKey: string | undefined; count: number };
  /** The last key of the done prefix the annotation holds. */
  recorded: string | undefined;
  seen: string | undefined;
  rewrittenPastFailure = 0;
  readonly failures: MigrationFailure[] = [];

  constructor(resume: { lastKey: string; count: number } | undefined) {
    this.done = { lastKey: resume?.lastKey, count: resume?.count ?? 0 };
    this.recorded = this.done.lastKey;
    this.seen = this.done.lastKey;
  }

  /** Counts the rewrite of the object at `key`, the next in key order. */
  add(key: string, result: RewriteResult): void {
    this.seen = key;
    if (typeof result === "object") {
      this.failures.push({ key, message: result.failed });
    } else if (this.failures.length === 0) {
      this.done = { lastKey: key, count: this.done.count + (result === "rewritten" ? 1 : 0) };
    } else if (result === "rewritten") {
      this.rewrittenPastFailure++;
    }
  }

  /** Objects rewritten over every run of this migration, those past a failure included. */
  get objects(): number {
    return this.done.count + this.rewrittenPastFailure;
  }
}
