// The krew manifest of a release: plugins/krew/dpo.yaml with the version and the sha256 of the release's
// CLI package filled in. `make release` writes it beside the package whose digest it carries, so the
// checksum is always computed from the file itself, never written by hand.
import { readFileSync } from "node:fs";
import { join } from "node:path";

/** The committed template, relative to the repository. */
export const KREW_TEMPLATE = join("plugins", "krew", "dpo.yaml");

const PLACEHOLDERS = ["{{VERSION}}", "{{SHA256}}"] as const;

/** The release file krew downloads: the npm package of the CLI, which holds the same bundle. */
export function krewArchiveName(version: string): string {
  return `dpo-cli-${version}.tgz`;
}

/** The name of the filled manifest in dist/release/. */
export function krewManifestName(version: string): string {
  return `dpo-krew-${version}.yaml`;
}

/**
 * The template with `{{VERSION}}` and `{{SHA256}}` replaced. Refuses a version that is not x.y.z (with an
 * optional pre-release), a digest that is not 64 lowercase hex digits, and a template that lacks either
 * placeholder or keeps one unfilled, naming what is wrong.
 */
export function fillKrewManifest(template: string, version: string, sha256: string): string {
  if (!/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(version)) {
    throw new Error(`krew manifest: version '${version}' is not x.y.z`);
  }
  if (!/^[0-9a-f]{64}$/.test(sha256)) {
    throw new Error(`krew manifest: sha256 '${sha256}' is not 64 lowercase hex digits`);
  }
  for (const placeholder of PLACEHOLDERS) {
    if (!template.includes(placeholder)) throw new Error(`krew manifest: the template has no ${placeholder}`);
  }
  const filled = template.replaceAll("{{VERSION}}", version).replaceAll("{{SHA256}}", sha256);
  const left = /\{\{[A-Z0-9_]+\}\}/.exec(filled);
  if (left) throw new Error(`krew manifest: ${left[0]} is left unfilled`);
  return filled;
}

/** The filled manifest of the repository at `repo` for a release whose CLI package has `sha256`. */
export function krewManifest(repo: string, version: string, sha256: string): string {
  return fillKrewManifest(readFileSync(join(repo, KREW_TEMPLATE), "utf8"), version, sha256);
}
