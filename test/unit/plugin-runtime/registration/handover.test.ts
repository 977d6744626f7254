// Which instance of a DRA driver on a node is the newest, read from the names of their DRA sockets.
import { describe, expect, it } from "vitest";
import {
  compareInstances,
  newerInstanceSockets,
  parseInstanceSocket,
} from "../../../../src/plugin-runtime/registration/handover.js";
import { socketFileName } from "../../../../src/plugin-runtime/registration/sockets.js";

const name = (startedAtMs: number, sequence = 1): string => socketFileName("dra-", startedAtMs, sequence);

describe("parseInstanceSocket", () => {
  it("reads back what socketFileName wrote", () => {
    const key = parseInstanceSocket("dra-", socketFileName("dra-", 1_763_950_000_123, 7));
    expect(key).toEqual({ startedAtMs: 1_763_950_000_123, pid: process.pid, sequence: 7 });
  });

  it.each([
    ["another prefix", "dpo-x-1-2-3.sock"],
    ["a registration socket", "dra-abc-1-1-reg.sock"],
    ["not a socket name", "dra-abc-1-1.json"],
    ["missing a part", "dra-abc-1.sock"],
    ["upper case", "dra-ABC-1-1.sock"],
    ["a sequence in base 36", "dra-abc-1-z.sock"],
    ["empty", ""],
  ])("refuses %s", (_, file) => {
    expect(parseInstanceSocket("dra-", file)).toBeUndefined();
  });
});

describe("compareInstances", () => {
  it.each([
    [
      "a later start is newer",
      { startedAtMs: 2, pid: 1, sequence: 1 },
      { startedAtMs: 1, pid: 9, sequence: 9 },
      1,
    ],
    [
      "the same start: the higher pid",
      { startedAtMs: 1, pid: 2, sequence: 1 },
      { startedAtMs: 1, pid: 1, sequence: 9 },
      1,
    ],
    [
      "the same start and pid: the sequence",
      { startedAtMs: 1, pid: 1, sequence: 1 },
      { startedAtMs: 1, pid: 1, sequence: 2 },
      -1,
    ],
    ["itself", { startedAtMs: 1, pid: 1, sequence: 1 }, { startedAtMs: 1, pid: 1, sequence: 1 }, 0],
  ])("%s", (_, a, b, sign) => {
    expect(Math.sign(compareInstances(a, b))).toBe(sign);
    expect(Math.sign(compareInstances(b, a))).toBe(sign === 0 ? 0 : -sign);
  });
});

describe("newerInstanceSockets", () => {
  const own = { startedAtMs: 2_000, pid: process.pid, sequence: 1 };

  it("lists only newer instances, newest first, ignoring other files and itself", () => {
    const names = [
      name(1_000),
      name(2_000),
      name(3_000),
      name(5_000),
      "dra-junk.sock",
      "serialize.lock",
      name(4_000, 3),
    ];
    expect(newerInstanceSockets("dra-", own, names)).toEqual([name(5_000), name(4_000, 3), name(3_000)]);
  });

  it("is empty for the newest instance", () => {
    expect(newerInstanceSockets("dra-", own, [name(1_000), name(2_000)])).toEqual([]);
  });

  it("agrees between two instances: exactly one of them has no newer one", () => {
    const a = name(2_000, 1);
    const b = name(2_000, 2);
    const keyA = parseInstanceSocket("dra-", a)!;
    const keyB = parseInstanceSocket("dra-", b)!;
    const newest = [keyA, keyB].filter((k) => newerInstanceSockets("dra-", k, [a, b]).length === 0);
    expect(newest).toEqual([keyB]);
  });
});
