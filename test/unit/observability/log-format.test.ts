// The log format docs/logging.md documents: one JSON object a line, the level by name, each key once.
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger, withUniqueKeys, type LogLevelName } from "../../../src/observability/log.js";

/** A logger of the operator's shape writing into an array of raw lines. */
function captured(level: LogLevelName = "trace") {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
      done();
    },
  });
  const logger = createLogger(level, { component: "operator" }, sink);
  return { logger, lines };
}

/** The top-level keys of a JSON object line in the order written, duplicates included. */
function keysOf(line: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  let inString = false;
  let start = -1;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') {
        inString = false;
        if (depth === 1 && line[i + 1] === ":") keys.push(JSON.parse(line.slice(start, i + 1)) as string);
      }
      continue;
    }
    if (c === '"') {
      inString = true;
      start = i;
    } else if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") depth--;
  }
  return keys;
}

describe("createLogger", () => {
  it.each<[LogLevelName, string]>([
    ["trace", "trace"],
    ["debug", "debug"],
    ["info", "info"],
    ["warn", "warn"],
    ["error", "error"],
  ])("writes level %s by name", (method, name) => {
    const { logger, lines } = captured();
    logger[method as "info"]("event");
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: name, msg: "event", component: "operator" });
  });

  it("writes time as ISO 8601, and no pid or hostname", () => {
    const { logger, lines } = captured();
    logger.info("event");
    const event = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(event["time"]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Object.keys(event)).toEqual(["level", "time", "component", "msg"]);
  });

  it("writes each key once when a child or an event repeats one, the innermost value winning", () => {
    const { logger, lines } = captured();
    const webhook = logger.child({ component: "webhook" });
    webhook.info("from the child");
    webhook.child({ node: "a" }).info({ node: "b", component: "certificates" }, "from the event");
    logger.info("from the parent");
    expect(lines.map(keysOf)).toEqual([
      ["level", "time", "component", "msg"],
      ["level", "time", "component", "node", "msg"],
      ["level", "time", "component", "msg"],
    ]);
    expect(lines.map((l) => JSON.parse(l) as Record<string, unknown>)).toMatchObject([
      { component: "webhook", msg: "from the child" },
      { component: "certificates", node: "b", msg: "from the event" },
      { component: "operator", msg: "from the parent" },
    ]);
  });

  it("keeps an error's fields under err", () => {
    const { logger, lines } = captured();
    logger.error({ err: new Error("boom") }, "failed");
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: "error", msg: "failed", err: { message: "boom" } });
  });

  it("writes nothing below its level", () => {
    const { logger, lines } = captured("warn");
    logger.info("hidden");
    logger.warn("shown");
    expect(lines.map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual(["shown"]);
  });
});

describe("withUniqueKeys", () => {
  it.each([
    ["no duplicate", '{"a":1,"b":"x"}\n', '{"a":1,"b":"x"}\n'],
    ["a duplicate: the last value in the first place", '{"a":1,"b":2,"a":3}\n', '{"a":3,"b":2}\n'],
    ["a nested object is left as it is", '{"a":{"b":1},"c":[1]}\n', '{"a":{"b":1},"c":[1]}\n'],
    ["not JSON", "plain text\n", "plain text\n"],
    ["a JSON list", "[1,2]\n", "[1,2]\n"],
  ])("%s", (_what, line, want) => {
    expect(withUniqueKeys(line)).toBe(want);
  });
});
