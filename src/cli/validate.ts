// `dpo validate FILE...`: schema and semantic checks of DevicePluginConfig manifests in either API version,
// with field paths.
import { readFile } from "node:fs/promises";
import {
  parseManifestDocuments,
  validateAnyVersion,
  type FieldError,
  type SupportedApiVersion,
} from "../api/validate.js";

export interface ValidateOutput {
  /** 0 all valid, 1 some invalid, 2 some file unreadable. */
  exitCode: 0 | 1 | 2;
  lines: string[];
}

/**
 * Validates every document of every file in the version its apiVersion names. A valid document reads
 * `FILE[#doc]: valid (dpo.dev/v1beta1)`; an invalid one `FILE[#doc]: invalid (dpo.dev/v1alpha1)` and then
 * each problem as `FILE[#doc]: path: message`.
 */
export async function validateFiles(files: readonly string[]): Promise<ValidateOutput> {
  const lines: string[] = [];
  let exitCode: 0 | 1 | 2 = 0;
  for (const file of files) {
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (err) {
      lines.push(`${file}: cannot read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      exitCode = 2;
      continue;
    }
    const docs = parseManifestDocuments(text);
    if (docs.length === 0) {
      lines.push(`${file}: no documents`);
      if (exitCode === 0) exitCode = 1;
      continue;
    }
    for (const doc of docs) {
      const where = docs.length > 1 ? `${file}#${doc.index}` : file;
      let version: SupportedApiVersion | undefined;
      let errors: FieldError[];
      if (doc.ok) {
        const r = validateAnyVersion(doc.value);
        version = r.apiVersion;
        errors = r.ok ? [] : r.errors;
      } else {
        errors = [{ path: "<document>", message: `YAML: ${doc.error}` }];
      }
      const label = version === undefined ? "" : ` (${version})`;
      if (errors.length === 0) {
        lines.push(`${where}: valid${label}`);
      } else {
        lines.push(`${where}: invalid${label}`);
        for (const e of errors) lines.push(`${where}: ${e.path}: ${e.message}`);
        if (exitCode === 0) exitCode = 1;
      }
    }
  }
  return { exitCode, lines };
}
