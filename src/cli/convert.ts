// `dpo convert --to v1beta1|v1alpha1 [-o yaml|json] FILE|-...`: prints the files' DevicePluginConfigs in another API version,
// so a GitOps repository can move forward (or back) one commit at a time.
import { parseArgs } from "node:util";
import { parseAllDocuments } from "yaml";
import { parseManifestDocuments } from "../api/validate.js";
import { convertManifests, type TargetApiVersion } from "../api/conversion/manifest.js";
import { V1ALPHA1_API_VERSION } from "../api/v1alpha1/config.js";
import { API_VERSION } from "../api/v1beta1/config.js";
import { argsError, UsageError } from "./flags.js";
import { checkStdinOnce, describeReadError, readSource, sourceName, type ReadSource } from "./sources.js";
import { documentIdentity, verdictLabel } from "./validate.js";

export const CONVERT_USAGE = `Usage: dpo convert --to v1beta1|v1alpha1 [-o yaml|json] FILE|-...

Prints every file's manifests ('-' reads standard input) as one YAML stream with each dpo.dev DevicePluginConfig in the given
version; other documents, and those already in that version, are printed as they are. Comments are kept
where their fields survive. v1beta1 fields that v1alpha1 cannot express are kept in the annotation
dpo.dev/v1beta1-fields and restored when converting back.

Exit status: 0 converted, 1 some manifest invalid (nothing is printed; the problems name file, document,
kind, name and field), 2 usage error or unreadable file.

Flags:
  --to v1beta1|v1alpha1   the API version to convert to
  -o, --output yaml|json  yaml: the stream, comments kept (default); json: a v1 List of the objects
`;

const TARGETS: Record<string, TargetApiVersion> = {
  v1beta1: API_VERSION,
  [API_VERSION]: API_VERSION,
  v1alpha1: V1ALPHA1_API_VERSION,
  [V1ALPHA1_API_VERSION]: V1ALPHA1_API_VERSION,
};

export interface ConvertArgs {
  to: TargetApiVersion;
  output?: "yaml" | "json";
  files: string[];
}

/** Parses `--to VERSION [-o yaml|json] FILE|-...`; throws UsageError naming the problem, with the usage. */
export function parseConvertArgs(argv: readonly string[]): ConvertArgs {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: { to: { type: "string" }, output: { type: "string", short: "o" } },
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
  const output = parsed.values.output ?? "yaml";
  if (output !== "yaml" && output !== "json")
    throw new UsageError(`--output must be yaml or json, got '${output}'`, CONVERT_USAGE);
  if (parsed.positionals.length === 0)
    throw new UsageError("no files given ('-' reads standard input)", CONVERT_USAGE);
  checkStdinOnce(parsed.positionals, CONVERT_USAGE);
  return { to: target, output, files: parsed.positionals };
}

export interface ConvertOutput {
  /** 0 converted, 1 some manifest invalid, 2 some file unreadable. */
  exitCode: 0 | 1 | 2;
  /** The converted stream; empty unless exitCode is 0. */
  stdout: string;
  /** Problems (`FILE[#doc] Kind/name: path: message`) and warnings. */
  stderr: string[];
}

/** Each document's kind and name by its index in the stream, for the messages about it. */
function documentNames(text: string): Map<number, { kind?: string; name?: string }> {
  const names = new Map<number, { kind?: string; name?: string }>();
  for (const doc of parseManifestDocuments(text))
    if (doc.ok) names.set(doc.index, documentIdentity(doc.value));
  return names;
}

/** A converted YAML stream as the JSON of a v1 List, as `kubectl convert -o json` prints several objects. */
export function streamAsJsonList(stream: string): string {
  const items = parseAllDocuments(stream)
    .map((doc) => doc.toJS({ maxAliasCount: 100 }) as unknown)
    .filter((value) => value !== null && value !== undefined);
  return `${JSON.stringify({ apiVersion: "v1", kind: "List", items }, null, 2)}\n`;
}

/** Converts every file (`-` for standard input); the streams are joined with `---`, in the order given. */
export async function convertFiles(args: ConvertArgs, read: ReadSource = readSource): Promise<ConvertOutput> {
  const stderr: string[] = [];
  const streams: string[] = [];
  let exitCode: 0 | 1 | 2 = 0;
  for (const file of args.files) {
    const name = sourceName(file);
    let text: string;
    try {
      text = await read(file);
    } catch (err) {
      stderr.push(describeReadError(file, err));
      exitCode = 2;
      continue;
    }
    const result = convertManifests(text, args.to);
    if (!result.ok) {
      const names = documentNames(text);
      for (const p of result.problems) {
        const label = verdictLabel({
          file: name,
          ...(result.documents > 1 ? { document: p.document } : {}),
          ...names.get(p.document),
        });
        stderr.push(`${label}: ${p.path}: ${p.message}`);
      }
      if (exitCode === 0) exitCode = 1;
      continue;
    }
    stderr.push(...result.warnings.map((w) => `${name}: warning: ${w}`));
    if (result.text.trim() === "") continue;
    const body = result.text.endsWith("\n") ? result.text : `${result.text}\n`;
    streams.push(streams.length === 0 || /^---(\s|$)/.test(body) ? body : `---\n${body}`);
  }
  if (exitCode !== 0) return { exitCode, stdout: "", stderr };
  const stream = streams.join("");
  return { exitCode, stdout: args.output === "json" ? streamAsJsonList(stream) : stream, stderr };
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
