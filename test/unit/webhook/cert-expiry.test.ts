// The conversion webhook exports when the certificate it serves expires
// (dpo_webhook_certificate_expiry_timestamp_seconds), for the DpoWebhookCertificateExpiring alert.
import { KubeConfig } from "@kubernetes/client-node";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { metricValue } from "../../../src/observability/metrics.js";
import { OperatorMetrics } from "../../../src/operator/metrics.js";
import { certificateExpirySeconds, startConversionWebhook } from "../../../src/webhook/index.js";
import { createCertificate, generateKey } from "../../../src/webhook/x509.js";

const NOT_AFTER = new Date("2031-06-01T12:00:00Z");

function servingCertificate(): { certPem: string; keyPem: string } {
  const key = generateKey();
  const certPem = createCertificate({
    commonName: "dpo-webhook",
    notBefore: new Date("2026-01-01T00:00:00Z"),
    notAfter: NOT_AFTER,
    isCA: false,
    dnsNames: ["dpo-webhook.dpo-system.svc"],
    subjectKey: key.publicKey,
    issuer: { privateKey: key.privateKey },
  });
  return { certPem, keyPem: key.privateKeyPem };
}

describe("webhook certificate expiry", () => {
  it.each([
    { name: "a certificate", pem: () => servingCertificate().certPem, want: NOT_AFTER.getTime() / 1000 },
    { name: "not PEM at all", pem: () => "garbage", want: undefined },
    { name: "an empty file", pem: () => "", want: undefined },
  ])("certificateExpirySeconds of $name", ({ pem, want }) => {
    expect(certificateExpirySeconds(pem())).toBe(want);
  });

  it("is exported once the webhook serves a certificate from a directory (cert-manager)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "dpo-webhook-expiry-"));
    const metrics = new OperatorMetrics();
    const { certPem, keyPem } = servingCertificate();
    await writeFile(join(dir, "tls.crt"), certPem);
    await writeFile(join(dir, "tls.key"), keyPem);
    const webhook = await startConversionWebhook({
      kubeConfig: new KubeConfig(),
      address: { host: "127.0.0.1", port: 0 },
      namespace: "dpo-system",
      secretName: "dpo-webhook-tls",
      certDir: dir,
      hosts: ["127.0.0.1"],
      caValidityMs: 86_400_000,
      certValidityMs: 86_400_000,
      canWrite: () => false,
      logger: pino({ level: "silent" }),
      metrics,
    });
    try {
      expect(webhook.ready()).toBe(true);
      expect(await metricValue(metrics.webhookCertificateExpiry)).toBe(NOT_AFTER.getTime() / 1000);
    } finally {
      await webhook.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
