// `dpo convert --to v1beta1|v1alpha1 FILE...`: prints the files' DevicePluginConfigs in another API version,
// so a GitOps repository can move forward (or back) one commit at a time.
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { convertManifests, type TargetApiVersion } from "../api/conversion/manifest.js";
import { V1ALPHA1_API_VERSION } from "../api/v1alpha1/config.js";
import { API_VERSION } from "../api/v1beta1/config.js";
import { argsError, UsageError } from "./flags.js";

export const CONVERT_USAGE = `Usage: dpo convert --to v1beta1|v1alpha1 FILE...

Prints every file's manifests as one YAML stream with each dpo.dev DevicePluginConfig in the given
version; other documents, and those already in that version, are printed as they are. Comments are kept
where their fields survive. v1beta1 fields that v1alpha1 cannot express are kept in the annotation
dpo.dev/v1beta1-fields and restored when converting back.

Exit status: 0 converted, 1 some manifest invalid (nothing is printed; the problems name file and field),
2 usage error or unreadable file.
`;

const TARGETS: Record<string, TargetApiVersion> = {
  v1beta1: API_VERSION,
  [API_VERSION]: API_VERSION,
  v1alpha1: V1ALPHA1_API_VERSION,
  [V1ALPHA1_API_VERSION]: V1ALPHA1_API_VERSION,
};

export interface ConvertArgs {
  to: TargetApiVersion;
  files: string[];
}

/** Parses `--to VERSION FILE...`; throws UsageError naming the problem, with the usage. */
export function parseConvertArgs(argv: readonly string[]): ConvertArgs {
  let parsed: ReturnType<typeof parseArgs<{ options: { to: { type: "string" } }; allowPositionals: true }>>;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: { to: { type: "string" } },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw argsError(err, CONVERT_USAGE);
  }
  const to = parsed.values.to;
  if (to === undefined) throw new UsageError("--to is required (v1beta1 or v1alpha1)", CONVERT_USAGE);
  const target = Object.hasOwn(TARGETS, to) ? TARGETS[to] : undefined;
  if (target === undefined)
    throw new UsageError(`--to must be v1beta1 or v1alpha1, got '${to}'`, CONVERT_USAGE);
  if (parsed.positionals.length === 0) throw new UsageError("no files given", CONVERT_USAGE);
  return { to: target, files: parsed.positionals };
}

export interface ConvertOutput {
  /** 0 converted, 1 some manifest invalid, 2 some file unreadable. */
  exitCode: 0 | 1 | 2;
  /** The converted stream; empty unless exitCode is 0. */
  stdout: string;
  /** Problems (`FILE[#doc]: path: message`) and warnings. */
  stderr: string[];
}

/** Converts every file; the streams are joined with `---`, in the order given. */
export async function convertFiles(args: ConvertArgs): Promise<ConvertOutput> {
  const stderr: string[] = [];
  const streams: string[] = [];
  let exitCode: 0 | 1 | 2 = 0;
  for (const file of args.files) {
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (err) {
      stderr.push(`${file}: cannot read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      exitCode = 2;
      continue;
    }
    const result = convertManifests(text, args.to);
    if (!result.ok) {
      for (const p of result.problems) {
        const where = result.documents > 1 ? `${file}#${p.document}` : file;
        stderr.push(`${where}: ${p.path}: ${p.message}`);
      }
      if (exitCode === 0) exitCode = 1;
      continue;
    }
    stderr.push(...result.warnings.map((w) => `${file}: warning: ${w}`));
    if (result.text.trim() === "") continue;
    const body = result.text.endsWith("\n") ? result.text : `${result.text}\n`;
    streams.push(streams.length === 0 || /^---(\s|$)/.test(body) ? body : `---\n${body}`);
  }
  return { exitCode, stdout: exitCode === 0 ? streams.join("") : "", stderr };
}

/** The `dpo convert` command: returns its exit code. */
export async function runConvertCommand(argv: readonly string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(CONVERT_USAGE);
    return 0;
  }
  const out = await convertFiles(parseConvertArgs(argv));
  process.stdout.write(out.stdout);
  if (out.stderr.length > 0) process.stderr.write(out.stderr.join("\n") + "\n");
  return out.exitCode;
}
