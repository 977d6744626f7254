// Structured JSON logging (pino) with the project's stable keys: config, node, resource, device. The format
// is documented in docs/logging.md: one JSON object a line, `level` by name, each key once.
import { pino, type DestinationStream, type Logger } from "pino";

export type { Logger } from "pino";

// The level names are the plugin's logger's too (json-log.ts, which loads no pino).
export { LOG_LEVEL_NAMES, type LogLevelName } from "./json-log.js";
import type { LogLevelName } from "./json-log.js";

/**
 * One event line with each key once. pino writes a child's bindings after its parent's and the event's
 * fields after both, so `logger.child({ component: "webhook" })` of a `component: "operator"` logger would
 * print `component` twice, and JSON readers disagree on which one counts. Parsing keeps the last, the
 * most specific, in the first one's place. Lines that are not JSON objects pass as they are.
 */
export function withUniqueKeys(line: string): string {
  let event: unknown;
  try {
    event = JSON.parse(line);
  } catch {
    return line;
  }
  if (typeof event !== "object" || event === null || Array.isArray(event)) return line;
  return `${JSON.stringify(event)}\n`;
}

/**
 * A logger writing one JSON event per line to stdout (stderr would mix with CLI error output), or to
 * `destination` (tests). `level` is the level's name, `time` ISO 8601, `msg` the message.
 */
export function createLogger(
  level: LogLevelName,
  bindings: Record<string, string> = {},
  destination?: DestinationStream,
): Logger {
  const options = {
    level,
    base: { ...bindings },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
    hooks: { streamWrite: withUniqueKeys },
  };
  return destination ? pino(options, destination) : pino(options);
}
