// Structured JSON logging (pino) with the project's stable keys: config, node, resource, device.
import { pino, type Logger } from "pino";

export type { Logger } from "pino";

export const LOG_LEVEL_NAMES = ["trace", "debug", "info", "warn", "error", "silent"] as const;
export type LogLevelName = (typeof LOG_LEVEL_NAMES)[number];

/** A logger writing one JSON event per line to stdout (stderr would mix with CLI error output). */
export function createLogger(level: LogLevelName, bindings: Record<string, string> = {}): Logger {
  return pino({ level, base: { ...bindings }, timestamp: pino.stdTimeFunctions.isoTime });
}
