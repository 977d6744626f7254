// Where the release version is written down besides package.json, and the pure functions that read and
// rewrite it there: the drift test (test/unit/tools/release/versions.test.ts) and `make version` share this list.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import semver from "semver";

/**
 * One place a file names the release version. `pattern` is global and its first group is the version;
 * `min` is how many times it must occur (0: the file may lack it).
 */
export interface VersionPlace {
  file: string;
  what: string;
  pattern: RegExp;
  min: number;
}

const VERSION = String.raw`(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)`;

/** The image reference `ghcr.io/dpo-dev/dpo:<version>`, wherever a file names it. */
const IMAGE_TAG = new RegExp(String.raw`ghcr\.io/dpo-dev/dpo:${VERSION}\b`, "g");
/** A remote kustomize base at the release's git tag. */
const REMOTE_BASE = new RegExp(String.raw`github\.com/dpo-dev/dpo/[\w/.-]+\?ref=v${VERSION}\b`, "g");
/**
 * The release's files: `dpo-<version>.oci.tar`, `dpo-<version>.tgz` (chart), `dpo-cli-<version>.tgz` (npm),
 * `dpo-krew-<version>.yaml` (the krew manifest).
 */
const RELEASE_FILE = new RegExp(String.raw`\bdpo-(?:cli-|krew-)?${VERSION}\.(?:oci\.tar|tgz|yaml)\b`, "g");
/** `--version <version>` after a chart reference, as `helm install` takes it. */
const CHART_REF = new RegExp(String.raw`charts/dpo --version ${VERSION}\b`, "g");
/** A GitHub release download URL of the tag. */
const DOWNLOAD = new RegExp(String.raw`releases/download/v${VERSION}/`, "g");

/**
 * Every text place besides package.json and package-lock.json (JSON, see `lockVersions`): the chart and
 * config/default must follow, and the docs wherever they name the release.
 */
export const VERSION_PLACES: readonly VersionPlace[] = [
  {
    file: "charts/dpo/Chart.yaml",
    what: "the chart's version",
    pattern: new RegExp(`^version: ${VERSION}$`, "gm"),
    min: 1,
  },
  {
    file: "charts/dpo/Chart.yaml",
    what: "the chart's appVersion (the image tag)",
    pattern: new RegExp(`^appVersion: "${VERSION}"$`, "gm"),
    min: 1,
  },
  {
    file: "config/default/kustomization.yaml",
    what: "the image tag config/default installs",
    pattern: new RegExp(String.raw`^\s+newTag: ${VERSION}$`, "gm"),
    min: 1,
  },
  { file: "Dockerfile", what: "the image tag in the build example", pattern: IMAGE_TAG, min: 1 },
  { file: "docs/deploy.md", what: "image tags", pattern: IMAGE_TAG, min: 1 },
  { file: "docs/deploy.md", what: "remote kustomize bases", pattern: REMOTE_BASE, min: 1 },
  {
    file: "docs/deploy.md",
    what: "image tags set by kustomize",
    pattern: new RegExp(String.raw`(?:newTag: |dpo=[\w./-]+:)${VERSION}\b`, "g"),
    min: 1,
  },
  { file: "docs/deploy.md", what: "release files", pattern: RELEASE_FILE, min: 0 },
  { file: "docs/release.md", what: "release files", pattern: RELEASE_FILE, min: 3 },
  { file: "docs/release.md", what: "image tags", pattern: IMAGE_TAG, min: 1 },
  { file: "docs/release.md", what: "remote kustomize bases", pattern: REMOTE_BASE, min: 1 },
  { file: "docs/release.md", what: "download URLs", pattern: DOWNLOAD, min: 1 },
  { file: "docs/release.md", what: "chart references", pattern: CHART_REF, min: 0 },
  { file: "tools/image/README.md", what: "image tags", pattern: IMAGE_TAG, min: 1 },
  { file: "tools/image/README.md", what: "release files", pattern: RELEASE_FILE, min: 1 },
  { file: "README.md", what: "release files", pattern: RELEASE_FILE, min: 1 },
  { file: "README.md", what: "download URLs", pattern: DOWNLOAD, min: 1 },
  { file: "README.md", what: "image tags", pattern: IMAGE_TAG, min: 1 },
  { file: "README.md", what: "remote kustomize bases", pattern: REMOTE_BASE, min: 1 },
];

/** The versions a place names in `text`, in order. */
export function versionsAt(text: string, place: Pick<VersionPlace, "pattern">): string[] {
  return [...text.matchAll(place.pattern)].map((match) => match[1] ?? "");
}

/**
 * What is wrong with one place: each version that is not `expected`, or too few occurrences. Empty when
 * the place follows the version.
 */
export function driftAt(text: string, place: VersionPlace, expected: string): string[] {
  const found = versionsAt(text, place);
  const problems = found
    .filter((version) => version !== expected)
    .map((version) => `${place.file}: ${place.what} name ${version}, package.json says ${expected}`);
  if (found.length < place.min) {
    problems.push(
      `${place.file}: ${place.what}: ${found.length} found, expected at least ${place.min} naming ${expected}`,
    );
  }
  return problems;
}

/** `text` with every version of `place` replaced by `next`; the rest of each match stays as it was. */
export function rewriteAt(text: string, place: Pick<VersionPlace, "pattern">, next: string): string {
  return text.replace(place.pattern, (match: string, version: string) => match.replace(version, next));
}

/** A package-lock.json's own versions: the top-level one and its root package's. */
export function lockVersions(lockText: string): string[] {
  const lock = JSON.parse(lockText) as {
    version?: unknown;
    packages?: Record<string, { version?: unknown }>;
  };
  return [lock.version, lock.packages?.[""]?.version].map((v) => (typeof v === "string" ? v : "(none)"));
}

/** The lock file with both of its own versions set to `next`, written as npm writes it. */
export function rewriteLock(lockText: string, next: string): string {
  const lock = JSON.parse(lockText) as { version?: string; packages?: Record<string, { version?: string }> };
  lock.version = next;
  const root = lock.packages?.[""];
  if (root) root.version = next;
  return `${JSON.stringify(lock, null, 2)}\n`;
}

/** The version a user asked for, or an error naming the argument and what it must look like. */
export function parseReleaseVersion(input: string, field = "VERSION"): string {
  const trimmed = input.trim();
  if (trimmed.startsWith("v")) {
    throw new Error(`${field}: "${input}" starts with "v"; give the version alone (the git tag adds the v)`);
  }
  const valid = semver.valid(trimmed);
  if (valid === null || valid !== trimmed || semver.parse(trimmed)?.build.length !== 0) {
    throw new Error(
      `${field}: "${input}" is not a release version (MAJOR.MINOR.PATCH, optionally -PRERELEASE)`,
    );
  }
  return trimmed;
}

const REPOSITORY = "https://github.com/dpo-dev/dpo";
const UNRELEASED_LINK = /^\[Unreleased\]: \S+\/compare\/v(\S+)\.\.\.HEAD$/m;

/** What is wrong with CHANGELOG.md for `version`: its section, and the Unreleased link's base tag. */
export function changelogDrift(changelog: string, version: string): string[] {
  const problems: string[] = [];
  if (!changelog.includes("## [Unreleased]")) problems.push("CHANGELOG.md: no ## [Unreleased] section");
  if (
    !new RegExp(`^## \\[${version.replace(/\./g, "\\.")}\\] - \\d{4}-\\d{2}-\\d{2}$`, "m").test(changelog)
  ) {
    problems.push(`CHANGELOG.md: no "## [${version}] - YYYY-MM-DD" section for package.json's version`);
  }
  const base = UNRELEASED_LINK.exec(changelog)?.[1];
  if (base !== version) {
    problems.push(`CHANGELOG.md: the [Unreleased] link compares from v${base ?? "(none)"}, not v${version}`);
  }
  return problems;
}

/**
 * The CHANGELOG released as `version`: what was unreleased under a new heading for it, an empty Unreleased
 * section above, and the links at the bottom moved on (Unreleased from the new tag, the new one from `previous`).
 */
export function changelogForRelease(
  changelog: string,
  previous: string,
  version: string,
  date: string,
): string {
  const heading = "## [Unreleased]";
  const at = changelog.indexOf(heading);
  if (at < 0) throw new Error(`CHANGELOG.md: no "${heading}" section to release`);
  if (changelog.includes(`## [${version}]`))
    throw new Error(`CHANGELOG.md: already has a section for ${version}`);
  if (!UNRELEASED_LINK.test(changelog))
    throw new Error("CHANGELOG.md: no [Unreleased]: .../compare/vX...HEAD link");
  const after = at + heading.length;
  const released = `${changelog.slice(0, after)}\n\n## [${version}] - ${date}${changelog.slice(after)}`;
  return released.replace(
    UNRELEASED_LINK,
    `[Unreleased]: ${REPOSITORY}/compare/v${version}...HEAD\n[${version}]: ${REPOSITORY}/compare/v${previous}...v${version}`,
  );
}

/** Reads a file of the checkout by its path from the root; undefined when there is none. */
export type ReadFile = (file: string) => string | undefined;

/** A reader of the checkout at `repo`. */
export function checkoutReader(repo: string): ReadFile {
  return (file) => (existsSync(join(repo, file)) ? readFileSync(join(repo, file), "utf8") : undefined);
}

/** package.json's version, read through `read`. */
export function packageVersionOf(read: ReadFile): string {
  const text = read("package.json");
  const version = text === undefined ? undefined : (JSON.parse(text) as { version?: unknown }).version;
  if (typeof version !== "string") throw new Error("package.json: version is missing");
  return version;
}

/** package.json's version in the checkout at `repo`. */
export function packageVersion(repo: string): string {
  return packageVersionOf(checkoutReader(repo));
}

/** Every place that does not follow package.json's version; empty when all do. */
export function versionDriftOf(read: ReadFile): string[] {
  const version = packageVersionOf(read);
  const problems: string[] = [];
  const lock = read("package-lock.json");
  for (const found of lock === undefined ? ["(no file)"] : lockVersions(lock)) {
    if (found !== version) problems.push(`package-lock.json: version ${found}, package.json says ${version}`);
  }
  for (const place of VERSION_PLACES) {
    const text = read(place.file);
    if (text === undefined) problems.push(`${place.file}: missing`);
    else problems.push(...driftAt(text, place, version));
  }
  const changelog = read("CHANGELOG.md");
  problems.push(
    ...(changelog === undefined ? ["CHANGELOG.md: missing"] : changelogDrift(changelog, version)),
  );
  return problems;
}

/** Every place of the checkout at `repo` that does not follow package.json's version. */
export function versionDrift(repo: string): string[] {
  return versionDriftOf(checkoutReader(repo));
}

/**
 * The files a move to `next` rewrites, with their new text: package.json, the lock file, every place of
 * VERSION_PLACES and CHANGELOG.md (released under `date`). Refuses a checkout that drifts already, since
 * the move would then leave some place behind.
 */
export function bumpVersion(read: ReadFile, next: string, date: string): Map<string, string> {
  const previous = packageVersionOf(read);
  if (next === previous) throw new Error(`VERSION: package.json already says ${next}`);
  const drift = versionDriftOf(read);
  if (drift.length > 0)
    throw new Error(`fix these first, so every place moves from one version:\n  ${drift.join("\n  ")}`);
  const files = new Map<string, string>();
  const edit = (file: string, change: (text: string) => string): void => {
    const text = files.get(file) ?? read(file);
    if (text === undefined) throw new Error(`${file}: missing`);
    files.set(file, change(text));
  };
  edit("package.json", (text) => text.replace(/^ {2}"version": "[^"]+"/m, `  "version": "${next}"`));
  edit("package-lock.json", (text) => rewriteLock(text, next));
  for (const place of VERSION_PLACES) edit(place.file, (text) => rewriteAt(text, place, next));
  edit("CHANGELOG.md", (text) => changelogForRelease(text, previous, next, date));
  return files;
}
