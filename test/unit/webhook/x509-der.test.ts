// The X.509 DER encoder's byte vectors: lengths, integers, OIDs, SEQUENCE, SET and context tags, BOOLEAN and
// the strings, key-usage bits, times, and IP addresses as the subjectAltName holds them.
import { describe, expect, it } from "vitest";
import {
  bitString,
  boolean,
  context,
  integer,
  ipBytes,
  KeyUsage,
  length,
  namedBits,
  octetString,
  oid,
  sequence,
  set,
  time,
} from "../../../src/webhook/x509.js";

const hex = (b: Buffer): string => b.toString("hex").replace(/(..)(?!$)/g, "$1 ");

describe("DER encoding", () => {
  it.each([
    { n: 0, der: "00" },
    { n: 127, der: "7f" },
    { n: 128, der: "81 80" },
    { n: 200, der: "81 c8" },
    { n: 255, der: "81 ff" },
    { n: 256, der: "82 01 00" },
    { n: 65535, der: "82 ff ff" },
    { n: 65536, der: "83 01 00 00" },
  ])("length $n", ({ n, der }) => {
    expect(hex(length(n))).toBe(der);
  });

  it.each([-1, 1.5, NaN])("length %s is rejected", (n) => {
    expect(() => length(n)).toThrow(/invalid DER length/);
  });

  it.each([
    { value: 0, der: "02 01 00" },
    { value: 1, der: "02 01 01" },
    { value: 127, der: "02 01 7f" },
    { value: 128, der: "02 02 00 80" },
    { value: 256, der: "02 02 01 00" },
    { value: 65535, der: "02 03 00 ff ff" },
    { value: Buffer.from([]), der: "02 01 00" },
    { value: Buffer.from([0, 0, 1]), der: "02 01 01" },
    { value: Buffer.from([0, 0x80]), der: "02 02 00 80" },
    { value: Buffer.from([0xff, 0x01]), der: "02 03 00 ff 01" },
  ])("integer $value", ({ value, der }) => {
    expect(hex(integer(value))).toBe(der);
  });

  it.each([
    { dotted: "1.2.840.10045.4.3.2", der: "06 08 2a 86 48 ce 3d 04 03 02" },
    { dotted: "2.5.4.3", der: "06 03 55 04 03" },
    { dotted: "2.5.29.19", der: "06 03 55 1d 13" },
    { dotted: "1.3.6.1.5.5.7.3.1", der: "06 08 2b 06 01 05 05 07 03 01" },
    { dotted: "1.2.840.113549", der: "06 06 2a 86 48 86 f7 0d" },
    // The combined first byte may itself need two base-128 digits: 2 * 40 + 999 = 1079.
    { dotted: "2.999.3", der: "06 03 88 37 03" },
  ])("oid $dotted", ({ dotted, der }) => {
    expect(hex(oid(dotted))).toBe(der);
  });

  it.each(["1", "", "3.1", "1.40", "1.2.x", "1..2", "1.2.-3"])("oid %j is rejected", (dotted) => {
    expect(() => oid(dotted)).toThrow(/invalid OID/);
  });

  it("wraps contents in SEQUENCE, SET and context tags, long lengths included", () => {
    const content = Buffer.alloc(200, 0xab);
    expect(hex(sequence(content).subarray(0, 4))).toBe("30 81 c8 ab");
    expect(sequence(content)).toHaveLength(203);
    expect(hex(sequence())).toBe("30 00");
    expect(hex(sequence(integer(1), integer(2)))).toBe("30 06 02 01 01 02 01 02");
    expect(hex(set(integer(1)))).toBe("31 03 02 01 01");
    expect(hex(context(0, integer(2)))).toBe("a0 03 02 01 02");
    expect(hex(context(3, sequence()))).toBe("a3 02 30 00");
  });

  it("encodes BOOLEAN, OCTET STRING and BIT STRING", () => {
    expect(hex(boolean(true))).toBe("01 01 ff");
    expect(hex(boolean(false))).toBe("01 01 00");
    expect(hex(octetString(Buffer.from([1, 2])))).toBe("04 02 01 02");
    expect(hex(octetString(Buffer.alloc(0)))).toBe("04 00");
    expect(hex(bitString(Buffer.from([0xca, 0xfe])))).toBe("03 03 00 ca fe");
  });

  it.each([
    { name: "digitalSignature", bits: [KeyUsage.digitalSignature], der: "03 02 07 80" },
    {
      name: "CA usages",
      bits: [KeyUsage.digitalSignature, KeyUsage.keyCertSign, KeyUsage.cRLSign],
      der: "03 02 01 86",
    },
    { name: "keyCertSign + cRLSign", bits: [KeyUsage.keyCertSign, KeyUsage.cRLSign], der: "03 02 01 06" },
    { name: "bit 8 spills into a second byte", bits: [0, 8], der: "03 03 07 80 80" },
    { name: "no bits", bits: [], der: "03 01 00" },
  ])("named bits: $name", ({ bits, der }) => {
    expect(hex(namedBits(bits))).toBe(der);
  });

  it.each([
    { iso: "2024-01-02T03:04:05Z", tag: 0x17, text: "240102030405Z" },
    { iso: "1950-01-01T00:00:00Z", tag: 0x17, text: "500101000000Z" },
    { iso: "2049-12-31T23:59:59Z", tag: 0x17, text: "491231235959Z" },
    { iso: "2050-01-01T00:00:00Z", tag: 0x18, text: "20500101000000Z" },
    { iso: "1949-12-31T23:59:59Z", tag: 0x18, text: "19491231235959Z" },
    { iso: "9999-12-31T23:59:59Z", tag: 0x18, text: "99991231235959Z" },
  ])("time $iso", ({ iso, tag, text }) => {
    const der = time(new Date(iso));
    expect(der[0]).toBe(tag);
    expect(der[1]).toBe(text.length);
    expect(der.subarray(2).toString("ascii")).toBe(text);
  });

  it("rejects an invalid date", () => {
    expect(() => time(new Date("nope"))).toThrow(/out of range/);
  });
});

describe("ipBytes", () => {
  it.each([
    { ip: "127.0.0.1", bytes: "7f 00 00 01" },
    { ip: "10.96.0.1", bytes: "0a 60 00 01" },
    { ip: "::1", bytes: "00 ".repeat(15) + "01" },
    { ip: "::", bytes: "00 ".repeat(15) + "00" },
    { ip: "2001:db8::1", bytes: "20 01 0d b8 " + "00 ".repeat(11) + "01" },
    { ip: "fd00:1:2:3:4:5:6:7", bytes: "fd 00 00 01 00 02 00 03 00 04 00 05 00 06 00 07" },
    { ip: "1::", bytes: "00 01 " + "00 ".repeat(13) + "00" },
    { ip: "::ffff:192.0.2.1", bytes: "00 ".repeat(10) + "ff ff c0 00 02 01" },
    { ip: "2001:DB8:0:0:8:800:200C:417A", bytes: "20 01 0d b8 00 00 00 00 00 08 08 00 20 0c 41 7a" },
  ])("$ip", ({ ip, bytes }) => {
    expect(hex(ipBytes(ip))).toBe(bytes);
  });

  it.each(["", "256.0.0.1", "1.2.3", "01.2.3.4", "::1::", "1:2:3:4:5:6:7:8:9", "fe80::1%eth0", "localhost"])(
    "%j is rejected",
    (ip) => {
      expect(() => ipBytes(ip)).toThrow(/invalid IP address/);
    },
  );
});
