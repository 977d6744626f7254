// The webhook's self-managed certificates: a CA and a serving certificate it signs, kept in one Secret,
// renewed before they expire, and the CA bundle the CRD must trust. Pure: `planCertificates` looks at the
// Secret's contents and the time and says what the next Secret and CA bundle are; the controller reads
// and writes them.
//
// Rotation never breaks a conversion:
// - The serving certificate is renewed under the same CA once a third of its lifetime is left; the API
//   server trusts the CA, so old and new certificates both verify while replicas reload.
// - The CA is renewed in two steps: first a next CA is added to the Secret and to the CRD's caBundle
//   (serving does not change), and only after `settleMs` (for the API servers to read the new caBundle)
//   is it promoted and a serving certificate issued under it. The old CA stays in the bundle until it
//   expires, for replicas still serving the old certificate.
import { X509Certificate, createPrivateKey, createPublicKey } from "node:crypto";
import { isIP } from "node:net";
import { createCertificate, generateKey } from "./x509.js";

/** The keys of the Secret, as PEM text (base64-encoded in `data`, as Secrets are). */
export const SECRET_KEYS = {
  caCert: "ca.crt",
  caKey: "ca.key",
  nextCaCert: "ca-next.crt",
  nextCaKey: "ca-next.key",
  bundle: "ca-bundle.crt",
  cert: "tls.crt",
  key: "tls.key",
} as const;

export type CertificateFiles = Partial<Record<(typeof SECRET_KEYS)[keyof typeof SECRET_KEYS], string>>;

export interface CertificateSettings {
  /** DNS names and IP addresses the serving certificate must cover. */
  hosts: readonly string[];
  caValidityMs: number;
  certValidityMs: number;
  /** How long a next CA sits in the caBundle before it signs the serving certificate. */
  settleMs: number;
  /** notBefore is this far in the past, for clocks that lag. */
  backdateMs?: number;
}

export interface CertificatePlan {
  /** The Secret contents to write, or undefined when they are fine as they are. */
  files: CertificateFiles | undefined;
  /** What the CRD's caBundle must be (PEM, concatenated). */
  caBundle: string;
  /** What changed and why, for the log and the Event; empty when nothing did. */
  reasons: string[];
}

interface ParsedCert {
  pem: string;
  cert: X509Certificate;
  notBefore: number;
  notAfter: number;
}

const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/g;

function parseCert(pem: string | undefined): ParsedCert | undefined {
  if (!pem) return undefined;
  try {
    const cert = new X509Certificate(pem);
    return {
      pem: normalizePem(cert.toString()),
      cert,
      notBefore: Date.parse(cert.validFrom),
      notAfter: Date.parse(cert.validTo),
    };
  } catch {
    return undefined;
  }
}

function normalizePem(pem: string): string {
  return pem.endsWith("\n") ? pem : `${pem}\n`;
}

/** The certificates of a PEM bundle that parse; anything else in it is dropped. */
export function splitBundle(bundle: string | undefined): ParsedCert[] {
  return [...(bundle ?? "").matchAll(PEM_CERT)]
    .map((m) => parseCert(m[0]))
    .filter((c): c is ParsedCert => c !== undefined);
}

/** A key pair matches: the private key's public half is the certificate's. */
function keyMatches(cert: ParsedCert, keyPem: string | undefined): boolean {
  if (!keyPem) return false;
  try {
    const publicOfKey = createPublicKey(createPrivateKey(keyPem)).export({ type: "spki", format: "der" });
    return publicOfKey.equals(cert.cert.publicKey.export({ type: "spki", format: "der" }));
  } catch {
    return false;
  }
}

/** Less than a third of the lifetime left (cert-manager's default), or not valid at all. */
export function needsRenewal(cert: { notBefore: number; notAfter: number }, now: number): boolean {
  if (now < cert.notBefore || now >= cert.notAfter) return true;
  return cert.notAfter - now < (cert.notAfter - cert.notBefore) / 3;
}

function servingCovers(cert: ParsedCert, hosts: readonly string[]): boolean {
  return hosts.every((h) => (isIP(h) ? cert.cert.checkIP(h) : cert.cert.checkHost(h)) !== undefined);
}

function issue(settings: CertificateSettings, now: number): { caCert: string; caKey: string } {
  const key = generateKey();
  const caCert = createCertificate({
    commonName: "dpo-webhook-ca",
    notBefore: new Date(now - (settings.backdateMs ?? 60_000)),
    notAfter: new Date(now + settings.caValidityMs),
    isCA: true,
    subjectKey: key.publicKey,
    issuer: { privateKey: key.privateKey },
  });
  return { caCert: normalizePem(caCert), caKey: key.privateKeyPem };
}

function issueServing(
  ca: { cert: ParsedCert; keyPem: string },
  settings: CertificateSettings,
  now: number,
): { cert: string; key: string } {
  const key = generateKey();
  const isIp = (h: string): boolean => isIP(h) !== 0;
  const cert = createCertificate({
    commonName: settings.hosts[0] ?? "dpo-webhook",
    notBefore: new Date(now - (settings.backdateMs ?? 60_000)),
    // Never outlive the CA that signs it: the CA's renewal then covers the serving certificate too.
    notAfter: new Date(Math.min(now + settings.certValidityMs, ca.cert.notAfter)),
    isCA: false,
    dnsNames: settings.hosts.filter((h) => !isIp(h)),
    ipAddresses: settings.hosts.filter(isIp),
    subjectKey: key.publicKey,
    issuer: { certPem: ca.cert.pem, privateKey: createPrivateKey(ca.keyPem) },
  });
  return { cert: normalizePem(cert), key: key.privateKeyPem };
}

/**
 * What the Secret and the CRD's caBundle should hold now. `observedBundle` is the caBundle the CRD has:
 * a next CA is promoted only once the CRD trusts it and it has settled.
 */
export function planCertificates(
  current: CertificateFiles,
  observedBundle: string | undefined,
  settings: CertificateSettings,
  now: number,
): CertificatePlan {
  const reasons: string[] = [];
  const files: CertificateFiles = { ...current };
  let ca = parseCert(current["ca.crt"]);
  let caKey = current["ca.key"];
  let next = parseCert(current["ca-next.crt"]);
  const trusted = splitBundle(current["ca-bundle.crt"]).filter((c) => c.notAfter > now);

  if (!ca || !keyMatches(ca, caKey) || now >= ca.notAfter || now < ca.notBefore) {
    // Nothing trustworthy to keep: start over. Conversions were failing anyway if this was in use.
    const fresh = issue(settings, now);
    files["ca.crt"] = fresh.caCert;
    files["ca.key"] = caKey = fresh.caKey;
    delete files["ca-next.crt"];
    delete files["ca-next.key"];
    ca = parseCert(fresh.caCert)!;
    next = undefined;
    reasons.push(current["ca.crt"] ? "the CA was invalid or expired; issued a new one" : "issued a CA");
  }
  if (next && (!keyMatches(next, current["ca-next.key"]) || now >= next.notAfter)) {
    delete files["ca-next.crt"];
    delete files["ca-next.key"];
    next = undefined;
    reasons.push("dropped an unusable next CA");
  }
  if (!next && needsRenewal(ca, now)) {
    const fresh = issue(settings, now);
    files["ca-next.crt"] = fresh.caCert;
    files["ca-next.key"] = fresh.caKey;
    next = parseCert(fresh.caCert)!;
    reasons.push(`the CA expires ${new Date(ca.notAfter).toISOString()}; added the next CA to the bundle`);
  }
  const crdTrusts = (c: ParsedCert): boolean => splitBundle(observedBundle).some((b) => b.pem === c.pem);
  let promoted = false;
  if (
    next &&
    crdTrusts(next) &&
    now - (next.notBefore + (settings.backdateMs ?? 60_000)) >= settings.settleMs
  ) {
    files["ca.crt"] = next.pem;
    files["ca.key"] = caKey = files["ca-next.key"];
    delete files["ca-next.crt"];
    delete files["ca-next.key"];
    ca = next;
    next = undefined;
    promoted = true;
    reasons.push("promoted the next CA, trusted by the CRD, to sign the serving certificate");
  }

  const serving = parseCert(current["tls.crt"]);
  const servingValid =
    serving !== undefined &&
    keyMatches(serving, current["tls.key"]) &&
    serving.cert.checkIssued(ca.cert) &&
    serving.cert.verify(ca.cert.publicKey) &&
    servingCovers(serving, settings.hosts) &&
    !needsRenewal(serving, now);
  if (!servingValid || promoted) {
    const fresh = issueServing({ cert: ca, keyPem: caKey! }, settings, now);
    files["tls.crt"] = fresh.cert;
    files["tls.key"] = fresh.key;
    if (!promoted) reasons.push(serving ? "renewed the serving certificate" : "issued a serving certificate");
  }

  // Trust: the CA, the next one while it settles, and earlier CAs until they expire (old serving
  // certificates may still be in use on replicas that have not reloaded yet).
  const bundle: ParsedCert[] = [ca, ...(next ? [next] : [])];
  // Only CAs this Secret issued: whatever else the CRD's caBundle holds is not ours to keep trusting.
  for (const old of trusted) {
    if (!bundle.some((b) => b.pem === old.pem)) bundle.push(old);
  }
  // Oldest first, so promoting the next CA leaves the bundle as it is: every change of a CRD's caBundle
  // makes the API server re-initialize that CRD's storage (a second of 429s for its clients).
  bundle.sort((a, b) => a.notBefore - b.notBefore || (a.pem < b.pem ? -1 : 1));
  const caBundle = bundle.map((c) => c.pem).join("");
  files["ca-bundle.crt"] = caBundle;

  const changed = Object.values(SECRET_KEYS).some((k) => (files[k] ?? "") !== (current[k] ?? ""));
  return { files: changed ? files : undefined, caBundle, reasons };
}

/** The serving certificate and key of a Secret's contents, when it has a usable one now. */
export function servingCertificateOf(
  files: CertificateFiles,
  now: number,
): { certPem: string; keyPem: string; notAfter: number } | undefined {
  const cert = parseCert(files["tls.crt"]);
  if (!cert || !keyMatches(cert, files["tls.key"]) || now >= cert.notAfter) return undefined;
  return { certPem: files["tls.crt"]!, keyPem: files["tls.key"]!, notAfter: cert.notAfter };
}
