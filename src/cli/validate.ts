// `dpo validate FILE...`: schema and semantic checks of DevicePluginConfig manifests with field paths.
import { readFile } from "node:fs/promises";
import { parseManifestDocuments, validateDevicePluginConfig, type FieldError } from "../api/validate.js";

export interface ValidateOutput {
  /** 0 all valid, 1 some invalid, 2 some file unreadable. */
  exitCode: 0 | 1 | 2;
  lines: string[];
}

/** Validates every document of every file; reports each problem as `FILE[#doc]: path: message`. */
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
      const errors: FieldError[] = doc.ok
        ? (() => {
            const r = validateDevicePluginConfig(doc.value);
            return r.ok ? [] : r.errors;
          })()
        : [{ path: "<document>", message: `YAML: ${doc.error}` }];
      if (errors.length === 0) {
        lines.push(`${where}: valid`);
      } else {
        for (const e of errors) lines.push(`${where}: ${e.path}: ${e.message}`);
        if (exitCode === 0) exitCode = 1;
      }
    }
  }
  return { exitCode, lines };
}
