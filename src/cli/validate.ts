// `dpo validate [--output text|json] FILE|-...`: schema and semantic checks of DevicePluginConfig manifests
// in either API version, with field paths. Documents that are not dpo.dev configs are skipped, so the
// output of `kustomize build` or `helm template` can be piped in whole.
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import {
  parseManifestDocuments,
  validateAnyVersion,
  type FieldError,
  type SupportedApiVersion,
} from "../api/validate.js";
import { argsError, UsageError } from "./flags.js";

export const VALIDATE_USAGE = `Usage: dpo validate [--output text|json] FILE|-...

Checks DevicePluginConfig manifests in dpo.dev/v1beta1 or dpo.dev/v1alpha1 and says which version each
document uses. '-' reads standard input (kustomize build . | dpo validate -). Documents of other kinds
(a Deployment, a ConfigMap) are skipped. Exit status: 0 valid, 1 invalid, 2 usage error or unreadable.

Flags:
  -o, --output text|json   text: one line per document and per problem (default); json: one object
`;

/** The name `-` reads standard input under. */
export const STDIN_NAME = "<stdin>";

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
  /** The text output, one line per verdict and per problem. */
  lines: string[];
}

export type ReadSource = (file: string) => Promise<string>;

/** Reads a file, or standard input for `-`. */
export const readSource: ReadSource = async (file) => {
  if (file !== "-") return readFile(file, "utf8");
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
};

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

function verdictLines(v: DocumentVerdict): string[] {
  const where = v.document === undefined ? v.file : `${v.file}#${v.document}`;
  switch (v.result) {
    case "unreadable":
    case "empty":
      return v.errors.map((e) => `${where}: ${e.message}`);
    case "skipped":
      return [`${where}: skipped (${v.apiVersion} ${v.kind})`];
    case "valid":
      return [`${where}: valid (${v.apiVersion})`];
    case "invalid": {
      const label = v.apiVersion === undefined ? "" : ` (${v.apiVersion})`;
      return [`${where}: invalid${label}`, ...v.errors.map((e) => `${where}: ${e.path}: ${e.message}`)];
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
    const meta = {
      ...(stringField(doc.value, "kind") !== undefined ? { kind: stringField(doc.value, "kind") } : {}),
    };
    if (isOtherApiDocument(doc.value)) {
      return {
        ...at,
        result: "skipped",
        apiVersion: stringField(doc.value, "apiVersion"),
        ...meta,
        errors: [],
      };
    }
    const name = stringField((doc.value as { metadata?: unknown }).metadata, "name");
    const r = validateAnyVersion(doc.value);
    const version: SupportedApiVersion | undefined = r.apiVersion;
    return {
      ...at,
      result: r.ok ? "valid" : "invalid",
      ...(version !== undefined ? { apiVersion: version } : {}),
      ...meta,
      ...(name !== undefined ? { name } : {}),
      errors: r.ok ? [] : r.errors,
    };
  });
}

/**
 * Validates every document of every file (`-` for standard input) in the version its apiVersion names. A
 * valid document reads `FILE[#doc]: valid (dpo.dev/v1beta1)`; an invalid one `FILE[#doc]: invalid
 * (dpo.dev/v1alpha1)` and then each problem as `FILE[#doc]: path: message`; another API's
 * `FILE[#doc]: skipped (apps/v1 Deployment)`.
 */
export async function validateFiles(
  files: readonly string[],
  read: ReadSource = readSource,
): Promise<ValidateOutput> {
  const verdicts: DocumentVerdict[] = [];
  for (const file of files) {
    const name = file === "-" ? STDIN_NAME : file;
    let text: string;
    try {
      text = await read(file);
    } catch (err) {
      const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      verdicts.push({
        file: name,
        result: "unreadable",
        errors: [{ path: "<file>", message: `cannot read: ${reason}` }],
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
  return { exitCode, verdicts, lines: verdicts.flatMap(verdictLines) };
}

/** The `--output json` document: the exit code's meaning as `valid`, and every verdict. */
export function formatValidateJson(out: ValidateOutput): string {
  return `${JSON.stringify({ valid: out.exitCode === 0, documents: out.verdicts }, null, 2)}\n`;
}

export interface ValidateArgs {
  output: "text" | "json";
  files: string[];
}

/** Parses `[--output text|json] FILE|-...`; throws UsageError (with the usage) on anything else. */
export function parseValidateArgs(argv: readonly string[]): ValidateArgs {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: { output: { type: "string", short: "o" } },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw argsError(err, VALIDATE_USAGE);
  }
  const output = parsed.values.output ?? "text";
  if (output !== "text" && output !== "json") {
    throw new UsageError(`--output must be text or json, got '${output}'`, VALIDATE_USAGE);
  }
  if (parsed.positionals.length === 0)
    throw new UsageError("no files given ('-' reads standard input)", VALIDATE_USAGE);
  return { output, files: parsed.positionals };
}

/** The `dpo validate` command: returns its exit code. */
export async function runValidateCommand(argv: readonly string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(VALIDATE_USAGE);
    return 0;
  }
  const args = parseValidateArgs(argv);
  const out = await validateFiles(args.files);
  if (args.output === "json") {
    process.stdout.write(formatValidateJson(out));
  } else if (out.lines.length > 0) {
    // Everything on stdout when all is well, else on stderr, so a CI log shows the problems in red.
    (out.exitCode === 0 ? process.stdout : process.stderr).write(`${out.lines.join("\n")}\n`);
  }
  return out.exitCode;
}
