// The project runs on the Node.js release it pins: the tests themselves, and the image it ships.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import semver from "semver";
import { describe, expect, it } from "vitest";

const repo = join(import.meta.dirname, "..", "..");
const pinned = readFileSync(join(repo, ".node-version"), "utf8").trim();
const pinnedMajor = semver.major(pinned);

describe("the pinned Node.js runtime", () => {
  it("runs the tests, and the `node` that child processes find on PATH", () => {
    expect(semver.major(process.version)).toBeGreaterThanOrEqual(pinnedMajor);
    const fromPath = execFileSync("node", ["--version"], { encoding: "utf8" }).trim();
    expect(semver.major(fromPath)).toBeGreaterThanOrEqual(pinnedMajor);
  });

  it("is an LTS release that package.json's engines accept", () => {
    expect(pinnedMajor % 2, "an even major is an LTS line").toBe(0);
    const pkg = JSON.parse(readFileSync(join(repo, "package.json"), "utf8")) as { engines: { node: string } };
    expect(semver.satisfies(pinned, pkg.engines.node)).toBe(true);
    expect(semver.satisfies("20.19.0", pkg.engines.node), "Node 20 is end of life").toBe(false);
  });

  it("is the release the image is built on", () => {
    const dockerfile = readFileSync(join(repo, "Dockerfile"), "utf8");
    expect(dockerfile).toMatch(
      new RegExp(`^ARG NODE_IMAGE=node:${pinned.replaceAll(".", "\\.")}-slim$`, "m"),
    );
  });
});
