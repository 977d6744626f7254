// Runs the storage-version migration of the DevicePluginConfig CRD on the leader: when the CRD lists
// more stored versions than its storage version, once that storage version is in effect, and again
// after every CRD change (checked every few minutes). See storage-migration.ts for the migration itself.
import type { KubeConfig } from "@kubernetes/client-node";
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import { sleep, systemClock } from "../../kube/clock.js";
import type { EventRecorder } from "../../kube/events.js";
import type { WriteFence } from "../../kube/fence.js";
import { kubeRequest } from "../../kube/request.js";
import { CUSTOM_RESOURCE_DEFINITIONS, groupVersionPath, objectPath } from "../../kube/resources.js";
import { planMigration, type CrdView, type MigrationOutcome } from "./plan.js";
import { migrateStorage } from "./storage-migration.js";

/**
 * The API server's storage version hash (k8s.io/apiserver discovery.StorageVersionHash): the first 8 bytes
 * of SHA-256 over `group/version/kind`, base64. Discovery shows it for each resource once the API server
 * stores that resource in that version.
 */
export function storageVersionHash(group: string, version: string, kind: string): string {
  return createHash("sha256")
    .update(`${group}/${version}/${kind}`)
    .digest()
    .subarray(0, 8)
    .toString("base64");
}

interface CrdObject extends CrdView {
  spec: CrdView["spec"] & { names: { plural: string; kind: string } };
}

interface ApiResourceList {
  resources?: { name: string; storageVersionHash?: string }[];
}

export interface StorageMigrationRunnerOptions {
  kubeConfig: KubeConfig;
  crdName: string;
  logger: Logger;
  events?: Pick<EventRecorder, "record">;
  /** Leadership: the migration's writes are checked against it just before they are sent. */
  fence?: WriteFence;
  /** The CRD must have been unchanged this long before a migration starts. */
  settleMs?: number;
  /** Time between checks when nothing needs doing. */
  recheckMs?: number;
  /** Time before trying again after a failed or refused migration. */
  retryMs?: number;
  /** Called with how each migration run ended (its state), or `error` when a check threw. */
  onResult?: (result: MigrationOutcome["state"] | "error") => void;
}

export class StorageMigrationRunner {
  private lastOutcome: MigrationOutcome | undefined;

  constructor(private readonly opts: StorageMigrationRunnerOptions) {}

  /** The outcome of the last migration run, if any. */
  outcome(): MigrationOutcome | undefined {
    return this.lastOutcome;
  }

  /** Checks and migrates until the signal aborts (leadership ends or the operator stops). */
  async run(signal: AbortSignal): Promise<void> {
    const settleMs = this.opts.settleMs ?? 10_000;
    const recheckMs = this.opts.recheckMs ?? 5 * 60_000;
    const retryMs = this.opts.retryMs ?? 60_000;
    const log = this.opts.logger;
    let seen: { resourceVersion: string | undefined; since: number } | undefined;
    while (!signal.aborted) {
      let delay = recheckMs;
      try {
        const crd = await kubeRequest<CrdObject>(this.opts.kubeConfig, {
          method: "GET",
          path: objectPath(CUSTOM_RESOURCE_DEFINITIONS, this.opts.crdName),
          signal,
        });
        const plan = planMigration(crd);
        const now = Date.now();
        if (!plan.needed) {
          seen = undefined;
        } else if (seen === undefined || seen.resourceVersion !== crd.metadata.resourceVersion) {
          // A CRD that just changed may not be in effect in the API server yet: rewriting now could
          // re-encode objects in the old storage version and then trim storedVersions over them.
          seen = { resourceVersion: crd.metadata.resourceVersion, since: now };
          log.info(
            {
              crd: this.opts.crdName,
              storedVersions: plan.storedVersions,
              storageVersion: plan.storageVersion,
            },
            "storage migration needed; waiting for the CRD to settle",
          );
          delay = settleMs;
        } else if (now - seen.since < settleMs) {
          delay = settleMs - (now - seen.since);
        } else if (!(await this.storageInEffect(crd, plan.storageVersion, signal))) {
          log.info(
            { crd: this.opts.crdName },
            "storage migration waits for discovery to show the new storage version",
          );
          delay = 2_000;
        } else {
          const outcome = await migrateStorage({
            kubeConfig: this.opts.kubeConfig,
            crdName: this.opts.crdName,
            logger: log,
            events: this.opts.events,
            signal,
            fence: this.opts.fence,
          });
          this.lastOutcome = outcome;
          this.opts.onResult?.(outcome.state);
          if (outcome.state === "Aborted") return;
          if (outcome.state === "Failed" || outcome.state === "StoredVersionsChanged") delay = retryMs;
          else seen = undefined;
        }
      } catch (err) {
        if (signal.aborted) return;
        log.error({ crd: this.opts.crdName, err: (err as Error).message }, "storage migration check failed");
        this.opts.onResult?.("error");
        delay = retryMs;
      }
      await sleep(systemClock, delay, signal);
    }
  }

  /** Discovery shows the storage version hash of `storageVersion`: the API server stores in it. */
  private async storageInEffect(
    crd: CrdObject,
    storageVersion: string,
    signal: AbortSignal,
  ): Promise<boolean> {
    const { group, names } = crd.spec;
    const list = await kubeRequest<ApiResourceList>(this.opts.kubeConfig, {
      method: "GET",
      path: groupVersionPath({ group, version: storageVersion }),
      signal,
    });
    const resource = list.resources?.find((r) => r.name === names.plural);
    return resource?.storageVersionHash === storageVersionHash(group, storageVersion, names.kind);
  }
}
