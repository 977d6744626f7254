// Every make target works as the first command on a fresh clone: a target whose recipe runs TypeScript or an
// npm-installed tool (itself or through a script it calls) depends, directly or not, on `deps`, which installs
// the npm packages. Read from the Makefile itself, so a new target that forgets it fails here.
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const repoRoot = resolve(import.meta.dirname, "..", "..");

interface Rule {
  prerequisites: string[];
  recipe: string[];
}

/** Explicit rules of a Makefile: target → prerequisites and recipe lines. Variables and comments are skipped. */
function parseMakefileRules(text: string): Map<string, Rule> {
  const rules = new Map<string, Rule>();
  let current: Rule[] = [];
  for (const line of text.replace(/\\\n/g, " ").split("\n")) {
    if (line.startsWith("\t")) {
      for (const rule of current) rule.recipe.push(line.slice(1));
      continue;
    }
    const match = /^([A-Za-z0-9_./%-][A-Za-z0-9_./% -]*?)\s*:(?![=:])\s*(.*)$/.exec(line);
    if (!match || line.startsWith("#")) {
      if (line.trim() !== "" && !line.startsWith("#")) current = [];
      continue;
    }
    const [, targets = "", rest = ""] = match;
    const prerequisites = rest.split("|").join(" ").split(/\s+/).filter(Boolean);
    current = [];
    for (const target of targets.split(/\s+/).filter(Boolean)) {
      if (target.startsWith(".")) continue; // .PHONY and friends
      const rule = rules.get(target) ?? { prerequisites: [], recipe: [] };
      rule.prerequisites.push(...prerequisites);
      rules.set(target, rule);
      current.push(rule);
    }
  }
  return rules;
}

/** Whether a recipe line needs the project's npm packages: npx, tsx, or a script of the repository that does. */
function needsNpmPackages(line: string, readScript: (path: string) => string | undefined): boolean {
  const npm = /\bnpx\b|--import tsx|\btsx\b|\bvitest\b|\beslint\b|\bprettier\b/;
  if (npm.test(line)) return true;
  for (const [script] of line.matchAll(/tools\/[A-Za-z0-9_/-]+\.sh/g)) {
    if (script === "tools/toolchain/node.sh") continue; // installs Node itself, before any package
    const text = readScript(script);
    if (text !== undefined && npm.test(text)) return true;
  }
  return false;
}

function dependsOn(
  rules: Map<string, Rule>,
  target: string,
  wanted: string,
  seen = new Set<string>(),
): boolean {
  if (seen.has(target)) return false;
  seen.add(target);
  const rule = rules.get(target);
  if (!rule) return false;
  return rule.prerequisites.some((p) => p === wanted || dependsOn(rules, p, wanted, seen));
}

/** Targets whose recipes need the npm packages without `deps` before them. */
function targetsMissingDeps(makefile: string, readScript: (path: string) => string | undefined): string[] {
  const rules = parseMakefileRules(makefile);
  return [...rules.entries()]
    .filter(([target]) => target !== "deps" && !target.includes("/"))
    .filter(([, rule]) => rule.recipe.some((line) => needsNpmPackages(line, readScript)))
    .filter(([target]) => !dependsOn(rules, target, "deps"))
    .map(([target]) => target)
    .sort();
}

const readRepoScript = (path: string): string | undefined => {
  const full = join(repoRoot, path);
  return existsSync(full) ? readFileSync(full, "utf8") : undefined;
};

describe("make targets on a fresh clone", () => {
  it("every target that runs TypeScript or an npm tool installs the npm packages first", () => {
    const makefile = readFileSync(join(repoRoot, "Makefile"), "utf8");
    expect(targetsMissingDeps(makefile, readRepoScript)).toEqual([]);
  });

  it.each([
    ["a recipe running npx", "a:\n\tnpx vitest run\n", {}, ["a"]],
    [
      "a recipe running a script that runs tsx",
      "up:\n\ttools/x/up.sh\n",
      { "tools/x/up.sh": "node --import tsx x.ts" },
      ["up"],
    ],
    [
      "the same through deps",
      "deps: stamp\nup: deps\n\ttools/x/up.sh\n",
      { "tools/x/up.sh": "exec tsx x.ts" },
      [],
    ],
    [
      "deps two prerequisites down",
      "deps:\nbuild: deps\n\tnpx tsc\nrun: build\n\tnode --import tsx r.ts\n",
      {},
      [],
    ],
    ["a Go build script", "go-tool:\n\ttools/g/build.sh\n", { "tools/g/build.sh": "go build ./..." }, []],
    ["a continued recipe line", "a: \\\n  b\n\techo \\\n  npx x\n", {}, ["a"]],
  ] as const)("finds %s", (_name, makefile, scripts, expected) => {
    const readScript = (path: string): string | undefined => (scripts as Record<string, string>)[path];
    expect(targetsMissingDeps(makefile, readScript)).toEqual(expected);
  });
});
