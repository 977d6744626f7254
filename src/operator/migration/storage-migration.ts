// Storage-version migration for one CRD, the way kube-storage-version-migrator does it: rewrite every object
// so etcd holds it in the current storage version, then (and only then) trim status.storedVersions, so an
// old version can later be dropped from the CRD without leaving objects nobody can decode.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { backoffDelayMs } from "../../kube/backoff.js";
import { sleep, systemClock, type Clock } from "../../kube/clock.js";
import { ConflictError, GoneError, InvalidError, NotFoundError, TransientError } from "../../kube/errors.js";
import type { EventRecorder, InvolvedObject } from "../../kube/events.js";
import { kubeRequest } from "../../kube/request.js";

/** Where progress is kept between runs: on the CRD itself, so it survives restarts and leader changes. */
export const STORAGE_MIGRATION_ANNOTATION = "dpo.dev/storage-migration";
/** The manager name the API server records for the annotation (managedFields). */
export const STORAGE_MIGRATION_FIELD_MANAGER = "dpo-storage-migration";

const CRD_API_VERSION = "apiextensions.k8s.io/v1";
const CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const DEFAULT_PAGE_SIZE = 500;
const MERGE_PATCH = "application/merge-patch+json";
const JSON_PATCH = "application/json-patch+json";
/** How many failed objects the Warning Event names; the outcome and the log carry all of them. */
const FAILURES_IN_EVENT = 5;

/** The fields of a CustomResourceDefinition this module reads. */
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

function sameList(a: string[], b: string[]): boolean {
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

interface Counters {
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

export interface MigrationOptions {
  kubeConfig: KubeConfig;
  /** e.g. devicepluginconfigs.dpo.dev */
  crdName: string;
  logger: Logger;
  events?: Pick<EventRecorder, "record">;
  /** Stops the run between objects; what was done is recorded in the annotation. */
  signal?: AbortSignal;
  /** Objects per list page, and so per progress write. */
  pageSize?: number;
  retry?: RetryPolicy;
  clock?: Clock;
}

interface ListedObject {
  metadata?: { name?: string; namespace?: string };
}

interface ListPage {
  metadata?: { continue?: string };
  items?: ListedObject[];
}

/**
 * Rewrites every object of the CRD in its storage version, then trims status.storedVersions to it.
 * Resolves with what happened; rejects only when the API server cannot be reached or refuses this
 * client (missing CRD, forbidden, transient errors that outlast the retries) — progress is kept.
 *
 * Call it once the API servers store in the new version: for a moment after a CRD update an API server
 * still encodes in the old one, so the empty patches would be no-ops and storedVersions would be trimmed
 * over objects still in the old version (test/integration/storage-migration.test.ts waits for this).
 */
export async function migrateStorage(options: MigrationOptions): Promise<MigrationOutcome> {
  return new StorageMigration(options).run();
}

class StorageMigration {
  private readonly kc: KubeConfig;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly retry: RetryPolicy;
  private readonly pageSize: number;
  private retries = 0;

  constructor(private readonly opts: MigrationOptions) {
    this.kc = opts.kubeConfig;
    this.log = opts.logger.child({ crd: opts.crdName });
    this.clock = opts.clock ?? systemClock;
    this.retry = opts.retry ?? DEFAULT_RETRY;
    this.pageSize = opts.pageSize ?? DEFAULT_PAGE_SIZE;
  }

  async run(): Promise<MigrationOutcome> {
    const crdPath = `${CRD_PATH}/${encodeURIComponent(this.opts.crdName)}`;
    const crd = await this.withRetry("read the CRD", () =>
      kubeRequest<CrdView>(this.kc, { method: "GET", path: crdPath }),
    );
    const plan = planMigration(crd);
    if (!plan.needed) return { state: "UpToDate" };
    const { storageVersion, storedVersions } = plan;
    const from = storedVersions.filter((v) => v !== storageVersion);

    const parsed = parseProgress(crd.metadata.annotations?.[STORAGE_MIGRATION_ANNOTATION]);
    if (parsed.progress === undefined && parsed.problem !== undefined) {
      this.log.warn(
        { annotation: STORAGE_MIGRATION_ANNOTATION, problem: parsed.problem },
        "ignoring unreadable storage migration progress; starting from the first object",
      );
    }
    const resume = resumePoint(parsed.progress, storageVersion, storedVersions);
    if (resume !== undefined) {
      this.log.info({ lastKey: resume.lastKey, objects: resume.count }, "resuming storage migration");
    } else if (parsed.progress !== undefined) {
      this.log.info(
        { recorded: parsed.progress, storageVersion, storedVersions },
        "recorded progress belongs to another migration; starting from the first object",
      );
    }
    this.log.info({ from, to: storageVersion, storedVersions }, "storage migration started");

    // `done` is the prefix of keys all rewritten: the only progress worth recording, because a resumed
    // run skips everything up to it. After a failure it stops moving, so the failed object is retried
    // next time, while this run goes on past it (`seen`) to find every other object that fails.
    let done: { lastKey: string | undefined; count: number } = {
      lastKey: resume?.lastKey,
      count: resume?.count ?? 0,
    };
    let recorded = done.lastKey;
    let seen = done.lastKey;
    let rewrittenPastFailure = 0;
    const failures: MigrationFailure[] = [];
    const counters = (): Counters => ({ objects: done.count + rewrittenPastFailure, retries: this.retries });
    const saveProgress = async (): Promise<void> => {
      if (done.lastKey === undefined || done.lastKey === recorded) return;
      const progress = { storageVersion, storedVersions, lastKey: done.lastKey, count: done.count };
      await this.withRetry("record progress", () => this.patchCrd(crdPath, progressPatch(progress)));
      recorded = done.lastKey;
    };

    const listPath = `/apis/${plan.group}/${storageVersion}/${plan.plural}`;
    let continueToken: string | undefined;
    let page = 0;
    while (!this.opts.signal?.aborted) {
      let list: ListPage;
      try {
        list = await this.withRetry("list objects", () =>
          kubeRequest<ListPage>(this.kc, {
            method: "GET",
            path: listPath,
            query: { limit: this.pageSize, continue: continueToken },
          }),
        );
      } catch (err) {
        // The continue token outlived etcd's compaction: list again from the start; the objects done
        // so far are skipped by key, so this costs a list, not a rewrite.
        if (err instanceof GoneError && continueToken !== undefined) {
          this.log.info({ lastKey: seen }, "list continuation expired; listing again");
          continueToken = undefined;
          continue;
        }
        throw err;
      }
      page++;
      const items = [...(list.items ?? [])]
        .map((item) => ({ key: objectKey(item.metadata ?? {}), metadata: item.metadata ?? {} }))
        .sort((a, b) => compareKeys(a.key, b.key));
      let skipped = 0;
      for (const { key, metadata } of items) {
        if (this.opts.signal?.aborted) break;
        if (isDone(key, seen)) {
          skipped++;
          continue;
        }
        const result = await this.rewrite(plan, storageVersion, metadata);
        seen = key;
        if (typeof result === "object") {
          failures.push({ key, message: result.failed });
          this.log.warn({ key, err: result.failed }, "object could not be rewritten in the storage version");
        } else if (failures.length === 0) {
          done = { lastKey: key, count: done.count + (result === "rewritten" ? 1 : 0) };
        } else if (result === "rewritten") {
          rewrittenPastFailure++;
        }
      }
      await saveProgress();
      this.log.info(
        {
          page,
          items: items.length,
          skipped,
          objects: counters().objects,
          lastKey: seen,
          failures: failures.length,
        },
        "storage migration progress",
      );
      continueToken = list.metadata?.continue || undefined;
      if (continueToken === undefined) break;
    }

    if (this.opts.signal?.aborted) {
      await saveProgress();
      this.log.info({ lastKey: done.lastKey, objects: done.count }, "storage migration stopped; will resume");
      return { state: "Aborted", storageVersion, lastKey: done.lastKey, ...counters() };
    }

    if (failures.length > 0) {
      const named = failures
        .slice(0, FAILURES_IN_EVENT)
        .map((f) => `${f.key}: ${f.message}`)
        .join("; ");
      const more =
        failures.length > FAILURES_IN_EVENT ? ` (and ${failures.length - FAILURES_IN_EVENT} more)` : "";
      this.log.error(
        { failures, storageVersion, storedVersions },
        "storage migration failed; storedVersions left as is",
      );
      await this.opts.events?.record(
        this.involved(crd),
        "Warning",
        "StorageMigrationFailed",
        `could not rewrite ${failures.length} object(s) in ${storageVersion}, so storedVersions stays ` +
          `[${storedVersions.join(", ")}]: ${named}${more}`,
      );
      return { state: "Failed", storageVersion, failures, ...counters() };
    }

    try {
      await this.withRetry("trim storedVersions", () =>
        kubeRequest(this.kc, {
          method: "PATCH",
          path: `${crdPath}/status`,
          query: { fieldManager: STORAGE_MIGRATION_FIELD_MANAGER },
          body: storedVersionsPatch(storedVersions, storageVersion),
          contentType: JSON_PATCH,
        }),
      );
    } catch (err) {
      if (!(err instanceof InvalidError || err instanceof ConflictError)) throw err;
      const now = await this.withRetry("read the CRD", () =>
        kubeRequest<CrdView>(this.kc, { method: "GET", path: crdPath }),
      );
      const current = now.status?.storedVersions ?? [];
      // Unchanged storedVersions means the server refused the patch for another reason: not ours to hide.
      if (sameList(current, storedVersions)) throw err;
      this.log.info(
        { expected: storedVersions, current, err: err.message },
        "storedVersions changed during the storage migration; it must run again",
      );
      return {
        state: "StoredVersionsChanged",
        storageVersion,
        expected: storedVersions,
        current,
        message: err.message,
        ...counters(),
      };
    }

    try {
      await this.withRetry("remove the progress annotation", () =>
        this.patchCrd(crdPath, progressPatch(undefined)),
      );
    } catch (err) {
      // storedVersions is already trimmed, so the migration is done; a leftover annotation names
      // storedVersions that no longer exist and is ignored (and overwritten) by any later migration.
      this.log.warn({ err: String(err) }, "could not remove the storage migration progress annotation");
    }
    const message =
      `rewrote ${done.count} objects from ${from.join(", ") || storageVersion} to ${storageVersion}; ` +
      `storedVersions is now [${storageVersion}]`;
    this.log.info({ objects: done.count, retries: this.retries, from, to: storageVersion }, message);
    await this.opts.events?.record(this.involved(crd), "Normal", "StorageMigrated", message);
    return { state: "Migrated", storageVersion, from, ...counters() };
  }

  /** Patches one object with the empty patch: rewritten, gone meanwhile, or refused (and why). */
  private async rewrite(
    plan: Extract<MigrationPlan, { needed: true }>,
    version: string,
    metadata: { name?: string; namespace?: string },
  ): Promise<"rewritten" | "gone" | { failed: string }> {
    const name = encodeURIComponent(metadata.name ?? "");
    const path =
      plan.namespaced && metadata.namespace
        ? `/apis/${plan.group}/${version}/namespaces/${encodeURIComponent(metadata.namespace)}/${plan.plural}/${name}`
        : `/apis/${plan.group}/${version}/${plan.plural}/${name}`;
    try {
      await this.withRetry(
        `rewrite ${objectKey(metadata)}`,
        () =>
          kubeRequest(this.kc, {
            method: "PATCH",
            path,
            query: { fieldManager: STORAGE_MIGRATION_FIELD_MANAGER },
            body: REWRITE_PATCH,
            contentType: MERGE_PATCH,
          }),
        // The empty patch carries no resourceVersion, so a conflict only means a concurrent write won
        // the race: sending it again is always right.
        true,
      );
      return "rewritten";
    } catch (err) {
      // Deleted since the list: nothing left to migrate.
      if (err instanceof NotFoundError) return "gone";
      // Still failing after the retries, the server is unwell rather than refusing this object: give up
      // the run (progress is recorded) instead of failing every remaining object the same way.
      if (err instanceof TransientError) throw err;
      return { failed: err instanceof Error ? err.message : String(err) };
    }
  }

  private patchCrd(crdPath: string, body: object): Promise<unknown> {
    return kubeRequest(this.kc, {
      method: "PATCH",
      path: crdPath,
      query: { fieldManager: STORAGE_MIGRATION_FIELD_MANAGER },
      body,
      contentType: MERGE_PATCH,
    });
  }

  private involved(crd: CrdView): InvolvedObject {
    return {
      apiVersion: CRD_API_VERSION,
      kind: "CustomResourceDefinition",
      metadata: { name: crd.metadata.name, uid: crd.metadata.uid },
    };
  }

  /**
   * Runs `call`, trying again with backoff after transient errors (throttling, 5xx, no connection) and,
   * where the caller says a resend is safe, conflicts.
   */
  private async withRetry<T>(what: string, call: () => Promise<T>, retryConflicts = false): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await call();
      } catch (err) {
        const retryable =
          err instanceof TransientError ||
          (retryConflicts && err instanceof ConflictError && !err.alreadyExists);
        if (!retryable || attempt >= this.retry.attempts || this.opts.signal?.aborted) throw err;
        const { retryAfterSeconds, message } = err;
        const delayMs = retryDelayMs(attempt, retryAfterSeconds, this.retry);
        this.retries++;
        this.log.debug({ what, attempt, delayMs, err: message }, "API error worth retrying; retrying");
        await sleep(this.clock, delayMs, this.opts.signal);
      }
    }
  }
}
