// The conversion webhook as the operator runs it: the HTTPS server, and where its certificate comes
// from (the Secret the operator keeps, or a directory cert-manager fills).
import type { KubeConfig } from "@kubernetes/client-node";
import { X509Certificate } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import { DEVICE_PLUGIN_CONFIG_CRD_NAME } from "../api/crd.js";
import { SUPPORTED_API_VERSIONS } from "../api/validate.js";
import type { EventRecorder } from "../kube/events.js";
import type { ListenAddress } from "../observability/http.js";
import type { Counter, Gauge, Histogram } from "../observability/metrics.js";
import { WebhookCertificates } from "./cert-controller.js";
import { ConversionWebhookServer, type ServingCertificate } from "./server.js";

export { reviewConversion } from "./conversion.js";
export { ConversionWebhookServer, CONVERT_PATH } from "./server.js";

/** What the webhook records of each review: the process that runs it owns the series and serves them. */
export interface ConversionWebhookMetrics {
  readonly conversionReviews: Counter<"to" | "result">;
  readonly conversionObjects: Counter<"to">;
  readonly conversionDuration: Histogram;
  /** When the certificate served expires (seconds since the epoch), for the certificate-expiry alert. */
  readonly webhookCertificateExpiry?: Gauge;
}

/**
 * The `to` label of a review: a version dpo serves, or "other". Whoever reaches the port chooses the desired
 * version, so a label taken from it as sent would grow /metrics and the heap with every made-up string.
 */
export function reviewVersionLabel(desiredAPIVersion: string | undefined): string {
  return (SUPPORTED_API_VERSIONS as readonly (string | undefined)[]).includes(desiredAPIVersion)
    ? desiredAPIVersion!
    : "other";
}

/** When a PEM certificate (the first of a chain) expires, in seconds since the epoch; undefined if unreadable. */
export function certificateExpirySeconds(certPem: string): number | undefined {
  try {
    const validTo = Date.parse(new X509Certificate(certPem).validTo);
    return Number.isNaN(validTo) ? undefined : validTo / 1000;
  } catch {
    return undefined;
  }
}

export interface ConversionWebhookOptions {
  kubeConfig: KubeConfig;
  address: ListenAddress;
  namespace: string;
  secretName: string;
  /** The Service in `namespace` the API server reaches the webhook through, which the CRDs are kept naming. */
  serviceName?: string;
  /** With cert-manager: serve tls.crt/tls.key from here and leave the Secret and caBundle alone. */
  certDir?: string;
  hosts: string[];
  caValidityMs: number;
  certValidityMs: number;
  canWrite: () => boolean;
  logger: Logger;
  metrics?: ConversionWebhookMetrics;
  /** Records `CertificatesUpdated` on the Secret when the certificates are issued or renewed. */
  events?: EventRecorder;
}

export interface RunningWebhook {
  port: number;
  ready(): boolean;
  problem(): string;
  stop(): Promise<void>;
}

/** How often a mounted certificate directory is read again (kubelet updates Secret volumes within a minute or so). */
const CERT_DIR_INTERVAL_MS = 10_000;

export async function startConversionWebhook(opts: ConversionWebhookOptions): Promise<RunningWebhook> {
  const { logger, metrics } = opts;
  const server = new ConversionWebhookServer({
    host: opts.address.host,
    port: opts.address.port,
    logger,
    onReview: (outcome, seconds) => {
      const to = reviewVersionLabel(outcome.desiredAPIVersion);
      metrics?.conversionReviews.inc({ to, result: outcome.review.response.result.status });
      metrics?.conversionObjects.inc({ to }, outcome.objects);
      metrics?.conversionDuration.observe(seconds);
    },
  });
  /** Serves `cert` and exports when it expires. */
  const serve = (cert: ServingCertificate): void => {
    server.setCertificate(cert);
    const expiry = certificateExpirySeconds(cert.certPem);
    if (expiry !== undefined) metrics?.webhookCertificateExpiry?.set(expiry);
  };
  const port = await server.start();
  logger.info({ port, hosts: opts.hosts, certDir: opts.certDir }, "conversion webhook listening");
  const stop = new AbortController();

  if (opts.certDir) {
    const dir = opts.certDir;
    let problem = "no certificate read yet";
    const load = async (): Promise<void> => {
      try {
        const cert: ServingCertificate = {
          certPem: await readFile(join(dir, "tls.crt"), "utf8"),
          keyPem: await readFile(join(dir, "tls.key"), "utf8"),
        };
        if (server.certificate?.certPem !== cert.certPem) logger.info({ dir }, "webhook certificate loaded");
        serve(cert);
        problem = "";
      } catch (err) {
        problem = `reading ${dir}: ${(err as Error).message}`;
        logger.error({ err: problem }, "webhook certificate");
      }
    };
    await load();
    const timer = setInterval(() => void load(), CERT_DIR_INTERVAL_MS);
    timer.unref();
    return {
      port,
      ready: () => server.certificate !== undefined,
      problem: () => problem,
      async stop() {
        clearInterval(timer);
        await server.close();
      },
    };
  }

  const certificates = new WebhookCertificates({
    kubeConfig: opts.kubeConfig,
    namespace: opts.namespace,
    secretName: opts.secretName,
    crdNames: [DEVICE_PLUGIN_CONFIG_CRD_NAME],
    ...(opts.serviceName ? { service: { namespace: opts.namespace, name: opts.serviceName } } : {}),
    settings: {
      hosts: opts.hosts,
      caValidityMs: opts.caValidityMs,
      certValidityMs: opts.certValidityMs,
      // Time for every API server to see a new caBundle before the CA it adds signs anything.
      settleMs: Math.min(30_000, Math.max(1_000, Math.floor(opts.caValidityMs / 12))),
      backdateMs: Math.min(60_000, Math.floor(opts.certValidityMs / 10)),
    },
    logger,
    canWrite: opts.canWrite,
    onCertificate: serve,
    events: opts.events,
  });
  const running = certificates.run(stop.signal);
  return {
    port,
    ready: () => certificates.ready(),
    problem: () => certificates.problem() ?? "waiting for the serving certificate",
    async stop() {
      stop.abort();
      await running;
      await server.close();
    },
  };
}
