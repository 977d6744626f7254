// One release version: package.json's, which the lock file, the chart, config/default's image tag, the
// image build, src/version.ts, CHANGELOG.md and the docs' image tags, remote bases and release files all
// follow (tools/release/versions.ts lists the places). Fails on drift, and `make version`'s rewrite is
// checked on this checkout's own files, in memory.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { dpoImage, PACKAGE_VERSION } from "../../../../tools/image/images.js";
import {
  bumpVersion,
  changelogDrift,
  changelogForRelease,
  checkoutReader,
  driftAt,
  lockVersions,
  parseReleaseVersion,
  rewriteAt,
  rewriteLock,
  VERSION_PLACES,
  versionDriftOf,
  versionsAt,
  type ReadFile,
} from "../../../../tools/release/versions.js";
import { buildInfo } from "../../../../src/version.js";

const repo = join(import.meta.dirname, "..", "..", "..", "..");
const read = checkoutReader(repo);
const version = (JSON.parse(readFileSync(join(repo, "package.json"), "utf8")) as { version: string }).version;
const place = (file: string, what: string) => {
  const found = VERSION_PLACES.find((p) => p.file === file && p.what === what);
  if (!found) throw new Error(`no place ${file}: ${what}`);
  return found;
};

describe("the release version", () => {
  it("is the same in every place that names it", () => {
    expect(versionDriftOf(read)).toEqual([]);
  });

  it("is what src/version.ts reports and what the image is tagged", () => {
    expect(buildInfo().version).toBe(version);
    expect(PACKAGE_VERSION).toBe(version);
    expect(dpoImage.tag).toBe(version);
  });

  it("is found in each place where the place requires it", () => {
    for (const p of VERSION_PLACES.filter((p) => p.min > 0)) {
      const text = read(p.file) ?? "";
      expect(versionsAt(text, p).length, `${p.file}: ${p.what}`).toBeGreaterThanOrEqual(p.min);
    }
  });
});

describe("drift is caught", () => {
  const drifted =
    (file: string, change: (text: string) => string): ReadFile =>
    (f) =>
      f === file ? change(read(f) ?? "") : read(f);

  it.each([
    [
      "the chart's appVersion",
      "charts/dpo/Chart.yaml",
      /^appVersion: ".*"$/m,
      'appVersion: "9.9.9"',
      "appVersion (the image tag) name 9.9.9",
    ],
    [
      "the chart's version",
      "charts/dpo/Chart.yaml",
      /^version: .*$/m,
      "version: 9.9.9",
      "the chart's version name 9.9.9",
    ],
    [
      "config/default's tag",
      "config/default/kustomization.yaml",
      /newTag: .*$/m,
      "newTag: 9.9.9",
      "name 9.9.9",
    ],
    ["a remote base", "docs/deploy.md", /\?ref=v[\d.]+/, "?ref=v9.9.9", "remote kustomize bases name 9.9.9"],
    [
      "a release file",
      "docs/release.md",
      /dpo-cli-[\d.]+\.tgz/,
      "dpo-cli-9.9.9.tgz",
      "release files name 9.9.9",
    ],
    [
      "the lock file",
      "package-lock.json",
      /"version": "[\d.]+"/,
      '"version": "9.9.9"',
      "package-lock.json: version 9.9.9",
    ],
    ["the changelog's section", "CHANGELOG.md", /^## \[[\d.]+\] - /m, "## [9.9.9] - ", 'no "## ['],
    [
      "the image tag in the Dockerfile",
      "Dockerfile",
      /dpo:[\d.]+/,
      "dpo:9.9.9",
      "Dockerfile: the image tag in the build example name 9.9.9",
    ],
  ] as const)("in %s", (_name, file, from, to, message) => {
    const problems = versionDriftOf(drifted(file, (text) => text.replace(from, to)));
    expect(problems.join("\n")).toContain(message);
  });

  it("when a required place is gone", () => {
    const problems = versionDriftOf(
      drifted("docs/release.md", (text) => text.replaceAll("ghcr.io/dpo-dev/dpo:", "x:")),
    );
    expect(problems).toContain(`docs/release.md: image tags: 0 found, expected at least 1 naming ${version}`);
  });
});

describe("versions in text", () => {
  const image = place("docs/deploy.md", "image tags");
  it.each([
    ["image ghcr.io/dpo-dev/dpo:1.2.3 and ghcr.io/dpo-dev/dpo:1.2.4-rc.1", ["1.2.3", "1.2.4-rc.1"]],
    ["ghcr.io/dpo-dev/dpo:<version> is a placeholder", []],
    ["ghcr.io/other/dpo:1.2.3 is another image", []],
  ])("%s", (text, expected) => {
    expect(versionsAt(text, image)).toEqual(expected);
  });

  it("rewrites only the version inside each match", () => {
    const base = place("docs/deploy.md", "remote kustomize bases");
    const text = "- github.com/dpo-dev/dpo/config/default?ref=v0.1.0 # 0.1.0 stays\n";
    expect(rewriteAt(text, base, "0.2.0")).toBe(
      "- github.com/dpo-dev/dpo/config/default?ref=v0.2.0 # 0.1.0 stays\n",
    );
    expect(driftAt(text, base, "0.2.0")).toEqual([
      "docs/deploy.md: remote kustomize bases name 0.1.0, package.json says 0.2.0",
    ]);
  });

  it("reads and writes the lock file's own two versions, not its packages'", () => {
    const lock =
      '{\n  "name": "dpo",\n  "version": "1.0.0",\n  "packages": {\n    "": { "version": "1.0.0" },\n    "node_modules/x": { "version": "1.0.0" }\n  }\n}\n';
    const next = rewriteLock(lock, "2.0.0");
    expect(lockVersions(next)).toEqual(["2.0.0", "2.0.0"]);
    expect(JSON.parse(next).packages["node_modules/x"].version).toBe("1.0.0");
  });
});

describe("make version", () => {
  it.each([
    ["1.2.3", "1.2.3"],
    [" 1.2.3-rc.1 ", "1.2.3-rc.1"],
  ])("accepts %j", (input, expected) => {
    expect(parseReleaseVersion(input)).toBe(expected);
  });

  it.each([
    ["v1.2.3", 'VERSION: "v1.2.3" starts with "v"'],
    ["1.2", 'VERSION: "1.2" is not a release version'],
    ["", 'VERSION: "" is not a release version'],
    ["1.2.3+build.5", 'VERSION: "1.2.3+build.5" is not a release version'],
    ["01.2.3", 'VERSION: "01.2.3" is not a release version'],
  ])("refuses %j, naming VERSION", (input, message) => {
    expect(() => parseReleaseVersion(input)).toThrow(message);
  });

  it("moves every place of this checkout to the new version and opens its changelog section", () => {
    const files = bumpVersion(read, "9.8.7", "2031-01-02");
    const after: ReadFile = (file) => files.get(file) ?? read(file);
    expect(versionDriftOf(after)).toEqual([]);
    expect(JSON.parse(after("package.json") ?? "").version).toBe("9.8.7");
    expect(after("charts/dpo/Chart.yaml")).toContain('appVersion: "9.8.7"');
    const changelog = after("CHANGELOG.md") ?? "";
    expect(changelog).toContain("## [Unreleased]\n\n## [9.8.7] - 2031-01-02\n");
    expect(changelog).toContain(
      `[Unreleased]: https://github.com/dpo-dev/dpo/compare/v9.8.7...HEAD\n[9.8.7]: https://github.com/dpo-dev/dpo/compare/v${version}...v9.8.7\n`,
    );
    // Nothing but the version changes in the other files: put the old one back and each is as it was.
    for (const [file, text] of files) {
      if (file === "CHANGELOG.md") continue;
      expect(read(file), file).not.toContain("9.8.7");
      expect(text.replaceAll("9.8.7", version), file).toBe(read(file));
    }
  });

  it("refuses the version it is at, and a checkout that drifts already", () => {
    expect(() => bumpVersion(read, version, "2031-01-02")).toThrow(
      `VERSION: package.json already says ${version}`,
    );
    const drifting: ReadFile = (f) =>
      f === "charts/dpo/Chart.yaml" ? (read(f) ?? "").replace(/^version: .*$/m, "version: 0.0.1") : read(f);
    expect(() => bumpVersion(drifting, "9.8.7", "2031-01-02")).toThrow("fix these first");
  });
});

describe("the changelog", () => {
  const changelog =
    "# Changelog\n\n## [Unreleased]\n\n### Added\n\n- x\n\n## [1.0.0] - 2030-01-01\n\n[Unreleased]: https://github.com/dpo-dev/dpo/compare/v1.0.0...HEAD\n[1.0.0]: https://github.com/dpo-dev/dpo/releases/tag/v1.0.0\n";

  it("releases what was unreleased under the new heading", () => {
    expect(changelogForRelease(changelog, "1.0.0", "1.1.0", "2030-02-01")).toBe(
      "# Changelog\n\n## [Unreleased]\n\n## [1.1.0] - 2030-02-01\n\n### Added\n\n- x\n\n## [1.0.0] - 2030-01-01\n\n" +
        "[Unreleased]: https://github.com/dpo-dev/dpo/compare/v1.1.0...HEAD\n" +
        "[1.1.0]: https://github.com/dpo-dev/dpo/compare/v1.0.0...v1.1.0\n" +
        "[1.0.0]: https://github.com/dpo-dev/dpo/releases/tag/v1.0.0\n",
    );
  });

  it.each([
    ["1.0.0", []],
    ["1.1.0", ['CHANGELOG.md: no "## [1.1.0] - YYYY-MM-DD" section', "compares from v1.0.0, not v1.1.0"]],
  ] as const)("for %s says %j", (v, expected) => {
    const problems = changelogDrift(changelog, v).join("\n");
    if (expected.length === 0) expect(problems).toBe("");
    for (const part of expected) expect(problems).toContain(part);
  });

  it("refuses a release twice, and a changelog without Unreleased", () => {
    expect(() => changelogForRelease(changelog, "0.9.0", "1.0.0", "2030-02-01")).toThrow(
      "already has a section for 1.0.0",
    );
    expect(() => changelogForRelease("# Changelog\n", "1.0.0", "1.1.0", "2030-02-01")).toThrow(
      'no "## [Unreleased]"',
    );
  });
});
