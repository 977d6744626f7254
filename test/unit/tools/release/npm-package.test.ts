// The CLI's npm package manifest (tools/release/npm-package.ts): a scoped name, so `npx` can never fetch the
// public registry's unrelated `dpo`, the `dpo` bin and the names kubectl looks for, and no dependencies to fetch.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { cliPackageManifest, type RootPackage } from "../../../../tools/release/npm-package.js";

const repo = join(import.meta.dirname, "..", "..", "..", "..");
const root = JSON.parse(readFileSync(join(repo, "package.json"), "utf8")) as RootPackage;

describe("cliPackageManifest", () => {
  it("takes the repository's package.json: a scoped name with the dpo bin and no dependencies", () => {
    const manifest = cliPackageManifest(root);
    expect(manifest["name"]).toMatch(/^@[a-z0-9][a-z0-9._-]*\/[a-z0-9][a-z0-9._-]*$/);
    expect(manifest).toMatchObject({ version: root.version, type: "module" });
    expect(manifest["bin"]).toEqual({
      dpo: "dist/dpo.js",
      "kubectl-dpo": "dist/dpo.js",
      "kubectl_complete-dpo": "dist/dpo.js",
    });
    expect(manifest["dependencies"]).toBeUndefined();
  });

  it.each<[string, Partial<RootPackage>, RegExp]>([
    ["an unscoped name", { name: "dpo" }, /package\.json: name is 'dpo', expected a scoped name/],
    ["a scope without a name", { name: "@dpo-dev/" }, /package\.json: name is '@dpo-dev\/'/],
    ["no name", { name: "" }, /package\.json: name is missing/],
    ["no version", { version: "" }, /package\.json: version is missing/],
    [
      "another bin",
      { bin: { dpo: "bin/dpo" } },
      /package\.json: bin\.dpo is bin\/dpo, expected dist\/dpo\.js/,
    ],
    [
      "no kubectl-dpo",
      { bin: { dpo: "dist/dpo.js", "kubectl_complete-dpo": "dist/dpo.js" } },
      /package\.json: bin\.kubectl-dpo is undefined, expected dist\/dpo\.js/,
    ],
    [
      "a kubectl completion elsewhere",
      { bin: { dpo: "dist/dpo.js", "kubectl-dpo": "dist/dpo.js", "kubectl_complete-dpo": "bin/complete" } },
      /package\.json: bin\.kubectl_complete-dpo is bin\/complete, expected dist\/dpo\.js/,
    ],
  ])("refuses %s, naming the field", (_what, change, message) => {
    expect(() => cliPackageManifest({ ...root, ...change })).toThrow(message);
  });
});
