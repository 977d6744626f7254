// The krew manifest (plugins/krew/dpo.yaml, filled by tools/release/krew.ts in `make release`): a krew
// Plugin whose archive is the release's CLI package at the address docs/release.md gives, whose bin is the
// package's kubectl-dpo, and whose sha256 only the release step writes.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  fillKrewManifest,
  krewArchiveName,
  krewManifest,
  KREW_TEMPLATE,
} from "../../../../tools/release/krew.js";
import type { RootPackage } from "../../../../tools/release/npm-package.js";

const repo = join(import.meta.dirname, "..", "..", "..", "..");
const root = JSON.parse(readFileSync(join(repo, "package.json"), "utf8")) as RootPackage;
const template = readFileSync(join(repo, KREW_TEMPLATE), "utf8");
const SHA = "0123456789abcdef".repeat(4);

interface KrewPlugin {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec: {
    version: string;
    shortDescription: string;
    platforms: {
      selector: { matchExpressions: { key: string; values: string[] }[] };
      uri: string;
      sha256: string;
      files: { from: string; to: string }[];
      bin: string;
    }[];
  };
}

describe("the krew manifest", () => {
  const manifest = parse(krewManifest(repo, root.version, SHA)) as KrewPlugin;

  it("is a krew Plugin named dpo, so kubectl runs it as kubectl dpo, at the package's version", () => {
    expect(manifest.apiVersion).toBe("krew.googlecontainertools.github.com/v1alpha2");
    expect(manifest.kind).toBe("Plugin");
    expect(manifest.metadata.name).toBe("dpo");
    expect(manifest.spec.version).toBe(`v${root.version}`);
    expect(manifest.spec.shortDescription.length).toBeLessThanOrEqual(50);
  });

  it("downloads the release's CLI package from the address docs/release.md gives, with the digest given", () => {
    const release = readFileSync(join(repo, "docs", "release.md"), "utf8");
    const published =
      /https:\/\/github\.com\/[^/]+\/[^/]+\/releases\/download\/v[^/]+\/dpo-cli-[^\s`]+\.tgz/.exec(
        release,
      )?.[0];
    expect(published, "docs/release.md names where dpo-cli-<version>.tgz is published").toBeDefined();
    for (const platform of manifest.spec.platforms) {
      expect(platform.uri).toBe(
        `${published!.slice(0, published!.lastIndexOf("/releases/"))}/releases/download/v${root.version}/${krewArchiveName(root.version)}`,
      );
      expect(platform.sha256).toBe(SHA);
      expect(platform.selector.matchExpressions[0]?.values.sort()).toEqual(["darwin", "linux"]);
    }
  });

  it("runs the bundle the npm package installs as kubectl-dpo, with the package.json it reads its version from", () => {
    const kubectlBin = root.bin?.["kubectl-dpo"];
    expect(kubectlBin).toBe("dist/dpo.js");
    for (const platform of manifest.spec.platforms) {
      expect(platform.bin).toBe(kubectlBin);
      expect(platform.files).toContainEqual({ from: "package/dist/*", to: "dist" });
      expect(platform.files).toContainEqual({ from: "package/package.json", to: "." });
    }
  });

  it("is committed as a template: the digest is only ever written by the release step", () => {
    expect(template).toContain('sha256: "{{SHA256}}"');
    expect(template).not.toMatch(/[0-9a-f]{64}/);
  });

  it.each([
    [
      "a digest that is not hex",
      root.version,
      "not-a-digest",
      /sha256 'not-a-digest' is not 64 lowercase hex digits/,
    ],
    ["an uppercase digest", root.version, SHA.toUpperCase(), /is not 64 lowercase hex digits/],
    ["a version with a v", `v${root.version}`, SHA, /version 'v.*' is not x\.y\.z/],
  ])("refuses %s", (_what, version, sha, message) => {
    expect(() => fillKrewManifest(template, version, sha)).toThrow(message);
  });

  it("refuses a template without a placeholder, or with one it does not know", () => {
    expect(() => fillKrewManifest(template.replace('"{{SHA256}}"', '""'), "1.0.0", SHA)).toThrow(
      "krew manifest: the template has no {{SHA256}}",
    );
    expect(() => fillKrewManifest(`${template}# {{ARCH}}\n`, "1.0.0", SHA)).toThrow(
      "krew manifest: {{ARCH}} is left unfilled",
    );
  });
});
