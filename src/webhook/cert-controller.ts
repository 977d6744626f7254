// Keeps the conversion webhook's certificates: every replica reads the one Secret and serves its serving
// certificate; the replica that may write (the leader, or the only replica without leader election)
// renews them (see certificates.ts) and keeps the CRDs' caBundle current. When the Secret holds no
// usable certificate at all (first start, or everything expired) any replica issues one, since the
// leader may be waiting for this webhook. Writes carry the Secret's resourceVersion, so two writers
// never overwrite each other: the second gets a conflict, writes nothing, and reads the first's.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { sleep, systemClock } from "../kube/clock.js";
import {
  collectionPath,
  CUSTOM_RESOURCE_DEFINITIONS,
  isConflict,
  isForbidden,
  isNotFound,
  kubeRequest,
  objectPath,
  SECRETS,
  type EventRecorder,
} from "../kube/index.js";
import {
  planCertificates,
  SECRET_KEYS,
  servingCertificateOf,
  type CertificateFiles,
  type CertificateSettings,
} from "./certificates.js";
import type { ServingCertificate } from "./server.js";

interface SecretObject {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace?: string; resourceVersion?: string; uid?: string };
  type?: string;
  data?: Record<string, string>;
}

interface ServiceReference {
  namespace: string;
  name: string;
}

interface CrdObject {
  metadata: { name: string };
  spec?: {
    conversion?: {
      strategy?: string;
      webhook?: { clientConfig?: { caBundle?: string; service?: Partial<ServiceReference> } };
    };
  };
}

export interface WebhookCertificatesOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  secretName: string;
  /** CRDs whose conversion webhook is this one. */
  crdNames: readonly string[];
  /**
   * The Service this webhook is reached through. A CRD whose clientConfig names another Service (the
   * chart's crds/ name dpo-system, whatever namespace the release is in) is pointed at this one; one
   * with a URL instead (a local run) is left as it is.
   */
  service?: ServiceReference;
  settings: CertificateSettings;
  logger: Logger;
  /** Whether this replica issues, renews and patches (the others only read). */
  canWrite: () => boolean;
  /** Called with the serving certificate whenever it is first found or changes. */
  onCertificate: (cert: ServingCertificate) => void;
  events?: EventRecorder;
  /** Time between two reads of the Secret; default: a tenth of the certificate's lifetime, 1–60 s. */
  intervalMs?: number;
}

const SECRET_KEY_LIST: readonly string[] = Object.values(SECRET_KEYS);

function decode(data: Record<string, string> | undefined): CertificateFiles {
  const files: Record<string, string> = {};
  for (const [key, value] of Object.entries(data ?? {})) {
    if (SECRET_KEY_LIST.includes(key)) files[key] = Buffer.from(value, "base64").toString("utf8");
  }
  return files;
}

function othersOf(data: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(data ?? {}).filter(([key]) => !SECRET_KEY_LIST.includes(key)));
}

function encode(files: CertificateFiles): Record<string, string> {
  const data: Record<string, string> = {};
  for (const [key, value] of Object.entries(files)) {
    if (value !== undefined) data[key] = Buffer.from(value, "utf8").toString("base64");
  }
  return data;
}

/** A tenth of the serving certificate's lifetime, so a renewal (at a third left) reaches every replica in time. */
export function defaultInterval(settings: CertificateSettings): number {
  return Math.min(60_000, Math.max(1_000, Math.floor(settings.certValidityMs / 10)));
}

export class WebhookCertificates {
  private served: string | undefined;
  private lastProblem: string | undefined;

  constructor(private readonly opts: WebhookCertificatesOptions) {}

  /** A serving certificate was found and handed to the server. */
  ready(): boolean {
    return this.served !== undefined;
  }

  /** What went wrong on the last pass, for readiness details. */
  problem(): string | undefined {
    return this.lastProblem;
  }

  private get secretPath(): string {
    return objectPath(SECRETS, this.opts.secretName, this.opts.namespace);
  }

  /** One pass: read, (as the writer) issue or renew and patch the CRDs, then serve what the Secret holds. */
  async sync(now = Date.now()): Promise<void> {
    const { kubeConfig: kc, logger } = this.opts;
    let secret: SecretObject;
    try {
      secret = await kubeRequest<SecretObject>(kc, { method: "GET", path: this.secretPath });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      secret = await this.createSecret();
    }
    let files = decode(secret.data);
    // Without a usable certificate any replica may issue one: the leader may not exist yet, because
    // electing one waits for caches that, on an upgrade from v1alpha1 storage, need this very webhook.
    if (this.opts.canWrite() || servingCertificateOf(files, now) === undefined) {
      files = await this.maintain(secret, files, now);
    }
    const serving = servingCertificateOf(files, now);
    if (!serving) {
      throw new Error(
        `Secret ${this.opts.namespace}/${this.opts.secretName} holds no valid serving certificate yet`,
      );
    }
    if (serving.certPem !== this.served) {
      this.opts.onCertificate({ certPem: serving.certPem, keyPem: serving.keyPem });
      logger.info(
        { secret: this.opts.secretName, notAfter: new Date(serving.notAfter).toISOString() },
        this.served === undefined
          ? "webhook serving certificate loaded"
          : "webhook serving certificate reloaded",
      );
      this.served = serving.certPem;
    }
  }

  /** Runs `sync` every interval until the signal aborts; errors are logged and retried. */
  async run(signal: AbortSignal): Promise<void> {
    const interval = this.opts.intervalMs ?? defaultInterval(this.opts.settings);
    while (!signal.aborted) {
      try {
        await this.sync();
        if (this.lastProblem !== undefined) this.opts.logger.info("webhook certificates recovered");
        this.lastProblem = undefined;
      } catch (err) {
        const message = (err as Error).message;
        if (message !== this.lastProblem) this.opts.logger.error({ err: message }, "webhook certificates");
        this.lastProblem = message;
      }
      await sleep(systemClock, this.lastProblem === undefined ? interval : Math.min(interval, 2_000), signal);
    }
  }

  /** Without the Secret (a local run, where no manifest made it), try to make it; RBAC in a cluster refuses. */
  private async createSecret(): Promise<SecretObject> {
    const { namespace, secretName } = this.opts;
    try {
      return await kubeRequest<SecretObject>(this.opts.kubeConfig, {
        method: "POST",
        path: collectionPath(SECRETS, namespace),
        body: { apiVersion: "v1", kind: "Secret", metadata: { name: secretName, namespace }, type: "Opaque" },
      });
    } catch (err) {
      if (isForbidden(err)) {
        throw new Error(
          `Secret ${namespace}/${secretName} does not exist and may not be created by the operator: ` +
            "apply config/webhook (it ships the empty Secret the operator fills in)",
          { cause: err },
        );
      }
      throw err;
    }
  }

  private async maintain(
    secret: SecretObject,
    files: CertificateFiles,
    now: number,
  ): Promise<CertificateFiles> {
    const { kubeConfig: kc, logger, settings } = this.opts;
    const crds = await Promise.all(this.opts.crdNames.map((name) => this.readCrd(name)));
    const converting = crds.filter((c): c is CrdObject => c?.spec?.conversion?.strategy === "Webhook");
    // The CA bundle the API server uses now: a next CA is promoted only once the CRDs trust it.
    const observed = converting.length === 0 ? undefined : commonBundle(converting);
    const plan = planCertificates(files, observed, settings, now);
    if (plan.files) {
      try {
        const written = await kubeRequest<SecretObject>(kc, {
          method: "PUT",
          path: this.secretPath,
          body: {
            apiVersion: "v1",
            kind: "Secret",
            metadata: { ...secret.metadata },
            type: secret.type ?? "Opaque",
            // Keys of ours that the plan dropped (a promoted next CA) go; anything else someone keeps stays.
            data: { ...othersOf(secret.data), ...encode(plan.files) },
          },
        });
        files = decode(written.data);
        logger.info({ secret: this.opts.secretName, changes: plan.reasons }, "webhook certificates updated");
        void this.opts.events?.record(
          { apiVersion: "v1", kind: "Secret", metadata: { ...written.metadata, name: this.opts.secretName } },
          "Normal",
          "CertificatesUpdated",
          plan.reasons.join("; "),
        );
      } catch (err) {
        // Someone else wrote it since we read it: their write stands; the next pass reads it.
        if (isConflict(err)) return files;
        throw err;
      }
    }
    const bundle = Buffer.from(plan.caBundle, "utf8").toString("base64");
    for (const crd of converting) {
      const clientConfig = crd.spec?.conversion?.webhook?.clientConfig;
      const service = serviceToSet(clientConfig?.service, this.opts.service);
      if (clientConfig?.caBundle === bundle && service === undefined) continue;
      // A merge patch: the Service's path and port stay as the CRD has them.
      await kubeRequest(kc, {
        method: "PATCH",
        path: objectPath(CUSTOM_RESOURCE_DEFINITIONS, crd.metadata.name),
        contentType: "application/merge-patch+json",
        body: {
          spec: {
            conversion: { webhook: { clientConfig: { caBundle: bundle, ...(service ? { service } : {}) } } },
          },
        },
      });
      if (service) {
        logger.info(
          { crd: crd.metadata.name, from: clientConfig?.service, to: service },
          "conversion webhook Service updated",
        );
      }
      if (clientConfig?.caBundle !== bundle) {
        logger.info({ crd: crd.metadata.name }, "conversion webhook caBundle updated");
      }
    }
    return files;
  }

  private async readCrd(name: string): Promise<CrdObject | undefined> {
    try {
      return await kubeRequest<CrdObject>(this.opts.kubeConfig, {
        method: "GET",
        path: objectPath(CUSTOM_RESOURCE_DEFINITIONS, name),
      });
    } catch (err) {
      if (isNotFound(err)) {
        this.opts.logger.warn({ crd: name }, "CRD not installed; its caBundle is set once it is");
        return undefined;
      }
      throw err;
    }
  }
}

/** The Service a CRD's clientConfig should name instead of the one it names; undefined when it names it already or a URL. */
export function serviceToSet(
  named: Partial<ServiceReference> | undefined,
  own: ServiceReference | undefined,
): ServiceReference | undefined {
  if (named === undefined || own === undefined) return undefined;
  if (named.namespace === own.namespace && named.name === own.name) return undefined;
  return { namespace: own.namespace, name: own.name };
}

/**
 * The caBundle every converting CRD has: a next CA counts as trusted only if all of them trust it, so
 * the bundle of the first is returned only when they all agree.
 */
function commonBundle(crds: readonly CrdObject[]): string | undefined {
  const bundles = crds.map((c) => c.spec?.conversion?.webhook?.clientConfig?.caBundle ?? "");
  if (bundles.some((b) => b !== bundles[0])) return undefined;
  return Buffer.from(bundles[0] ?? "", "base64").toString("utf8");
}
