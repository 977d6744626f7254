// --metrics-addr, --health-addr and --webhook-addr: what each form listens on; and the flags of argv, as node:util
// parseArgs reads them.
import fc from "fast-check";
import { parseArgs } from "node:util";
import { describe, expect, it } from "vitest";
import {
  argsError,
  parseFlagArgs,
  parseListenAddress,
  UsageError,
  type FlagSpec,
} from "../../../src/cli/flags.js";

describe("parseListenAddress", () => {
  it.each([
    // `:PORT` and `PORT` are every address of both families, as in Go's net.Listen: no host to look up.
    { value: ":8080", want: { host: undefined, port: 8080 } },
    { value: "8080", want: { host: undefined, port: 8080 } },
    { value: ":0", want: { host: undefined, port: 0 } },
    { value: "0.0.0.0:8080", want: { host: "0.0.0.0", port: 8080 } },
    { value: "127.0.0.1:0", want: { host: "127.0.0.1", port: 0 } },
    { value: "[::1]:9090", want: { host: "::1", port: 9090 } },
    { value: "[::]:9090", want: { host: "::", port: 9090 } },
    { value: "localhost:65535", want: { host: "localhost", port: 65535 } },
    { value: "0", want: undefined },
    { value: "", want: undefined },
  ])("$value", ({ value, want }) => {
    expect(parseListenAddress("metrics-addr", value)).toEqual(want);
  });

  it.each([":http", "host:", ":65536", "1.2.3.4:-1", ":8080x"])("refuses %s naming the flag", (value) => {
    expect(() => parseListenAddress("health-addr", value)).toThrow(UsageError);
    expect(() => parseListenAddress("health-addr", value)).toThrow(/--health-addr: '.*' is not HOST:PORT/);
  });
});

const SPECS: FlagSpec[] = [
  { name: "config", env: "C", description: "" },
  { name: "output", env: "O", description: "", short: "o" },
  { name: "device-plugin-dir", env: "D", description: "" },
];

type Parsed = { values: Record<string, string>; positionals: string[] } | { error: string };

/** What node:util parseArgs (strict, every flag taking a value) and argsError make of argv. */
function byParseArgs(argv: string[]): Parsed {
  try {
    const { values, positionals } = parseArgs({
      args: argv,
      options: Object.fromEntries(
        SPECS.map((s) => [s.name, { type: "string" as const, ...(s.short ? { short: s.short } : {}) }]),
      ),
      allowPositionals: true,
      strict: true,
    });
    return { values: { ...(values as Record<string, string>) }, positionals };
  } catch (err) {
    return { error: argsError(err).message };
  }
}

function byParseFlagArgs(argv: string[]): Parsed {
  try {
    return parseFlagArgs(SPECS, argv);
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return { error: (err as Error).message };
  }
}

const TOKENS = [
  "--config",
  "--config=c.yaml",
  "--config=",
  "--config=-x",
  "--config=a=b",
  "--output",
  "-o",
  "-ojson",
  "-o=json",
  "-oo",
  "--device-plugin-dir",
  "--device-plugin-dir=/d",
  "--bogus",
  "--bogus=1",
  "-x",
  "-xyz",
  "-1",
  "---x",
  "--=x",
  "--",
  "-",
  "json",
  "c.yaml",
  "a=b",
];

describe("parseFlagArgs", () => {
  it.each([
    { argv: ["--config", "c.yaml", "pos"], want: { values: { config: "c.yaml" }, positionals: ["pos"] } },
    {
      argv: ["--config=-x", "-o", "json"],
      want: { values: { config: "-x", output: "json" }, positionals: [] },
    },
    { argv: ["--config", "a", "--config", "b"], want: { values: { config: "b" }, positionals: [] } },
    { argv: ["--", "--config", "-o"], want: { values: {}, positionals: ["--config", "-o"] } },
    { argv: ["-ojson", "-"], want: { values: { output: "json" }, positionals: ["-"] } },
    {
      argv: ["--bogus"],
      want: { error: "unknown flag '--bogus' (a file name starting with '-' goes after '--')" },
    },
    { argv: ["-x"], want: { error: "unknown flag '-x' (a file name starting with '-' goes after '--')" } },
    // A quote in an unknown flag is part of its name (parseArgs quotes the name in its message).
    { argv: ["-'"], want: { error: "unknown flag '-'' (a file name starting with '-' goes after '--')" } },
    {
      argv: ["--a'b=1"],
      want: { error: "unknown flag '--a'b' (a file name starting with '-' goes after '--')" },
    },
    { argv: ["--config"], want: { error: "--config needs a value" } },
    { argv: ["-o"], want: { error: "--output needs a value" } },
    {
      argv: ["--config", "--output"],
      want: { error: "--config needs a value (--config=-x for one starting with '-')" },
    },
  ])("$argv", ({ argv, want }) => {
    expect(byParseFlagArgs(argv)).toEqual(want);
    expect(byParseArgs(argv)).toEqual(want);
  });

  it("gives node:util parseArgs' answer, or its error in argsError's words, for any argv", () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.constantFrom(...TOKENS), fc.string({ maxLength: 4 })), { maxLength: 6 }),
        (argv) => {
          expect(byParseFlagArgs(argv)).toEqual(byParseArgs(argv));
        },
      ),
      { numRuns: 5000 },
    );
  });
});
