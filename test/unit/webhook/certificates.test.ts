// The webhook's certificate plan: issue, keep, renew the serving certificate under the same CA, and roll
// the CA in two steps so the API server trusts the new CA before anything is signed by it.
import { X509Certificate } from "node:crypto";
import { isIP } from "node:net";
import { describe, expect, it } from "vitest";
import {
  needsRenewal,
  planCertificates,
  servingCertificateOf,
  splitBundle,
  type CertificateFiles,
  type CertificateSettings,
} from "../../../src/webhook/certificates.js";

const HOUR = 3600_000;
const settings: CertificateSettings = {
  hosts: ["dpo-webhook.dpo-system.svc", "127.0.0.1"],
  caValidityMs: 300 * HOUR,
  certValidityMs: 30 * HOUR,
  settleMs: 60_000,
  backdateMs: 60_000,
};
const T0 = Date.parse("2026-11-23T10:00:00Z");

function cert(pem: string | undefined): X509Certificate {
  if (!pem) throw new Error("no certificate");
  return new X509Certificate(pem);
}

function issued(now = T0): CertificateFiles {
  const plan = planCertificates({}, undefined, settings, now);
  if (!plan.files) throw new Error("nothing issued");
  return plan.files;
}

/** The plan applied: the Secret it writes (or keeps) and the bundle the CRD then has. */
function step(files: CertificateFiles, observed: string | undefined, now: number) {
  const plan = planCertificates(files, observed, settings, now);
  return {
    files: plan.files ?? files,
    written: plan.files !== undefined,
    bundle: plan.caBundle,
    reasons: plan.reasons,
  };
}

describe("needsRenewal", () => {
  it.each([
    ["before it is valid", -1, true],
    ["fresh", 0, false],
    ["at half its life", 50, false],
    ["just before a third is left", 66, false],
    ["with less than a third left", 67, true],
    ["expired", 100, true],
  ])("%s", (_what, percent, expected) => {
    const notBefore = 0;
    const notAfter = 100_000;
    expect(needsRenewal({ notBefore, notAfter }, (notAfter * percent) / 100)).toBe(expected);
  });
});

describe("planCertificates", () => {
  it("issues a CA and a serving certificate it signs, covering the hosts, into an empty Secret", () => {
    const plan = planCertificates({}, undefined, settings, T0);
    const files = plan.files!;
    const ca = cert(files["ca.crt"]);
    const serving = cert(files["tls.crt"]);
    expect(ca.ca).toBe(true);
    expect(serving.ca).toBe(false);
    expect(serving.checkIssued(ca)).toBe(true);
    expect(serving.verify(ca.publicKey)).toBe(true);
    expect(serving.checkHost("dpo-webhook.dpo-system.svc")).toBeDefined();
    expect(serving.checkIP("127.0.0.1")).toBeDefined();
    expect(Date.parse(serving.validTo)).toBe(T0 + settings.certValidityMs);
    expect(Date.parse(ca.validTo)).toBe(T0 + settings.caValidityMs);
    expect(Date.parse(serving.validFrom)).toBe(T0 - 60_000);
    expect(plan.caBundle).toBe(files["ca.crt"]);
    expect(files["ca-bundle.crt"]).toBe(plan.caBundle);
    expect(files["ca-next.crt"]).toBeUndefined();
    expect(plan.reasons).toEqual(["issued a CA", "issued a serving certificate"]);
    expect(servingCertificateOf(files, T0)).toEqual({
      certPem: files["tls.crt"],
      keyPem: files["tls.key"],
      notAfter: T0 + settings.certValidityMs,
    });
  });

  it("writes nothing while everything is valid and the CRD trusts the CA", () => {
    const files = issued();
    const plan = planCertificates(files, files["ca-bundle.crt"], settings, T0 + 10 * HOUR);
    expect(plan).toEqual({ files: undefined, caBundle: files["ca-bundle.crt"], reasons: [] });
  });

  it("renews the serving certificate under the same CA with a third of its life left", () => {
    const files = issued();
    const now = T0 + 21 * HOUR;
    const plan = planCertificates(files, files["ca-bundle.crt"], settings, now);
    expect(plan.reasons).toEqual(["renewed the serving certificate"]);
    expect(plan.files!["ca.crt"]).toBe(files["ca.crt"]);
    expect(plan.files!["tls.crt"]).not.toBe(files["tls.crt"]);
    expect(cert(plan.files!["tls.crt"]).checkIssued(cert(files["ca.crt"]))).toBe(true);
    expect(Date.parse(cert(plan.files!["tls.crt"]).validTo)).toBe(now + settings.certValidityMs);
    expect(plan.caBundle).toBe(files["ca-bundle.crt"]);
  });

  it.each<[string, (f: CertificateFiles) => CertificateFiles]>([
    ["a host is added", (f) => f],
    ["the key does not match the certificate", (f) => ({ ...f, "tls.key": issued()["tls.key"] })],
    ["the certificate is not PEM", (f) => ({ ...f, "tls.crt": "garbage" })],
    [
      "another CA signed it",
      (f) => ({ ...f, "tls.crt": issued()["tls.crt"], "tls.key": issued()["tls.key"] }),
    ],
  ])("reissues the serving certificate when %s", (what, mutate) => {
    const files = mutate(issued());
    const hosts = what === "a host is added" ? [...settings.hosts, "localhost"] : settings.hosts;
    const plan = planCertificates(files, files["ca-bundle.crt"], { ...settings, hosts }, T0 + HOUR);
    const serving = cert(plan.files!["tls.crt"]);
    expect(serving.checkIssued(cert(files["ca.crt"]))).toBe(true);
    expect(plan.files!["ca.crt"]).toBe(files["ca.crt"]);
    for (const host of hosts) {
      expect(isIP(host) ? serving.checkIP(host) : serving.checkHost(host), host).toBeDefined();
    }
  });

  it("starts over when the CA is unreadable or its key does not match", () => {
    const files = { ...issued(), "ca.key": issued()["ca.key"] };
    const plan = planCertificates(files, files["ca-bundle.crt"], settings, T0 + HOUR);
    expect(plan.reasons[0]).toBe("the CA was invalid or expired; issued a new one");
    expect(plan.files!["ca.crt"]).not.toBe(files["ca.crt"]);
    expect(cert(plan.files!["tls.crt"]).checkIssued(cert(plan.files!["ca.crt"]))).toBe(true);
  });

  it("rolls the CA in two steps: trusted first, signing only after the CRD trusts it and it settled", () => {
    const first = issued();
    const oldCa = first["ca.crt"]!;
    const oldServing = first["tls.crt"]!;
    // With less than a third of the CA's life left, the next CA joins the bundle; serving is unchanged.
    const t1 = T0 + 201 * HOUR;
    // (Keep the serving certificate fresh so only the CA's age matters here.)
    let s = step(first, oldCa, T0 + 199 * HOUR);
    const serving199 = s.files["tls.crt"];
    s = step(s.files, s.bundle, t1);
    expect(s.reasons).toEqual([
      `the CA expires ${new Date(T0 + 300 * HOUR).toISOString()}; added the next CA to the bundle`,
    ]);
    const next = s.files["ca-next.crt"]!;
    expect(s.files["ca.crt"]).toBe(oldCa);
    expect(s.files["tls.crt"]).toBe(serving199);
    expect(splitBundle(s.bundle).map((c) => c.pem)).toEqual([oldCa, next]);

    // The CRD still has the old bundle: no promotion, however long it waits.
    const notYet = step(s.files, oldCa, t1 + HOUR);
    expect(notYet.written).toBe(false);
    // The CRD trusts it but it has not settled.
    const unsettled = step(s.files, s.bundle, t1 + 30_000);
    expect(unsettled.written).toBe(false);
    // Trusted and settled: the next CA signs a new serving certificate; the old CA stays trusted.
    const promoted = step(s.files, s.bundle, t1 + 61_000);
    expect(promoted.reasons).toEqual([
      "promoted the next CA, trusted by the CRD, to sign the serving certificate",
    ]);
    expect(promoted.files["ca.crt"]).toBe(next);
    expect(promoted.files["ca-next.crt"]).toBeUndefined();
    expect(promoted.files["ca-next.key"]).toBeUndefined();
    expect(cert(promoted.files["tls.crt"]).checkIssued(cert(next))).toBe(true);
    // The bundle does not change on promotion (oldest first): the CRD needs no patch for it.
    expect(promoted.bundle).toBe(s.bundle);
    expect(oldServing).not.toBe(promoted.files["tls.crt"]);

    // Once the old CA expires, it leaves the bundle.
    const later = step(promoted.files, promoted.bundle, T0 + 300 * HOUR + 1_000);
    expect(splitBundle(later.bundle).map((c) => c.pem)).toEqual([next]);
  });

  it("never lets a serving certificate outlive the CA that signs it", () => {
    const files = issued();
    const plan = planCertificates(
      { ...files, "tls.crt": "" },
      files["ca-bundle.crt"],
      { ...settings, certValidityMs: 1000 * HOUR },
      T0,
    );
    expect(Date.parse(cert(plan.files!["tls.crt"]).validTo)).toBe(Date.parse(cert(files["ca.crt"]).validTo));
  });
});

describe("servingCertificateOf", () => {
  it.each<[string, (f: CertificateFiles) => CertificateFiles, number]>([
    ["no certificate", () => ({}), T0],
    ["an expired one", (f) => f, T0 + 31 * HOUR],
    ["a key of another certificate", (f) => ({ ...f, "tls.key": issued()["tls.key"] }), T0],
  ])("is undefined for %s", (_what, mutate, now) => {
    expect(servingCertificateOf(mutate(issued()), now)).toBeUndefined();
  });
});
