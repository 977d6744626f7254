// `dpo validate [--output text|json] FILE|-...`: schema and semantic checks of DevicePluginConfig manifests
// in either API version, with field paths. Documents that are not dpo.dev configs are skipped, so the
// output of `kustomize build` or `helm template` can be piped in whole.
import { writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import {
  parseManifestDocuments,
  validateAnyVersion,
  type FieldError,
  type SupportedApiVersion,
} from "../api/validate.js";
import { argsError, CommandError, UsageError } from "./flags.js";
import { checkStdinOnce, describeReadError, readSource, sourceName, type ReadSource } from "./sources.js";

export const VALIDATE_USAGE = `Usage: dpo validate [-o text|json|junit] [--junit FILE] FILE|-...

Checks DevicePluginConfig manifests in dpo.dev/v1beta1 or dpo.dev/v1alpha1 and says which version each
document uses. '-' reads standard input (kustomize build . | dpo validate -). Documents of other kinds
(a Deployment, a ConfigMap) are skipped. Exit status: 0 valid, 1 invalid, 2 usage error or unreadable.

Each line names the file, the document's index in a stream of several, and the object's kind and name:
  <stdin>#3 DevicePluginConfig/gpus: invalid (dpo.dev/v1beta1)
The verdicts go to standard output, the problems (field path and message) to standard error.

Flags:
  -o, --output text|json|junit   text: one line per document and per problem (default); json: one
                                 object; junit: a JUnit XML report, one testcase per document
  --junit FILE                   also write the JUnit XML report to FILE, whatever --output says
`;

export { STDIN_NAME, type ReadSource } from "./sources.js";

/** What became of one document, or of a whole file that could not be read or held none. */
export interface DocumentVerdict {
  /** The file as given, or `<stdin>`. */
  file: string;
  /** The document's index in a stream of several; absent for a file of one document or none. */
  document?: number;
  result: "valid" | "invalid" | "skipped" | "unreadable" | "empty";
  apiVersion?: string;
  kind?: string;
  name?: string;
  errors: FieldError[];
}

export interface ValidateOutput {
  /** 0 all valid, 1 some invalid, 2 some file unreadable. */
  exitCode: 0 | 1 | 2;
  verdicts: DocumentVerdict[];
  /** Every text line in order: the verdicts' and the problems'. */
  lines: string[];
  /** The verdict lines, for standard output. */
  results: string[];
  /** The problem lines (a field, an unreadable file, an empty one), for standard error. */
  problems: string[];
}

function stringField(obj: unknown, key: string): string | undefined {
  const value = typeof obj === "object" && obj !== null ? (obj as Record<string, unknown>)[key] : undefined;
  return typeof value === "string" ? value : undefined;
}

/**
 * Whether a document is some other API's: it names an apiVersion and a kind, and is not a dpo.dev
 * DevicePluginConfig (another group, or dpo.dev's DeviceNodeState). A document naming neither, or only
 * one, is checked as a config: a manifest that forgot its kind must not pass unseen.
 */
export function isOtherApiDocument(value: unknown): boolean {
  const apiVersion = stringField(value, "apiVersion");
  const kind = stringField(value, "kind");
  if (apiVersion === undefined || kind === undefined) return false;
  const group = apiVersion.includes("/") ? apiVersion.slice(0, apiVersion.indexOf("/")) : "";
  return group !== "dpo.dev" || kind === "DeviceNodeState";
}

/**
 * Where a verdict is, for its every line: `FILE[#doc] Kind/name`, the kind and name as far as the document
 * gives them, so a problem in a stream of many is found by the object's name. Pure.
 */
export function verdictLabel(v: Pick<DocumentVerdict, "file" | "document" | "kind" | "name">): string {
  const where = v.document === undefined ? v.file : `${v.file}#${v.document}`;
  if (v.kind === undefined && v.name === undefined) return where;
  return `${where} ${v.kind ?? "<no kind>"}/${v.name ?? "<no name>"}`;
}

/** A document's kind and `metadata.name`, each where it is a string. Pure. */
export function documentIdentity(value: unknown): { kind?: string; name?: string } {
  const kind = stringField(value, "kind");
  const metadata =
    typeof value === "object" && value !== null ? (value as { metadata?: unknown }).metadata : undefined;
  const name = stringField(metadata, "name");
  return { ...(kind !== undefined ? { kind } : {}), ...(name !== undefined ? { name } : {}) };
}

function verdictLines(v: DocumentVerdict): { results: string[]; problems: string[] } {
  const label = verdictLabel(v);
  switch (v.result) {
    case "unreadable":
      // The message names the file already: `cannot read foo.yaml: no such file`.
      return { results: [], problems: v.errors.map((e) => e.message) };
    case "empty":
      return { results: [], problems: v.errors.map((e) => `${label}: ${e.message}`) };
    case "skipped":
      return { results: [`${label}: skipped (${v.apiVersion})`], problems: [] };
    case "valid":
      return { results: [`${label}: valid (${v.apiVersion})`], problems: [] };
    case "invalid": {
      const version = v.apiVersion === undefined ? "" : ` (${v.apiVersion})`;
      return {
        results: [`${label}: invalid${version}`],
        problems: v.errors.map((e) => `${label}: ${e.path}: ${e.message}`),
      };
    }
  }
}

function checkDocuments(file: string, text: string): DocumentVerdict[] {
  const docs = parseManifestDocuments(text);
  if (docs.length === 0)
    return [{ file, result: "empty", errors: [{ path: "<file>", message: "no documents" }] }];
  return docs.map((doc) => {
    const at = { file, ...(docs.length > 1 ? { document: doc.index } : {}) };
    if (!doc.ok) {
      return { ...at, result: "invalid", errors: [{ path: "<document>", message: `YAML: ${doc.error}` }] };
    }
    const meta = documentIdentity(doc.value);
    if (isOtherApiDocument(doc.value)) {
      return {
        ...at,
        result: "skipped",
        apiVersion: stringField(doc.value, "apiVersion"),
        ...meta,
        errors: [],
      };
    }
    const r = validateAnyVersion(doc.value);
    const version: SupportedApiVersion | undefined = r.apiVersion;
    return {
      ...at,
      result: r.ok ? "valid" : "invalid",
      ...(version !== undefined ? { apiVersion: version } : {}),
      ...meta,
      errors: r.ok ? [] : r.errors,
    };
  });
}

/**
 * Validates every document of every file (`-` for standard input) in the version its apiVersion names. A
 * valid document reads `FILE[#doc] Kind/name: valid (dpo.dev/v1beta1)`; an invalid one `FILE[#doc]
 * Kind/name: invalid (dpo.dev/v1alpha1)` and then each problem as `FILE[#doc] Kind/name: path: message`;
 * another API's `FILE[#doc] Deployment/name: skipped (apps/v1)`.
 */
export async function validateFiles(
  files: readonly string[],
  read: ReadSource = readSource,
): Promise<ValidateOutput> {
  const verdicts: DocumentVerdict[] = [];
  for (const file of files) {
    const name = sourceName(file);
    let text: string;
    try {
      text = await read(file);
    } catch (err) {
      verdicts.push({
        file: name,
        result: "unreadable",
        errors: [{ path: "<file>", message: describeReadError(file, err) }],
      });
      continue;
    }
    verdicts.push(...checkDocuments(name, text));
  }
  const exitCode = verdicts.some((v) => v.result === "unreadable")
    ? 2
    : verdicts.some((v) => v.result === "invalid" || v.result === "empty")
      ? 1
      : 0;
  const split = verdicts.map(verdictLines);
  return {
    exitCode,
    verdicts,
    lines: split.flatMap((s) => [...s.results, ...s.problems]),
    results: split.flatMap((s) => s.results),
    problems: split.flatMap((s) => s.problems),
  };
}

/** The `--output json` document: the exit code's meaning as `valid`, and every verdict. */
export function formatValidateJson(out: Pick<ValidateOutput, "exitCode" | "verdicts">): string {
  return `${JSON.stringify({ valid: out.exitCode === 0, documents: out.verdicts }, null, 2)}\n`;
}

/** Text as XML character data or an attribute value; characters XML 1.0 cannot hold become U+FFFD. */
export function xmlEscape(text: string): string {
  return text
    .replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, "\uFFFD")
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&apos;");
}

function junitCase(v: DocumentVerdict): string {
  const label = verdictLabel(v);
  const name = xmlEscape(label === v.file ? v.file : label.slice(v.file.length).trimStart() || v.file);
  const open = `    <testcase classname="${xmlEscape(v.file)}" name="${name}"`;
  const details = xmlEscape(v.errors.map((e) => `${label}: ${e.path}: ${e.message}`).join("\n"));
  switch (v.result) {
    case "valid":
      return `${open}/>`;
    case "skipped":
      return `${open}>\n      <skipped message="${xmlEscape(`${v.apiVersion} ${v.kind}`)}"/>\n    </testcase>`;
    case "unreadable": {
      const message = xmlEscape(v.errors[0]?.message ?? "cannot read");
      return `${open}>\n      <error type="unreadable" message="${message}"/>\n    </testcase>`;
    }
    case "empty":
    case "invalid": {
      const count = v.errors.length;
      const version = v.apiVersion === undefined ? "" : ` (${v.apiVersion})`;
      const message = xmlEscape(
        v.result === "empty"
          ? "no documents"
          : `invalid${version}: ${count} problem${count === 1 ? "" : "s"}`,
      );
      return `${open}>\n      <failure type="${v.result}" message="${message}">${details}</failure>\n    </testcase>`;
    }
  }
}

function junitCounts(verdicts: readonly DocumentVerdict[]): string {
  const count = (...results: DocumentVerdict["result"][]) =>
    verdicts.filter((v) => results.includes(v.result)).length;
  return `tests="${verdicts.length}" failures="${count("invalid", "empty")}" errors="${count("unreadable")}" skipped="${count("skipped")}"`;
}

/**
 * The JUnit XML report CI systems read: one testsuite per file (or `<stdin>`), one testcase per document
 * named by its index, kind and name, a failure for an invalid or empty one, an error for an unreadable
 * file, `skipped` for another API's document. Pure.
 */
export function formatValidateJunit(out: Pick<ValidateOutput, "verdicts">): string {
  const files = [...new Set(out.verdicts.map((v) => v.file))];
  const suites = files.map((file) => {
    const verdicts = out.verdicts.filter((v) => v.file === file);
    return [
      `  <testsuite name="${xmlEscape(file)}" ${junitCounts(verdicts)}>`,
      ...verdicts.map(junitCase),
      "  </testsuite>",
    ].join("\n");
  });
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="dpo validate" ${junitCounts(out.verdicts)}>`,
    ...suites,
    "</testsuites>",
    "",
  ].join("\n");
}

export interface ValidateArgs {
  output: "text" | "json" | "junit";
  /** Where to write the JUnit report besides the output, if anywhere. */
  junit?: string;
  files: string[];
}

const OUTPUTS = ["text", "json", "junit"] as const;

/** Parses `[-o text|json|junit] [--junit FILE] FILE|-...`; throws UsageError (with the usage) on anything else. */
export function parseValidateArgs(argv: readonly string[]): ValidateArgs {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: { output: { type: "string", short: "o" }, junit: { type: "string" } },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw argsError(err, VALIDATE_USAGE);
  }
  const output = parsed.values.output ?? "text";
  if (!(OUTPUTS as readonly string[]).includes(output)) {
    throw new UsageError(`--output must be text, json or junit, got '${output}'`, VALIDATE_USAGE);
  }
  const junit = parsed.values.junit;
  if (junit === "" || junit === "-") {
    throw new UsageError(
      "--junit needs a file name (-o junit writes the report to standard output)",
      VALIDATE_USAGE,
    );
  }
  if (parsed.positionals.length === 0)
    throw new UsageError("no files given ('-' reads standard input)", VALIDATE_USAGE);
  checkStdinOnce(parsed.positionals, VALIDATE_USAGE);
  return {
    output: output as ValidateArgs["output"],
    ...(junit !== undefined ? { junit } : {}),
    files: parsed.positionals,
  };
}

/** The `dpo validate` command: returns its exit code. */
export async function runValidateCommand(argv: readonly string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(VALIDATE_USAGE);
    return 0;
  }
  const args = parseValidateArgs(argv);
  const out = await validateFiles(args.files);
  if (args.junit !== undefined) {
    try {
      await writeFile(args.junit, formatValidateJunit(out));
    } catch (err) {
      throw new CommandError(describeReadError(args.junit, err, "write"), 2);
    }
  }
  if (args.output === "json") {
    process.stdout.write(formatValidateJson(out));
  } else if (args.output === "junit") {
    process.stdout.write(formatValidateJunit(out));
  } else {
    // The verdicts are the command's result, on stdout whatever they are; the problems are diagnostics, on
    // stderr, where a CI log shows them apart (and in red).
    if (out.results.length > 0) process.stdout.write(`${out.results.join("\n")}\n`);
    if (out.problems.length > 0) process.stderr.write(`${out.problems.join("\n")}\n`);
  }
  return out.exitCode;
}
