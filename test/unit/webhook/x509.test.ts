// X.509 certificates over node:crypto: the certificates as node (and openssl, where installed) read them,
// chain verification, real TLS handshakes, and the input checks.
import { spawnSync } from "node:child_process";
import { createHash, generateKeyPairSync, X509Certificate } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, get } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  createCertificate,
  generateKey,
  type CertificateRequest,
  type KeyPair,
} from "../../../src/webhook/x509.js";

const NOT_BEFORE = new Date("2024-03-04T05:06:07Z");
const NOT_AFTER = new Date("2034-03-04T05:06:07Z");
const DNS = "dpo-webhook.dpo-system.svc";

function makeCA(commonName = "dpo-ca", notAfter = NOT_AFTER): { key: KeyPair; pem: string } {
  const key = generateKey();
  const pem = createCertificate({
    commonName,
    notBefore: NOT_BEFORE,
    notAfter,
    isCA: true,
    subjectKey: key.publicKey,
    issuer: { privateKey: key.privateKey },
  });
  return { key, pem };
}

function makeLeaf(
  ca: { key: KeyPair; pem: string },
  extra: Partial<CertificateRequest> = {},
): { key: KeyPair; pem: string } {
  const key = generateKey();
  const pem = createCertificate({
    commonName: "dpo-webhook",
    notBefore: NOT_BEFORE,
    notAfter: NOT_AFTER,
    isCA: false,
    dnsNames: [DNS, "localhost"],
    ipAddresses: ["127.0.0.1", "::1"],
    subjectKey: key.publicKey,
    issuer: { privateKey: ca.key.privateKey, certPem: ca.pem },
    ...extra,
  });
  return { key, pem };
}

describe("generateKey", () => {
  it("makes a P-256 pair with a PKCS#8 PEM", () => {
    const key = generateKey();
    expect(key.privateKeyPem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    expect(key.privateKey.asymmetricKeyDetails).toEqual({ namedCurve: "prime256v1" });
    expect(key.publicKey.type).toBe("public");
  });
});

describe("createCertificate", () => {
  const ca = makeCA();
  const leaf = makeLeaf(ca);
  const caCert = new X509Certificate(ca.pem);
  const leafCert = new X509Certificate(leaf.pem);

  it("makes a self-signed CA", () => {
    expect(ca.pem).toMatch(
      /^-----BEGIN CERTIFICATE-----\n([A-Za-z0-9+/=]{1,64}\n)+-----END CERTIFICATE-----\n$/,
    );
    expect(caCert.subject).toBe("CN=dpo-ca");
    expect(caCert.issuer).toBe("CN=dpo-ca");
    expect(caCert.ca).toBe(true);
    expect(caCert.validFromDate).toEqual(NOT_BEFORE);
    expect(caCert.validToDate).toEqual(NOT_AFTER);
    expect(caCert.subjectAltName).toBeUndefined();
    expect(caCert.keyUsage).toBeUndefined(); // node's keyUsage is the extended key usage
    expect(caCert.signatureAlgorithmOid).toBe("1.2.840.10045.4.3.2");
    expect(caCert.checkIssued(caCert)).toBe(true);
    expect(caCert.verify(ca.key.publicKey)).toBe(true);
    expect(caCert.checkPrivateKey(ca.key.privateKey)).toBe(true);
  });

  it("makes a serving certificate signed by the CA", () => {
    expect(leafCert.subject).toBe("CN=dpo-webhook");
    expect(leafCert.issuer).toBe("CN=dpo-ca");
    expect(leafCert.ca).toBe(false);
    expect(leafCert.validFromDate).toEqual(NOT_BEFORE);
    expect(leafCert.validToDate).toEqual(NOT_AFTER);
    expect(leafCert.subjectAltName).toBe(
      `DNS:${DNS}, DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1`,
    );
    expect(leafCert.keyUsage).toEqual(["1.3.6.1.5.5.7.3.1"]);
    expect(leafCert.checkHost(DNS)).toBe(DNS);
    expect(leafCert.checkIP("127.0.0.1")).toBe("127.0.0.1");
    expect(leafCert.checkIssued(caCert)).toBe(true);
    expect(leafCert.verify(ca.key.publicKey)).toBe(true);
    expect(leafCert.verify(leaf.key.publicKey)).toBe(false);
    expect(leafCert.checkPrivateKey(leaf.key.privateKey)).toBe(true);
  });

  it("a leaf from another CA neither checks as issued nor verifies", () => {
    const other = makeCA("other-ca");
    const stranger = new X509Certificate(makeLeaf(other).pem);
    expect(stranger.checkIssued(caCert)).toBe(false);
    expect(stranger.verify(ca.key.publicKey)).toBe(false);
    // Same name, different key: the name alone must not make it verify.
    const impostor = new X509Certificate(makeLeaf(makeCA("dpo-ca")).pem);
    expect(impostor.verify(ca.key.publicKey)).toBe(false);
  });

  it("signs an intermediate CA whose leaves chain back", () => {
    const intermediateKey = generateKey();
    const intermediate = {
      key: intermediateKey,
      pem: createCertificate({
        commonName: "dpo-intermediate",
        notBefore: NOT_BEFORE,
        notAfter: NOT_AFTER,
        isCA: true,
        subjectKey: intermediateKey.publicKey,
        issuer: { privateKey: ca.key.privateKey, certPem: ca.pem },
      }),
    };
    const cert = new X509Certificate(intermediate.pem);
    expect(cert.ca).toBe(true);
    expect(cert.checkIssued(caCert)).toBe(true);
    const leafOfIntermediate = new X509Certificate(makeLeaf(intermediate).pem);
    expect(leafOfIntermediate.issuer).toBe("CN=dpo-intermediate");
    expect(leafOfIntermediate.verify(intermediateKey.publicKey)).toBe(true);
  });

  it.each([
    { name: "ordinary", from: "2024-03-04T05:06:07Z", to: "2025-03-04T05:06:07Z" },
    {
      name: "across the UTCTime/GeneralizedTime switch",
      from: "2049-12-31T23:59:59Z",
      to: "2050-01-01T00:00:00Z",
    },
    { name: "after 2049", from: "2024-01-01T00:00:00Z", to: "2124-06-30T12:34:56Z" },
    { name: "before 1950", from: "1949-12-31T23:59:59Z", to: "1950-01-01T00:00:00Z" },
    { name: "no well-defined expiry (RFC 5280)", from: "2024-01-01T00:00:00Z", to: "9999-12-31T23:59:59Z" },
  ])("validity $name is exact to the second", ({ from, to }) => {
    const cert = new X509Certificate(makeLeaf(ca, { notBefore: new Date(from), notAfter: new Date(to) }).pem);
    expect(cert.validFromDate.toISOString()).toBe(new Date(from).toISOString());
    expect(cert.validToDate.toISOString()).toBe(new Date(to).toISOString());
  });

  it("drops fractions of a second", () => {
    const cert = new X509Certificate(
      makeLeaf(ca, {
        notBefore: new Date("2024-03-04T05:06:07.999Z"),
        notAfter: new Date("2024-03-04T05:06:09.001Z"),
      }).pem,
    );
    expect(cert.validFromDate.toISOString()).toBe("2024-03-04T05:06:07.000Z");
    expect(cert.validToDate.toISOString()).toBe("2024-03-04T05:06:09.000Z");
  });

  it("uses a random positive 16-byte serial unless given one", () => {
    const serials = [makeLeaf(ca).pem, makeLeaf(ca).pem].map((pem) => new X509Certificate(pem).serialNumber);
    expect(serials[0]).toMatch(/^[4-7][0-9A-F]{31}$/);
    expect(serials[0]).not.toBe(serials[1]);
    expect(new X509Certificate(makeLeaf(ca, { serialNumber: Buffer.from([1, 2]) }).pem).serialNumber).toBe(
      "0102",
    );
    // Node shows the value: 255 only because of the 0x00 pad, without which the INTEGER would be -1.
    const padded = new X509Certificate(makeLeaf(ca, { serialNumber: Buffer.from([0xff]) }).pem);
    expect(padded.serialNumber).toBe("FF");
  });

  const opensslMissing = spawnSync("openssl", ["version"]).status !== 0;
  it.skipIf(opensslMissing)("openssl parses the certificates and verifies the chain", () => {
    const text = (pem: string): string =>
      spawnSync("openssl", ["x509", "-noout", "-text"], { input: pem, encoding: "utf8" }).stdout;
    const caText = text(ca.pem);
    const leafText = text(leaf.pem);
    expect(caText).toContain("Version: 3 (0x2)");
    expect(caText).toContain("Signature Algorithm: ecdsa-with-SHA256");
    expect(caText).toMatch(/Basic Constraints: critical\s+CA:TRUE/);
    expect(caText).toMatch(/Key Usage: critical\s+Digital Signature, Certificate Sign, CRL Sign/);
    expect(leafText).toMatch(/Basic Constraints: critical\s+CA:FALSE/);
    expect(leafText).toMatch(/Key Usage: critical\s+Digital Signature\n/);
    expect(leafText).toMatch(/Extended Key Usage: \s+TLS Web Server Authentication/);
    expect(leafText).toMatch(
      /Subject Alternative Name: \s+DNS:dpo-webhook.dpo-system.svc, DNS:localhost, IP/,
    );

    // Key identifiers: SHA-1 of the EC point (the last 65 bytes of a P-256 SPKI), and the leaf's authority
    // key identifier is the CA's subject key identifier.
    const keyId = (label: string, t: string): string => new RegExp(`${label}: \\s+([0-9A-F:]+)`).exec(t)![1]!;
    const sha1Of = (key: KeyPair): string => {
      const spki = key.publicKey.export({ type: "spki", format: "der" });
      return createHash("sha1")
        .update(spki.subarray(-65))
        .digest("hex")
        .toUpperCase()
        .replace(/(..)(?!$)/g, "$1:");
    };
    expect(keyId("Subject Key Identifier", caText)).toBe(sha1Of(ca.key));
    expect(keyId("Subject Key Identifier", leafText)).toBe(sha1Of(leaf.key));
    expect(keyId("Authority Key Identifier", leafText)).toBe(sha1Of(ca.key));

    const dir = mkdtempSync(join(tmpdir(), "x509-"));
    try {
      writeFileSync(join(dir, "ca.pem"), ca.pem);
      writeFileSync(join(dir, "leaf.pem"), leaf.pem);
      writeFileSync(join(dir, "other.pem"), makeCA("other-ca").pem);
      const verify = (caFile: string) =>
        spawnSync(
          "openssl",
          [
            "verify",
            "-x509_strict",
            "-purpose",
            "sslserver",
            "-attime",
            "1800000000",
            "-CAfile",
            caFile,
            "leaf.pem",
          ],
          { cwd: dir, encoding: "utf8" },
        );
      expect(verify("ca.pem").stdout).toBe("leaf.pem: OK\n");
      expect(verify("other.pem").status).not.toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** Serves `server` over HTTPS on 127.0.0.1 and makes one request; resolves to the body or the error's code. */
async function handshake(
  server: { cert: string; key: string },
  client: { ca: string; servername?: string },
): Promise<string> {
  const srv = createServer(server, (_req, res) => res.end("ok"));
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const { port } = srv.address() as AddressInfo;
  try {
    return await new Promise<string>((resolve) => {
      const req = get({ host: "127.0.0.1", port, path: "/", agent: false, ...client }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (body += chunk));
        res.on("end", () => resolve(body));
      });
      req.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    });
  } finally {
    srv.closeAllConnections();
    await new Promise((resolve) => srv.close(resolve));
  }
}

describe("TLS handshake", () => {
  const ca = makeCA();
  const now = Date.now();
  const leaf = makeLeaf(ca, { notBefore: new Date(now - 60_000), notAfter: new Date(now + 3_600_000) });
  const expired = makeLeaf(ca, { notBefore: new Date(now - 7_200_000), notAfter: new Date(now - 3_600_000) });
  const other = makeCA("other-ca");

  it.each([
    { name: "the DNS SAN", cert: leaf, ca: ca.pem, servername: DNS, result: "ok" },
    { name: "the IP SAN", cert: leaf, ca: ca.pem, servername: undefined, result: "ok" },
    {
      name: "another CA",
      cert: leaf,
      ca: other.pem,
      servername: DNS,
      result: "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    },
    {
      name: "a name not in the SANs",
      cert: leaf,
      ca: ca.pem,
      servername: "x.example",
      result: "ERR_TLS_CERT_ALTNAME_INVALID",
    },
    {
      name: "an expired certificate",
      cert: expired,
      ca: ca.pem,
      servername: DNS,
      result: "CERT_HAS_EXPIRED",
    },
  ])("via $name: $result", async ({ cert, ca: trusted, servername, result }) => {
    const client = servername === undefined ? { ca: trusted } : { ca: trusted, servername };
    expect(await handshake({ cert: cert.pem, key: cert.key.privateKeyPem }, client)).toBe(result);
  });
});

describe("createCertificate rejects", () => {
  const ca = makeCA();
  const subject = generateKey();
  const base: CertificateRequest = {
    commonName: "dpo-webhook",
    notBefore: NOT_BEFORE,
    notAfter: NOT_AFTER,
    isCA: false,
    dnsNames: [DNS],
    subjectKey: subject.publicKey,
    issuer: { privateKey: ca.key.privateKey, certPem: ca.pem },
  };
  const leafPem = createCertificate(base);
  const ed25519 = generateKeyPairSync("ed25519");

  it.each<{ name: string; change: Partial<CertificateRequest>; error: RegExp }>([
    {
      name: "notAfter equal to notBefore",
      change: { notAfter: NOT_BEFORE },
      error: /notAfter .* must be after/,
    },
    {
      name: "notAfter before notBefore",
      change: { notBefore: NOT_AFTER, notAfter: NOT_BEFORE },
      error: /notAfter .* must be after/,
    },
    {
      name: "a validity shorter than a second",
      change: {
        notBefore: new Date("2024-01-01T00:00:00.100Z"),
        notAfter: new Date("2024-01-01T00:00:00.900Z"),
      },
      error: /must be after/,
    },
    { name: "an invalid Date", change: { notAfter: new Date("nope") }, error: /notAfter is an invalid Date/ },
    { name: "an empty commonName", change: { commonName: "" }, error: /commonName must be 1 to 64/ },
    {
      name: "a too long commonName",
      change: { commonName: "x".repeat(65) },
      error: /commonName must be 1 to 64/,
    },
    { name: "an invalid IPv4 address", change: { ipAddresses: ["10.0.0.256"] }, error: /invalid IP address/ },
    { name: "an invalid IPv6 address", change: { ipAddresses: ["fe80::1::2"] }, error: /invalid IP address/ },
    { name: "an invalid DNS name", change: { dnsNames: ["under_score.example"] }, error: /invalid DNS name/ },
    { name: "a non-ASCII DNS name", change: { dnsNames: ["bücher.example"] }, error: /invalid DNS name/ },
    { name: "a leaf without SANs", change: { dnsNames: [], ipAddresses: [] }, error: /needs at least one/ },
    { name: "a CA with SANs", change: { isCA: true }, error: /CA certificate takes no dnsNames/ },
    {
      name: "a private subjectKey",
      change: { subjectKey: subject.privateKey },
      error: /must be a public key/,
    },
    {
      name: "a non-EC issuer key",
      change: { issuer: { privateKey: ed25519.privateKey, certPem: ca.pem } },
      error: /must be an EC private key/,
    },
    {
      name: "an issuer key not matching the issuer certificate",
      change: { issuer: { privateKey: subject.privateKey, certPem: ca.pem } },
      error: /does not match issuer.certPem/,
    },
    {
      name: "an issuer certificate that is not a CA",
      change: { issuer: { privateKey: subject.privateKey, certPem: leafPem } },
      error: /is not a CA certificate/,
    },
    {
      name: "a self-signed certificate signed by another key",
      change: { isCA: true, dnsNames: [], issuer: { privateKey: ca.key.privateKey } },
      error: /self-signed certificate must be signed by subjectKey's pair/,
    },
    { name: "a zero serial", change: { serialNumber: Buffer.from([0, 0]) }, error: /must not be zero/ },
    { name: "a 21-octet serial", change: { serialNumber: Buffer.alloc(21, 1) }, error: /at most 20 octets/ },
    {
      name: "a 20-byte serial with the high bit set",
      change: { serialNumber: Buffer.alloc(20, 0xff) },
      error: /at most 20 octets/,
    },
  ])("$name", ({ change, error }) => {
    expect(() => createCertificate({ ...base, ...change })).toThrow(error);
  });
});
