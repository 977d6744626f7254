// The olm-validate harness (main.go here) from TypeScript: build or reuse it, and ask the operator
// framework's validators what they make of a bundle directory.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { buildGoHarness } from "../go-harness.js";

/** One finding of one validator: `value` is what it found wrong (an API, a rule), as Go prints it. */
export interface OlmFinding {
  validator: string;
  object: string;
  type: string;
  field?: string;
  value?: string;
  detail: string;
}

export interface OlmReport {
  bundle: string;
  package: string;
  channels: string[];
  /** The objects of manifests/ besides the CSV's own parse: CRDs, the CSV, the extra objects. */
  objects: number;
  validators: string[];
  errors: OlmFinding[];
  warnings: OlmFinding[];
}

export interface OlmResult {
  /** 0: no errors; 1: a validator reported an error; 2: the bundle could not be loaded. */
  code: number;
  /** Absent when the bundle could not be loaded (code 2). */
  report?: OlmReport;
  stderr: string;
}

const BUILD = fileURLToPath(new URL("./build.sh", import.meta.url));

/** Builds the harness unless the cache holds this version of it; the path of the binary. */
export function buildOlmValidate(): Promise<string> {
  return buildGoHarness(BUILD);
}

/** Validates the bundle in `dir` (manifests/ and metadata/), with the APIs removed by `k8sVersion` (1.N) as errors. */
export function olmValidate(binary: string, dir: string, k8sVersion: string): Promise<OlmResult> {
  return new Promise((resolve, reject) => {
    execFile(
      binary,
      ["--k8s-version", k8sVersion, dir],
      { maxBuffer: 16 << 20, timeout: 120_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : -1) : 0;
        if (code === -1) {
          reject(new Error(`${binary} ${dir}: ${error?.message}\n${stderr}`));
          return;
        }
        resolve({ code, ...(stdout.trim() ? { report: JSON.parse(stdout) as OlmReport } : {}), stderr });
      },
    );
  });
}
