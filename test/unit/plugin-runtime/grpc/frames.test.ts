// The gRPC layer's framing and status wire forms (ADR 0008): messages read however the DATA frames cut
// them, the 4 MiB limit from the length prefix, compression refused, grpc-message and grpc-timeout as the
// spec writes them.
import { describe, expect, it } from "vitest";
import { FrameError, FrameReader, frame } from "../../../../src/plugin-runtime/grpc/frames.js";
import {
  decodeGrpcMessage,
  encodeGrpcMessage,
  parseGrpcTimeout,
  statusName,
} from "../../../../src/plugin-runtime/grpc/status.js";

describe("FrameReader", () => {
  it("reads messages cut at every byte, and several in one chunk", () => {
    const a = Buffer.from("first message");
    const b = Buffer.alloc(0);
    const c = Buffer.from("third");
    const wire = Buffer.concat([frame(a), frame(b), frame(c)]);
    const reader = new FrameReader(1024);
    const got: Buffer[] = [];
    for (const byte of wire) got.push(...reader.push(Buffer.from([byte])));
    expect(got.map((m) => m.toString())).toEqual(["first message", "", "third"]);
    expect(new FrameReader(1024).push(wire).map((m) => m.toString())).toEqual(["first message", "", "third"]);
  });

  it("refuses a message over the limit from its prefix, before its bytes come", () => {
    const head = frame(Buffer.alloc(11)).subarray(0, 5);
    expect(() => new FrameReader(10).push(head)).toThrow(FrameError);
    expect(() => new FrameReader(10).push(head)).toThrow("larger than max (11 vs 10)");
    expect(new FrameReader(11).push(head)).toEqual([]);
  });

  it("refuses a compressed message", () => {
    const compressed = frame(Buffer.from("x"));
    compressed[0] = 1;
    expect(() => new FrameReader(10).push(compressed)).toThrow(
      expect.objectContaining({ kind: "compressed" }),
    );
  });
});

describe("status wire forms", () => {
  it.each([
    ["plain text", "plain text"],
    ["100% sure", "100%25 sure"],
    ["line\nbreak", "line%0Abreak"],
    ["☃", "%E2%98%83"],
  ])("grpc-message of %j is %j and reads back", (message, wire) => {
    expect(encodeGrpcMessage(message)).toBe(wire);
    expect(decodeGrpcMessage(wire)).toBe(message);
  });

  it("keeps a malformed escape as it is", () => {
    expect(decodeGrpcMessage("50%Z and %")).toBe("50%Z and %");
  });

  it.each([
    ["100m", 100],
    ["2S", 2_000],
    ["1M", 60_000],
    ["1H", 3_600_000],
    ["5000u", 5],
    ["99999999n", 99.999999],
  ])("grpc-timeout %s is %d ms", (value, ms) => {
    expect(parseGrpcTimeout(value)).toBeCloseTo(ms);
  });

  it.each(["", "10", "123456789m", "1s", "-1m", "1.5S"])("grpc-timeout %j is not one", (value) => {
    expect(parseGrpcTimeout(value)).toBeUndefined();
  });

  it("names the codes, and gives an unknown one its number", () => {
    expect(statusName(3)).toBe("INVALID_ARGUMENT");
    expect(statusName(99)).toBe("99");
  });
});
