// The plugin's logger: the lines docs/logging.md documents (one JSON object a line, `level` by name, `time`
// ISO 8601, each key once, `msg` last), written without pino, whose modules cost the plugin's idle RSS
// about 2 MiB (ADR 0008). The operator keeps pino (log.ts); test/unit/observability/json-log.test.ts holds
// the two to the same lines.

export const LOG_LEVEL_NAMES = ["trace", "debug", "info", "warn", "error", "silent"] as const;
export type LogLevelName = (typeof LOG_LEVEL_NAMES)[number];

/** One level's method: fields and a message, or a message alone (pino's call forms that dpo uses). */
export interface LogFn {
  (fields: object, msg?: string): void;
  (msg: string): void;
}

/** What dpo's code asks of a logger; pino's loggers have it too, so shared code takes either. */
export interface Logger {
  trace: LogFn;
  debug: LogFn;
  info: LogFn;
  warn: LogFn;
  error: LogFn;
  fatal: LogFn;
  child(bindings: Record<string, unknown>): Logger;
}

/** Where lines go: stdout, or a test's sink. */
export interface LineSink {
  write(line: string): unknown;
}

const LEVEL_VALUES: Record<Exclude<LogLevelName, "silent"> | "fatal", number> = {
  trace: 10,
  debug: 20,
  info: 30,
  warn: 40,
  error: 50,
  fatal: 60,
};

/** An Error as pino's standard serializer writes it: its type, message, stack and own fields. */
function serializeError(err: Error): Record<string, unknown> {
  const out: Record<string, unknown> = { type: err.constructor?.name ?? "Error", message: err.message };
  out["stack"] = err.stack;
  for (const [key, value] of Object.entries(err)) if (!(key in out)) out[key] = value;
  return out;
}

/** JSON with a circular reference written as "[Circular]" and a bigint as its digits, where pino does too. */
function stringify(event: Record<string, unknown>): string {
  try {
    return JSON.stringify(event);
  } catch {
    const seen = new WeakSet<object>();
    return JSON.stringify(event, (_key, value: unknown) => {
      if (typeof value === "bigint") return value.toString();
      if (typeof value === "object" && value !== null) {
        if (seen.has(value)) return "[Circular]";
        seen.add(value);
      }
      return value;
    });
  }
}

class JsonLogger implements Logger {
  readonly trace: LogFn;
  readonly debug: LogFn;
  readonly info: LogFn;
  readonly warn: LogFn;
  readonly error: LogFn;
  readonly fatal: LogFn;

  constructor(
    private readonly threshold: number,
    private readonly bindings: Record<string, unknown>,
    private readonly sink: LineSink,
  ) {
    const method = (name: keyof typeof LEVEL_VALUES): LogFn => {
      const value = LEVEL_VALUES[name];
      if (value < threshold) return () => undefined;
      return (fieldsOrMsg: object | string, msg?: string) => this.write(name, fieldsOrMsg, msg);
    };
    this.trace = method("trace");
    this.debug = method("debug");
    this.info = method("info");
    this.warn = method("warn");
    this.error = method("error");
    this.fatal = method("fatal");
  }

  child(bindings: Record<string, unknown>): Logger {
    return new JsonLogger(this.threshold, { ...this.bindings, ...bindings }, this.sink);
  }

  private write(level: string, fieldsOrMsg: object | string, msg: string | undefined): void {
    // Assignment keeps a key where it first appeared and gives it the last value: each key once, the
    // innermost value in the outermost place, as docs/logging.md says.
    const event: Record<string, unknown> = { level, time: new Date().toISOString(), ...this.bindings };
    let message = msg;
    if (typeof fieldsOrMsg === "string") message = fieldsOrMsg;
    else if (fieldsOrMsg instanceof Error) {
      event["err"] = serializeError(fieldsOrMsg);
      message ??= fieldsOrMsg.message;
    } else if (fieldsOrMsg !== null && fieldsOrMsg !== undefined) {
      for (const [key, value] of Object.entries(fieldsOrMsg)) {
        event[key] = key === "err" && value instanceof Error ? serializeError(value) : value;
      }
    }
    if (message !== undefined) event["msg"] = message;
    this.sink.write(`${stringify(event)}\n`);
  }
}

/**
 * A logger writing one JSON event per line to stdout (stderr would mix with CLI error output), or to
 * `sink` (tests). `bindings` go on every line after `level` and `time`.
 */
export function createJsonLogger(
  level: LogLevelName,
  bindings: Record<string, string> = {},
  sink: LineSink = process.stdout,
): Logger {
  const threshold = level === "silent" ? Number.POSITIVE_INFINITY : LEVEL_VALUES[level];
  return new JsonLogger(threshold, { ...bindings }, sink);
}
