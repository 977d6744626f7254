// The DevFS glob grammar: wildcards within a segment, and the segments of a glob.
import { describe, expect, it } from "vitest";
import { globSegments, matchGlobSegment } from "../../../src/contract/devfs-glob.js";

describe("matchGlobSegment", () => {
  it.each([
    ["ttyUSB*", "ttyUSB0", true],
    ["ttyUSB*", "ttyUSB", true],
    ["ttyUSB*", "ttyS0", false],
    ["ttyUSB?", "ttyUSB12", false],
    ["ttyUSB??", "ttyUSB12", true],
    ["*", "anything", true],
    ["*", ".hidden", false],
    [".*", ".hidden", true],
    ["a*b*c", "aXXbYYc", true],
    ["a*b*c", "aXXbYYcZ", false],
    ["a*b", "abab", true],
    ["*USB*", "ttyUSB0", true],
    ["null", "null", true],
    ["null", "nul", false],
    ["nul?", "null", true],
    ["", "", true],
    ["?", "", false],
    ["**", "x", true],
  ])("%s matches %s: %s", (pattern, name, want) => {
    expect(matchGlobSegment(pattern, name)).toBe(want);
  });
});

describe("globSegments", () => {
  it.each([
    ["/dev/ttyUSB*", ["dev", "ttyUSB*"]],
    ["//dev/./bus/usb/*/*", ["dev", "bus", "usb", "*", "*"]],
  ])("%s has segments %j", (glob, want) => {
    expect(globSegments(glob)).toEqual(want);
  });
});
