// Declarative command-line flags with environment-variable fallbacks: flag > env > default.
import { parseArgs } from "node:util";

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
}

export class UsageError extends Error {
  override readonly name = "UsageError";
}

export interface ResolvedFlags {
  values: Record<string, string | undefined>;
  positionals: string[];
}

/** Resolves flags from argv and env; throws UsageError naming the flag on anything unknown or invalid. */
export function resolveFlags(
  specs: readonly FlagSpec[],
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): ResolvedFlags {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: Object.fromEntries(specs.map((s) => [s.name, { type: "string" as const }])),
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
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
      return `  --${s.name} VALUE\n      ${s.description}${def}\n      env: ${s.env}`;
    })
    .join("\n");
}

/** Parses HOST:PORT, `:PORT` or `PORT`; `0` disables the endpoint (returns undefined). */
export function parseListenAddress(flag: string, value: string): { host: string; port: number } | undefined {
  if (value === "0" || value === "") return undefined;
  const idx = value.lastIndexOf(":");
  const host = idx === -1 ? "0.0.0.0" : value.slice(0, idx).replace(/^\[(.*)\]$/, "$1") || "0.0.0.0";
  const portText = idx === -1 ? value : value.slice(idx + 1);
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port > 65535) {
    throw new UsageError(`--${flag}: '${value}' is not HOST:PORT with a port from 0 to 65535 (0 disables)`);
  }
  return { host, port };
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
