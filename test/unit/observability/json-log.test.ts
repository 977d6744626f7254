// The plugin's logger (json-log.ts, no pino) writes the lines the operator's pino logger writes for the
// same calls: the format docs/logging.md documents is one contract for both.
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createJsonLogger, type LogLevelName, type Logger } from "../../../src/observability/json-log.js";
import { createLogger } from "../../../src/observability/log.js";

const bindings = { component: "plugin", config: "c", resource: "example.com/foo", node: "n1" };

/** Both loggers at `level`, each writing into its own array of lines. */
function both(level: LogLevelName): {
  pino: Logger;
  json: Logger;
  lines: { pino: string[]; json: string[] };
} {
  const lines = { pino: [] as string[], json: [] as string[] };
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.pino.push(...chunk.toString("utf8").split("\n").filter(Boolean));
      done();
    },
  });
  const pino = createLogger(level, bindings, sink);
  const json = createJsonLogger(level, bindings, {
    write: (line: string) => lines.json.push(line.replace(/\n$/, "")),
  });
  return { pino, json, lines };
}

/** The line with its time blanked: the two loggers write it a moment apart. */
const timeless = (line: string): string => line.replace(/"time":"[^"]+"/, '"time":"T"');

describe("createJsonLogger", () => {
  it("writes, for each call form dpo uses, the line pino writes, byte for byte but the time", () => {
    const { pino, json, lines } = both("trace");
    const err = new TypeError("bad thing");
    const calls: ((l: Logger) => void)[] = [
      (l) => l.info("plain message"),
      (l) => l.warn({ socket: "/x.sock", registerAgainInMs: 250 }, "with fields"),
      (l) => l.error({ err: "a message string" }, "error as a string"),
      (l) => l.error({ err, resource: "other" }, "an Error and a repeated binding"),
      (l) => l.error(err, "an Error first"),
      (l) => l.debug({ nested: { a: [1, 2], b: null }, gone: undefined }, "nested, and an undefined field"),
      (l) => l.trace({ quote: 'say "hi"\n', unicode: "é ☃" }, "escapes"),
      (l) => l.info({ only: "fields" }),
      (l) => l.child({ component: "dra", driver: "d" }).info({ node: "n2" }, "a child's line"),
      (l) => l.child({ a: 1 }).child({ a: 2, b: 3 }).warn("a grandchild's line"),
      (l) => l.fatal("fatal"),
    ];
    for (const call of calls) {
      call(pino);
      call(json);
    }
    expect(lines.json).toHaveLength(calls.length);
    expect(lines.json.map(timeless)).toEqual(lines.pino.map(timeless));
    expect(JSON.parse(lines.json[0]!)).toMatchObject({ level: "info", msg: "plain message" });
    expect(JSON.parse(lines.json[0]!)["time"]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it.each<[LogLevelName, number]>([
    ["trace", 6],
    ["debug", 5],
    ["info", 4],
    ["warn", 3],
    ["error", 2],
    ["silent", 0],
  ])("at %s writes what pino writes at that level (%i of 6 lines)", (level, count) => {
    const { pino, json, lines } = both(level);
    for (const l of [pino, json]) {
      l.trace("t");
      l.debug("d");
      l.info("i");
      l.warn("w");
      l.error("e");
      l.fatal("f");
    }
    expect(lines.json).toHaveLength(count);
    expect(lines.json.map(timeless)).toEqual(lines.pino.map(timeless));
  });

  it("writes a field that refers to itself instead of throwing", () => {
    const { json, lines } = both("info");
    const loop: Record<string, unknown> = { name: "loop" };
    loop["self"] = loop;
    json.info({ loop }, "circular");
    expect(JSON.parse(lines.json[0]!)).toMatchObject({
      loop: { name: "loop", self: "[Circular]" },
      msg: "circular",
    });
  });
});
