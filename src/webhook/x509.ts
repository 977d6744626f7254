// X.509 v3 certificates for the conversion webhook's self-managed CA and serving certificate. Node can parse and
// verify certificates but not create them, and a dependency (or openssl in the image) for two certificates is
// not worth it, so this hand-writes the few DER structures RFC 5280 needs. Keys are ECDSA P-256 and
// signatures ecdsa-with-SHA256: small, fast to generate at start-up, and accepted by the API server's TLS stack.
import {
  createHash,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  sign,
  X509Certificate,
  type KeyObject,
} from "node:crypto";
import { isIPv4, isIPv6 } from "node:net";

export interface KeyPair {
  privateKeyPem: string;
  publicKey: KeyObject;
  privateKey: KeyObject;
}

/** A fresh ECDSA P-256 key pair; the PEM is PKCS#8, which `tls` and `https` accept as `key`. */
export function generateKey(): KeyPair {
  const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const privateKeyPem = privateKey.export({ type: "pkcs8", format: "pem" }) as string;
  return { privateKeyPem, publicKey, privateKey };
}

export interface CertificateRequest {
  commonName: string;
  notBefore: Date;
  notAfter: Date;
  isCA: boolean;
  /** subjectAltName entries; a leaf (serving) certificate needs at least one, since TLS clients ignore the CN. */
  dnsNames?: string[];
  ipAddresses?: string[];
  /** The public key being certified. */
  subjectKey: KeyObject;
  /**
   * Who signs: the issuing CA's certificate and private key, or, with `certPem` omitted, a self-signed
   * certificate, where `privateKey` must be the private half of `subjectKey`.
   */
  issuer: { privateKey: KeyObject; certPem?: string };
  /** Unsigned big-endian; the default is 16 random bytes, which is what makes reissued certificates distinct. */
  serialNumber?: Buffer;
}

/** Builds, signs and PEM-encodes a certificate; throws an Error naming the problem on bad input. */
export function createCertificate(req: CertificateRequest): string {
  const notBefore = wholeSeconds(req.notBefore, "notBefore");
  const notAfter = wholeSeconds(req.notAfter, "notAfter");
  if (notAfter.getTime() <= notBefore.getTime()) {
    throw new Error(
      `notAfter (${notAfter.toISOString()}) must be after notBefore (${notBefore.toISOString()})`,
    );
  }
  if (req.commonName.length === 0 || req.commonName.length > 64) {
    // 64 is ub-common-name in RFC 5280's ASN.1 module.
    throw new Error(`commonName must be 1 to 64 characters, got ${req.commonName.length}`);
  }
  if (req.subjectKey.type !== "public") throw new Error("subjectKey must be a public key");
  const { privateKey } = req.issuer;
  if (privateKey.type !== "private" || privateKey.asymmetricKeyType !== "ec") {
    throw new Error("issuer.privateKey must be an EC private key (signatures are ecdsa-with-SHA256)");
  }

  const dnsNames = req.dnsNames ?? [];
  const ipAddresses = req.ipAddresses ?? [];
  const sanCount = dnsNames.length + ipAddresses.length;
  if (req.isCA && sanCount > 0) throw new Error("a CA certificate takes no dnsNames or ipAddresses");
  if (!req.isCA && sanCount === 0) {
    throw new Error(
      "a leaf certificate needs at least one dnsName or ipAddress: TLS clients match only SANs",
    );
  }

  const spki = req.subjectKey.export({ type: "spki", format: "der" });
  const subjectName = name(req.commonName);
  const signerSpki = createPublicKey(privateKey).export({ type: "spki", format: "der" });
  let issuerName: Buffer;
  let authorityKeyId: Buffer | undefined;
  if (req.issuer.certPem === undefined) {
    if (!signerSpki.equals(spki))
      throw new Error("a self-signed certificate must be signed by subjectKey's pair");
    issuerName = subjectName;
  } else {
    const issuerCert = new X509Certificate(req.issuer.certPem);
    if (!issuerCert.ca) throw new Error(`issuer ${issuerCert.subject} is not a CA certificate`);
    const issuerSpki = issuerCert.publicKey.export({ type: "spki", format: "der" });
    if (!signerSpki.equals(issuerSpki)) {
      throw new Error("issuer.privateKey does not match issuer.certPem");
    }
    // The issuer field must be byte-identical to the CA's subject for chain building, so copy it, and point
    // authorityKeyIdentifier at the CA's own subjectKeyIdentifier rather than recomputing one.
    const parts = certificateParts(issuerCert.raw);
    issuerName = parts.subject;
    authorityKeyId = parts.subjectKeyId ?? keyIdentifier(issuerSpki);
  }

  const serial = req.serialNumber ?? defaultSerial();
  const serialInt = integer(serial);
  // RFC 5280 4.1.2.2: positive, non-zero, at most 20 octets as encoded (content after the 2-byte header;
  // anything longer than 127 octets has a longer header but is rejected all the same).
  if (serial.every((b) => b === 0)) throw new Error("serialNumber must not be zero");
  if (serialInt.length - 2 > 20) throw new Error("serialNumber must encode in at most 20 octets");

  const extensions = [
    extension(OID.basicConstraints, true, sequence(...(req.isCA ? [boolean(true)] : []))),
    extension(
      OID.keyUsage,
      true,
      req.isCA
        ? namedBits([KeyUsage.digitalSignature, KeyUsage.keyCertSign, KeyUsage.cRLSign])
        : namedBits([KeyUsage.digitalSignature]),
    ),
    extension(OID.subjectKeyIdentifier, false, octetString(keyIdentifier(spki))),
  ];
  if (authorityKeyId !== undefined) {
    extensions.push(extension(OID.authorityKeyIdentifier, false, sequence(tlv(0x80, authorityKeyId))));
  }
  if (!req.isCA) {
    extensions.push(extension(OID.extKeyUsage, false, sequence(oid(OID.serverAuth))));
    const names = [
      ...dnsNames.map((d) => tlv(0x82, Buffer.from(checkDnsName(d), "ascii"))),
      ...ipAddresses.map((ip) => tlv(0x87, ipBytes(ip))),
    ];
    extensions.push(extension(OID.subjectAltName, false, sequence(...names)));
  }

  const signatureAlgorithm = sequence(oid(OID.ecdsaWithSha256));
  const tbs = sequence(
    context(0, integer(2)), // v3 is encoded as 2
    serialInt,
    signatureAlgorithm,
    issuerName,
    sequence(time(notBefore), time(notAfter)),
    subjectName,
    spki,
    context(3, sequence(...extensions)),
  );
  const signature = sign("sha256", tbs, { key: privateKey, dsaEncoding: "der" });
  const der = sequence(tbs, signatureAlgorithm, bitString(signature));
  const base64 = der.toString("base64").replace(/.{1,64}/g, "$&\n");
  return `-----BEGIN CERTIFICATE-----\n${base64}-----END CERTIFICATE-----\n`;
}

const OID = {
  commonName: "2.5.4.3",
  ecdsaWithSha256: "1.2.840.10045.4.3.2",
  subjectKeyIdentifier: "2.5.29.14",
  keyUsage: "2.5.29.15",
  subjectAltName: "2.5.29.17",
  basicConstraints: "2.5.29.19",
  authorityKeyIdentifier: "2.5.29.35",
  extKeyUsage: "2.5.29.37",
  serverAuth: "1.3.6.1.5.5.7.3.1",
} as const;

/** Bit positions of RFC 5280's KeyUsage BIT STRING. */
export const KeyUsage = { digitalSignature: 0, keyEncipherment: 2, keyCertSign: 5, cRLSign: 6 } as const;

function wholeSeconds(date: Date, field: string): Date {
  const ms = date.getTime();
  if (Number.isNaN(ms)) throw new Error(`${field} is an invalid Date`);
  // Certificate times have no fraction of a second in DER (RFC 5280 4.1.2.5), so drop it up front; validity
  // checks and the encoded value then agree.
  return new Date(Math.floor(ms / 1000) * 1000);
}

function defaultSerial(): Buffer {
  const serial = randomBytes(16);
  // Clear the top bit so the INTEGER needs no 0x00 pad, and set the next so it never shrinks or becomes zero:
  // always exactly 16 octets, still 126 random bits.
  serial[0] = (serial[0]! & 0x7f) | 0x40;
  return serial;
}

function name(commonName: string): Buffer {
  // UTF8String, as RFC 5280 4.1.2.4 wants for new certificates.
  return sequence(set(sequence(oid(OID.commonName), tlv(0x0c, Buffer.from(commonName, "utf8")))));
}

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  // critical is DEFAULT FALSE, and DER omits a field equal to its default.
  return sequence(oid(id), ...(critical ? [boolean(true)] : []), octetString(value));
}

/** RFC 5280 4.2.1.2 method (1): SHA-1 of the subjectPublicKey BIT STRING's value, without its unused-bits byte. */
function keyIdentifier(spki: Buffer): Buffer {
  const [, key] = children(spki, readTlv(spki, 0));
  if (key === undefined || key.tag !== 0x03) throw new Error("malformed SubjectPublicKeyInfo");
  return createHash("sha1")
    .update(spki.subarray(key.contentStart + 1, key.end))
    .digest();
}

function checkDnsName(dnsName: string): string {
  // Letters, digits and hyphens per label, an optional leading wildcard label; dNSName is an IA5String, so
  // anything non-ASCII (an unconverted IDN) is a mistake here.
  const label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
  if (dnsName.length > 253 || !new RegExp(`^(?:\\*\\.)?${label}(?:\\.${label})*$`).test(dnsName)) {
    throw new Error(`invalid DNS name ${JSON.stringify(dnsName)}`);
  }
  return dnsName;
}

/** The 4- or 16-byte iPAddress form of an IPv4 or IPv6 address in text. */
export function ipBytes(ip: string): Buffer {
  // A zone index (fe80::1%eth0) names a local interface and has no place in a certificate.
  if (isIPv4(ip)) return Buffer.from(ip.split(".").map(Number));
  if (!isIPv6(ip) || ip.includes("%")) throw new Error(`invalid IP address ${JSON.stringify(ip)}`);
  // Expand "::" into the zero groups it stands for; a trailing dotted quad (::ffff:192.0.2.1) is two groups.
  const groups = (part: string): number[] =>
    part === ""
      ? []
      : part.split(":").flatMap((g) => {
          if (!g.includes(".")) return [parseInt(g, 16)];
          const [a, b, c, d] = g.split(".").map(Number) as [number, number, number, number];
          return [(a << 8) | b, (c << 8) | d];
        });
  const [head = "", tail] = ip.split("::");
  const left = groups(head);
  const right = tail === undefined ? [] : groups(tail);
  const all = [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
  const out = Buffer.alloc(16);
  all.forEach((g, i) => out.writeUInt16BE(g, i * 2));
  return out;
}

// --- DER encoding (X.690), only what a certificate needs. Tags are single-byte throughout. ---

/** Definite length: short form below 128, else 0x80 | byte count followed by the big-endian length. */
export function length(n: number): Buffer {
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`invalid DER length ${n}`);
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let rest = n; rest > 0; rest = Math.floor(rest / 256)) bytes.unshift(rest % 256);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

export function tlv(tag: number, content: Buffer): Buffer {
  return Buffer.concat([Buffer.from([tag]), length(content.length), content]);
}

export const sequence = (...items: Buffer[]): Buffer => tlv(0x30, Buffer.concat(items));
/** SET, for the one-element RelativeDistinguishedName; DER would sort several elements, which never arises. */
export const set = (...items: Buffer[]): Buffer => tlv(0x31, Buffer.concat(items));
/** A constructed context-specific tag, [n] EXPLICIT around an encoded value. */
export const context = (n: number, content: Buffer): Buffer => tlv(0xa0 | n, content);
export const boolean = (value: boolean): Buffer => tlv(0x01, Buffer.from([value ? 0xff : 0x00]));
export const octetString = (content: Buffer): Buffer => tlv(0x04, content);
/** A BIT STRING of whole bytes: the leading 0 says no bits of the last byte are unused. */
export const bitString = (content: Buffer): Buffer => tlv(0x03, Buffer.concat([Buffer.from([0]), content]));

/**
 * A non-negative INTEGER from a number or unsigned big-endian bytes: minimal, so leading zeros go, and a 0x00
 * is put back when the high bit is set, since DER integers are two's complement.
 */
export function integer(value: number | Buffer): Buffer {
  let bytes: Buffer;
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value) || value < 0) throw new Error(`invalid INTEGER ${value}`);
    const hex = value.toString(16);
    bytes = Buffer.from(hex.length % 2 ? `0${hex}` : hex, "hex");
  } else {
    bytes = value;
  }
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0) start++;
  bytes = bytes.length === 0 ? Buffer.from([0]) : bytes.subarray(start);
  if (bytes[0]! & 0x80) bytes = Buffer.concat([Buffer.from([0]), bytes]);
  return tlv(0x02, bytes);
}

/** OBJECT IDENTIFIER: the first two arcs share a byte (40 * a + b), then each arc in base 128, high bit = more. */
export function oid(dotted: string): Buffer {
  const arcs = dotted.split(".").map((s) => (/^\d+$/.test(s) ? Number(s) : NaN));
  const [first, second] = arcs;
  if (
    arcs.length < 2 ||
    arcs.some((a) => !Number.isSafeInteger(a)) ||
    first! > 2 ||
    (first! < 2 && second! >= 40)
  ) {
    throw new Error(`invalid OID ${JSON.stringify(dotted)}`);
  }
  const out: number[] = [];
  for (const arc of [first! * 40 + second!, ...arcs.slice(2)]) {
    const base128 = [arc % 128];
    for (let rest = Math.floor(arc / 128); rest > 0; rest = Math.floor(rest / 128))
      base128.unshift(0x80 | (rest % 128));
    out.push(...base128);
  }
  return tlv(0x06, Buffer.from(out));
}

/**
 * A named-bit BIT STRING (KeyUsage): DER drops trailing zero bits, so the unused-bits count is whatever
 * remains of the last byte after the highest set bit.
 */
export function namedBits(bits: number[]): Buffer {
  if (bits.length === 0) return tlv(0x03, Buffer.from([0]));
  const highest = Math.max(...bits);
  const bytes = Buffer.alloc(Math.floor(highest / 8) + 1);
  for (const bit of bits) bytes[bit >> 3]! |= 0x80 >> (bit & 7);
  return tlv(0x03, Buffer.concat([Buffer.from([7 - (highest & 7)]), bytes]));
}

/** RFC 5280 4.1.2.5: UTCTime (two-digit year) for 1950 through 2049, GeneralizedTime outside; always Zulu. */
export function time(date: Date): Buffer {
  const year = date.getUTCFullYear();
  if (Number.isNaN(year) || year < 0 || year > 9999) throw new Error(`date out of range: ${String(date)}`);
  const pad = (n: number, width = 2): string => String(n).padStart(width, "0");
  const rest =
    pad(date.getUTCMonth() + 1) +
    pad(date.getUTCDate()) +
    pad(date.getUTCHours()) +
    pad(date.getUTCMinutes()) +
    pad(date.getUTCSeconds()) +
    "Z";
  return year >= 1950 && year < 2050
    ? tlv(0x17, Buffer.from(pad(year % 100) + rest, "ascii"))
    : tlv(0x18, Buffer.from(pad(year, 4) + rest, "ascii"));
}

// --- DER reading, just enough to take the subject and subjectKeyIdentifier out of an issuer certificate. ---

interface Tlv {
  tag: number;
  start: number;
  contentStart: number;
  end: number;
}

function readTlv(buf: Buffer, start: number): Tlv {
  const tag = buf[start];
  let len = buf[start + 1];
  let contentStart = start + 2;
  if (tag === undefined || len === undefined) throw new Error("truncated DER");
  if (len & 0x80) {
    const count = len & 0x7f;
    if (count === 0 || count > 4 || contentStart + count > buf.length)
      throw new Error("unsupported DER length");
    len = buf.readUIntBE(contentStart, count);
    contentStart += count;
  }
  const end = contentStart + len;
  if (end > buf.length) throw new Error("truncated DER");
  return { tag, start, contentStart, end };
}

function children(buf: Buffer, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  for (let at = parent.contentStart; at < parent.end; at = out[out.length - 1]!.end)
    out.push(readTlv(buf, at));
  return out;
}

function certificateParts(der: Buffer): { subject: Buffer; subjectKeyId: Buffer | undefined } {
  const tbs = readTlv(der, readTlv(der, 0).contentStart);
  const fields = children(der, tbs);
  // version [0] is optional; then serialNumber, signature, issuer, validity, subject.
  const subject = fields[(fields[0]?.tag === 0xa0 ? 1 : 0) + 4];
  if (subject === undefined) throw new Error("malformed issuer certificate");
  let subjectKeyId: Buffer | undefined;
  const extensions = fields.find((f) => f.tag === 0xa3);
  const skiOid = oid(OID.subjectKeyIdentifier);
  for (const ext of extensions ? children(der, children(der, extensions)[0]!) : []) {
    const parts = children(der, ext);
    const value = parts[parts.length - 1]!;
    if (der.subarray(parts[0]!.start, parts[0]!.end).equals(skiOid)) {
      const inner = readTlv(der, value.contentStart);
      subjectKeyId = der.subarray(inner.contentStart, inner.end);
    }
  }
  return { subject: der.subarray(subject.start, subject.end), subjectKeyId };
}
