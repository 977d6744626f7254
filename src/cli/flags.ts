// Declarative command-line flags with environment-variable fallbacks: flag > env > default.
import type { ListenAddress } from "../observability/http.js";

export interface FlagSpec {
  /** Long flag name without dashes, e.g. `device-plugin-dir`. */
  readonly name: string;
  /** Environment variable consulted when the flag is absent. */
  readonly env: string;
  readonly description: string;
  /** Default when neither flag nor env is set; undefined means "no value". */
  readonly default?: string;
  /** Allowed values, checked after resolution. */
  readonly choices?: readonly string[];
  /** A one-letter alias, e.g. `o` for `-o`, where the other dpo commands have the same one. */
  readonly short?: string;
}

/** A command used wrongly: main prints `dpo: <message>`, then the command's usage when given, and exits 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
  constructor(
    message: string,
    /** The usage text of the command, printed after the message. */
    readonly usage?: string,
  ) {
    super(message);
  }
}

/**
 * A command that cannot go on for a reason its user can fix (a missing kubeconfig, an unreadable file):
 * main prints `dpo: <message>`, one line and no stack, and exits with `exitCode`.
 */
export class CommandError extends Error {
  override readonly name = "CommandError";
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

/** The one prefix of every error the dpo command prints about itself. */
export const ERROR_PREFIX = "dpo: ";

/** What main writes to stderr for an error a command threw, and the exit code; stack traces only for bugs. */
export function describeFailure(err: unknown): { text: string; exitCode: number } {
  if (err instanceof UsageError) {
    const usage = err.usage === undefined ? "" : `\n${err.usage}`;
    return { text: `${ERROR_PREFIX}${err.message}\n${usage}`, exitCode: 2 };
  }
  if (err instanceof CommandError) return { text: `${ERROR_PREFIX}${err.message}\n`, exitCode: err.exitCode };
  const detail = err instanceof Error ? (err.stack ?? err.message) : String(err);
  return { text: `${ERROR_PREFIX}${detail}\n`, exitCode: 1 };
}

export interface ResolvedFlags {
  values: Record<string, string | undefined>;
  positionals: string[];
}

function unknownFlag(flag: string, usage?: string): UsageError {
  return new UsageError(`unknown flag '${flag}' (a file name starting with '-' goes after '--')`, usage);
}

/** A flag with no value after it; `long` is its `--name`, the spelling whose `=` takes a value. */
function needsValue(long: string, usage?: string): UsageError {
  return new UsageError(`${long} needs a value`, usage);
}

/** A flag followed by what looks like another flag. */
function ambiguousValue(long: string, usage?: string): UsageError {
  return new UsageError(`${long} needs a value (${long}=-x for one starting with '-')`, usage);
}

/**
 * node:util parseArgs' error as a usage error in dpo's words: `unknown flag '--x'`, `--to needs a value`.
 * Anything else keeps parseArgs' message.
 */
export function argsError(err: unknown, usage?: string): UsageError {
  const { code, message } = err as { code?: string; message: string };
  // An unknown one as it was typed, quotes in it included: `Unknown option '-''. To specify …`.
  const unknown = /^Unknown option '(.*?)'(?:\. To specify|$)/s.exec(message)?.[1];
  if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" && unknown) return unknownFlag(unknown, usage);
  // The flag as parseArgs quotes it first: '-o, --output <value>' (the long name then).
  const quoted = /'([^']*)'/.exec(message)?.[1] ?? "";
  const flag = quoted.match(/-{1,2}[A-Za-z0-9][-A-Za-z0-9]*/g)?.at(-1);
  if (flag === undefined) return new UsageError(message, usage);
  if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
    if (message.includes("does not take an argument")) return new UsageError(`${flag} takes no value`, usage);
    if (message.includes("ambiguous")) {
      // The long name, where `=` gives the value (`-o=-x` would be `=-x`): parseArgs' own advice names it.
      return ambiguousValue(/'(--[^'=]+)=-XYZ'/.exec(message)?.[1] ?? flag, usage);
    }
    return needsValue(flag, usage);
  }
  return new UsageError(message, usage);
}

/**
 * argv as the flags of `specs` (each takes a value) and positionals, by node:util parseArgs' rules in strict
 * mode, with its errors in argsError's words: `--name value`, `--name=value`, `-s value` and `-svalue`; `--`
 * ends the flags; a value starting with '-' only after `=`; the last of a repeated flag wins. Written out
 * because parseArgs, loaded into every plugin for a handful of flags, took 0.5 MiB of its idle RSS
 * (docs/benchmarks.md); test/unit/cli/flags.test.ts holds it to parseArgs' answers.
 */
export function parseFlagArgs(
  specs: readonly FlagSpec[],
  argv: readonly string[],
): { values: Record<string, string>; positionals: string[] } {
  const byName = new Map(specs.map((spec) => [spec.name, spec]));
  const byShort = new Map(specs.flatMap((spec) => (spec.short === undefined ? [] : [[spec.short, spec]])));
  const values: Record<string, string> = {};
  const positionals: string[] = [];
  const valueAfter = (spec: FlagSpec, next: string | undefined): string => {
    if (next === undefined) throw needsValue(`--${spec.name}`);
    if (next.length > 1 && next.startsWith("-")) throw ambiguousValue(`--${spec.name}`);
    return next;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--") {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (arg.startsWith("--")) {
      // As parseArgs: a name of one character at least before the `=` (`--=x` is a flag named `=x`).
      const eq = arg.indexOf("=", 3);
      const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
      const spec = byName.get(name);
      if (spec === undefined) throw unknownFlag(`--${name}`);
      values[spec.name] = eq === -1 ? valueAfter(spec, argv[++i]) : arg.slice(eq + 1);
    } else if (arg.length > 1 && arg.startsWith("-")) {
      const spec = byShort.get(arg[1]!);
      if (spec === undefined) throw unknownFlag(`-${arg[1]}`);
      values[spec.name] = arg.length > 2 ? arg.slice(2) : valueAfter(spec, argv[++i]);
    } else {
      positionals.push(arg);
    }
  }
  return { values, positionals };
}

/** Resolves flags from argv and env; throws UsageError naming the flag on anything unknown or invalid. */
export function resolveFlags(
  specs: readonly FlagSpec[],
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): ResolvedFlags {
  const parsed = parseFlagArgs(specs, argv);
  const values: Record<string, string | undefined> = {};
  for (const spec of specs) {
    const fromFlag = parsed.values[spec.name];
    const fromEnv = env[spec.env];
    const value =
      typeof fromFlag === "string"
        ? fromFlag
        : fromEnv !== undefined && fromEnv !== ""
          ? fromEnv
          : spec.default;
    if (value !== undefined && spec.choices && !spec.choices.includes(value)) {
      throw new UsageError(
        `--${spec.name} (or ${spec.env}): must be one of ${spec.choices.join(", ")}, got '${value}'`,
      );
    }
    values[spec.name] = value;
  }
  return { values, positionals: parsed.positionals };
}

/** A help text listing every flag with its environment variable and default. */
export function formatFlagHelp(specs: readonly FlagSpec[]): string {
  return specs
    .map((s) => {
      const def = s.default !== undefined ? ` (default ${s.default === "" ? '""' : s.default})` : "";
      const short = s.short === undefined ? "" : `-${s.short}, `;
      return `  ${short}--${s.name} VALUE\n      ${s.description}${def}\n      env: ${s.env}`;
    })
    .join("\n");
}

/**
 * Parses HOST:PORT, `:PORT` or `PORT`; `0` disables the endpoint (returns undefined). Without a host the
 * endpoint listens on every address of both families, as `:PORT` means in Go's `net.Listen` and so in
 * controller-runtime's bind addresses: `::` accepting IPv4 too where the node has IPv6, `0.0.0.0` where it
 * has not, so probes and scrapes reach a pod on a single-stack IPv6 cluster. `0.0.0.0:PORT` keeps it to
 * IPv4. A listen without a host also leaves Node's resolver unloaded (it looks every host up, literal
 * addresses too): about 1 MiB of a plugin's RSS.
 */
export function parseListenAddress(flag: string, value: string): ListenAddress | undefined {
  if (value === "0" || value === "") return undefined;
  const idx = value.lastIndexOf(":");
  const host = idx === -1 ? "" : value.slice(0, idx).replace(/^\[(.*)\]$/, "$1");
  const portText = idx === -1 ? value : value.slice(idx + 1);
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port > 65535) {
    throw new UsageError(`--${flag}: '${value}' is not HOST:PORT with a port from 0 to 65535 (0 disables)`);
  }
  return host === "" ? { host: undefined, port } : { host, port };
}

/** `--metrics-addr` and `--health-addr`, the same for every long-running command. */
export const ENDPOINT_FLAGS: readonly FlagSpec[] = [
  {
    name: "metrics-addr",
    env: "DPO_METRICS_ADDR",
    description: "HOST:PORT serving /metrics (and the probes); 0 disables.",
    default: ":8080",
  },
  {
    name: "health-addr",
    env: "DPO_HEALTH_ADDR",
    description: "HOST:PORT serving /healthz and /readyz; 0 disables.",
    default: ":8081",
  },
];
