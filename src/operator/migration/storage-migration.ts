// Storage-version migration for one CRD, the way kube-storage-version-migrator does it: rewrite every object
// so etcd holds it in the current storage version, then (and only then) trim status.storedVersions, so an
// old version can later be dropped from the CRD without leaving objects nobody can decode. The decisions
// (plan, resume point, progress annotation, patches, retry delays) are pure, in plan.ts; this is the I/O.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { sleep, systemClock, type Clock } from "../../kube/clock.js";
import { ConflictError, GoneError, InvalidError, NotFoundError, TransientError } from "../../kube/errors.js";
import type { EventRecorder, InvolvedObject } from "../../kube/events.js";
import type { WriteFence } from "../../kube/fence.js";
import { kubeRequest } from "../../kube/request.js";
import { collectionPath, CUSTOM_RESOURCE_DEFINITIONS, objectPath } from "../../kube/resources.js";
import {
  compareKeys,
  DEFAULT_RETRY,
  isDone,
  objectKey,
  parseProgress,
  planMigration,
  progressPatch,
  resumePoint,
  retryDelayMs,
  REWRITE_PATCH,
  sameList,
  STORAGE_MIGRATION_ANNOTATION,
  storedVersionsPatch,
  RunProgress,
  type Counters,
  type CrdView,
  type MigrationOutcome,
  type MigrationPlan,
  type RetryPolicy,
  type RewriteResult,
} from "./plan.js";

/** The manager name the API server records for the annotation (managedFields). */
export const STORAGE_MIGRATION_FIELD_MANAGER = "dpo-storage-migration";

const CRD_API_VERSION = "apiextensions.k8s.io/v1";
const DEFAULT_PAGE_SIZE = 500;
const MERGE_PATCH = "application/merge-patch+json";
const JSON_PATCH = "application/json-patch+json";
/** How many failed objects the Warning Event names; the outcome and the log carry all of them. */
const FAILURES_IN_EVENT = 5;

export interface MigrationOptions {
  kubeConfig: KubeConfig;
  /** e.g. devicepluginconfigs.dpo.dev */
  crdName: string;
  logger: Logger;
  events?: Pick<EventRecorder, "record">;
  /** Stops the run between objects; what was done is recorded in the annotation. */
  signal?: AbortSignal;
  /** Leadership: every write is checked against it just before it is sent. */
  fence?: WriteFence | undefined;
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

type NeededPlan = Extract<MigrationPlan, { needed: true }>;

/** The versions a migration moves objects from: every stored version but the storage version. */
function fromVersions(plan: NeededPlan): string[] {
  return plan.storedVersions.filter((v) => v !== plan.storageVersion);
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
  private readonly crdPath: string;
  private retries = 0;

  constructor(private readonly opts: MigrationOptions) {
    this.kc = opts.kubeConfig;
    this.log = opts.logger.child({ crd: opts.crdName });
    this.clock = opts.clock ?? systemClock;
    this.retry = opts.retry ?? DEFAULT_RETRY;
    this.pageSize = opts.pageSize ?? DEFAULT_PAGE_SIZE;
    this.crdPath = objectPath(CUSTOM_RESOURCE_DEFINITIONS, opts.crdName);
  }

  async run(): Promise<MigrationOutcome> {
    const crd = await this.readCrd();
    const plan = planMigration(crd);
    if (!plan.needed) return { state: "UpToDate" };
    const run = new RunProgress(this.resumePointOf(crd, plan));
    this.log.info(
      { from: fromVersions(plan), to: plan.storageVersion, storedVersions: plan.storedVersions },
      "storage migration started",
    );
    await this.rewriteAll(plan, run);
    if (this.opts.signal?.aborted) return this.stopped(plan, run);
    if (run.failures.length > 0) return this.failed(crd, plan, run);
    return (await this.trimStoredVersions(plan, run)) ?? (await this.migrated(crd, plan, run));
  }

  private readCrd(): Promise<CrdView> {
    return this.withRetry("read the CRD", () =>
      kubeRequest<CrdView>(this.kc, { method: "GET", path: this.crdPath }),
    );
  }

  /** Where the progress annotation says to resume; undefined (from the start) when it is of no use. */
  private resumePointOf(crd: CrdView, plan: NeededPlan): { lastKey: string; count: number } | undefined {
    const { storageVersion, storedVersions } = plan;
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
    return resume;
  }

  /** Rewrites the objects page by page past the resume point, recording progress after each page. */
  private async rewriteAll(plan: NeededPlan, run: RunProgress): Promise<void> {
    const listPath = collectionPath({
      group: plan.group,
      version: plan.storageVersion,
      plural: plan.plural,
      namespaced: plan.namespaced,
    });
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
          this.log.info({ lastKey: run.seen }, "list continuation expired; listing again");
          continueToken = undefined;
          continue;
        }
        throw err;
      }
      page++;
      const { items, skipped } = await this.rewritePage(plan, list, run);
      await this.saveProgress(plan, run);
      this.log.info(
        { page, items, skipped, objects: run.objects, lastKey: run.seen, failures: run.failures.length },
        "storage migration progress",
      );
      continueToken = list.metadata?.continue || undefined;
      if (continueToken === undefined) break;
    }
  }

  /** Rewrites, in key order, the objects of one page not done before; how many it held and skipped. */
  private async rewritePage(
    plan: NeededPlan,
    list: ListPage,
    run: RunProgress,
  ): Promise<{ items: number; skipped: number }> {
    const items = [...(list.items ?? [])]
      .map((item) => ({ key: objectKey(item.metadata ?? {}), metadata: item.metadata ?? {} }))
      .sort((a, b) => compareKeys(a.key, b.key));
    let skipped = 0;
    for (const { key, metadata } of items) {
      if (this.opts.signal?.aborted) break;
      if (isDone(key, run.seen)) {
        skipped++;
        continue;
      }
      const result = await this.rewrite(plan, metadata);
      run.add(key, result);
      if (typeof result === "object") {
        this.log.warn({ key, err: result.failed }, "object could not be rewritten in the storage version");
      }
    }
    return { items: items.length, skipped };
  }

  /** Records the done prefix in the annotation when it moved since it was last recorded. */
  private async saveProgress(plan: NeededPlan, run: RunProgress): Promise<void> {
    const { lastKey, count } = run.done;
    if (lastKey === undefined || lastKey === run.recorded) return;
    const { storageVersion, storedVersions } = plan;
    const progress = { storageVersion, storedVersions, lastKey, count };
    await this.withRetry("record progress", () => this.patchCrd(progressPatch(progress)));
    run.recorded = lastKey;
  }

  private counters(run: RunProgress): Counters {
    return { objects: run.objects, retries: this.retries };
  }

  /** The signal aborted the run: progress is recorded for the next one. */
  private async stopped(plan: NeededPlan, run: RunProgress): Promise<MigrationOutcome> {
    await this.saveProgress(plan, run);
    const { lastKey, count } = run.done;
    this.log.info({ lastKey, objects: count }, "storage migration stopped; will resume");
    return { state: "Aborted", storageVersion: plan.storageVersion, lastKey, ...this.counters(run) };
  }

  /** Some objects could not be rewritten: storedVersions stays, and a Warning Event names them. */
  private async failed(crd: CrdView, plan: NeededPlan, run: RunProgress): Promise<MigrationOutcome> {
    const { storageVersion, storedVersions } = plan;
    const failures = run.failures;
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
    return { state: "Failed", storageVersion, failures, ...this.counters(run) };
  }

  /**
   * Trims status.storedVersions to the storage version, on the condition that it is still what the run
   * started from; the StoredVersionsChanged outcome when it is not, undefined when trimmed.
   */
  private async trimStoredVersions(
    plan: NeededPlan,
    run: RunProgress,
  ): Promise<MigrationOutcome | undefined> {
    const { storageVersion, storedVersions } = plan;
    try {
      await this.withRetry("trim storedVersions", () =>
        kubeRequest(this.kc, {
          method: "PATCH",
          path: objectPath(CUSTOM_RESOURCE_DEFINITIONS, this.opts.crdName, undefined, "status"),
          query: { fieldManager: STORAGE_MIGRATION_FIELD_MANAGER },
          fence: this.opts.fence,
          body: storedVersionsPatch(storedVersions, storageVersion),
          contentType: JSON_PATCH,
        }),
      );
      return undefined;
    } catch (err) {
      if (!(err instanceof InvalidError || err instanceof ConflictError)) throw err;
      const now = await this.readCrd();
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
        ...this.counters(run),
      };
    }
  }

  /** storedVersions is trimmed: the progress annotation goes, and a Normal Event says what was done. */
  private async migrated(crd: CrdView, plan: NeededPlan, run: RunProgress): Promise<MigrationOutcome> {
    const { storageVersion } = plan;
    const from = fromVersions(plan);
    try {
      await this.withRetry("remove the progress annotation", () => this.patchCrd(progressPatch(undefined)));
    } catch (err) {
      // storedVersions is already trimmed, so the migration is done; a leftover annotation names
      // storedVersions that no longer exist and is ignored (and overwritten) by any later migration.
      this.log.warn({ err: String(err) }, "could not remove the storage migration progress annotation");
    }
    const count = run.done.count;
    const message =
      `rewrote ${count} objects from ${from.join(", ") || storageVersion} to ${storageVersion}; ` +
      `storedVersions is now [${storageVersion}]`;
    this.log.info({ objects: count, retries: this.retries, from, to: storageVersion }, message);
    await this.opts.events?.record(this.involved(crd), "Normal", "StorageMigrated", message);
    return { state: "Migrated", storageVersion, from, ...this.counters(run) };
  }

  /** Patches one object with the empty patch: rewritten, gone meanwhile, or refused (and why). */
  private async rewrite(
    plan: NeededPlan,
    metadata: { name?: string; namespace?: string },
  ): Promise<RewriteResult> {
    try {
      // A listed object always has a name (and a namespace where the resource is namespaced); one without
      // fails here, as this object's failure.
      const namespace = plan.namespaced ? metadata.namespace : undefined;
      const path = objectPath(
        { group: plan.group, version: plan.storageVersion, plural: plan.plural, namespaced: plan.namespaced },
        metadata.name ?? "",
        namespace,
      );
      await this.withRetry(
        `rewrite ${objectKey(metadata)}`,
        () =>
          kubeRequest(this.kc, {
            method: "PATCH",
            path,
            query: { fieldManager: STORAGE_MIGRATION_FIELD_MANAGER },
            fence: this.opts.fence,
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

  private patchCrd(body: object): Promise<unknown> {
    return kubeRequest(this.kc, {
      method: "PATCH",
      path: this.crdPath,
      query: { fieldManager: STORAGE_MIGRATION_FIELD_MANAGER },
      fence: this.opts.fence,
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
