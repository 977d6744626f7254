// `make help` lists every target of the Makefile that has a `##` comment above it, with that comment, and
// nothing else: read from the Makefile itself, so a newly documented target shows up without a change here.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const repoRoot = resolve(import.meta.dirname, "..", "..", "..");

/** Target → its `##` comment as one line: comments followed by the target, variable assignments between allowed. */
function documentedTargets(makefile: string): Map<string, string> {
  const documented = new Map<string, string>();
  let comment: string[] = [];
  for (const line of makefile.replace(/\\\n[^\n]*/g, "").split("\n")) {
    if (/^##( |$)/.test(line)) {
      comment.push(line.slice(3));
      continue;
    }
    if (/^[A-Za-z_][A-Za-z0-9_]*\s*[:?+]?=/.test(line)) continue;
    const target = /^([A-Za-z0-9_-]+):(?!=)/.exec(line)?.[1];
    if (target !== undefined && comment.length > 0) {
      documented.set(target, comment.join(" ").replace(/\$\$/g, "$").replace(/\s+/g, " ").trim());
    }
    comment = [];
  }
  return documented;
}

/** `make help`'s entries: a target at the start of a line, its text wrapped on the indented lines below. */
function helpEntries(output: string): Map<string, string> {
  const entries = new Map<string, string>();
  let current: string | undefined;
  for (const line of output.split("\n")) {
    if (line.trim() === "") continue;
    const head = /^([A-Za-z0-9_-]+)\s+(.*)$/.exec(line);
    if (head) {
      current = head[1]!;
      if (entries.has(current)) throw new Error(`make help lists ${current} twice`);
      entries.set(current, head[2]!);
    } else if (current !== undefined && /^\s/.test(line)) {
      entries.set(current, `${entries.get(current)} ${line.trim()}`);
    } else {
      throw new Error(`make help printed a line that is no entry: ${JSON.stringify(line)}`);
    }
  }
  return new Map([...entries].map(([target, text]) => [target, text.replace(/\s+/g, " ").trim()]));
}

describe("make help", () => {
  const makefile = readFileSync(join(repoRoot, "Makefile"), "utf8");
  const documented = documentedTargets(makefile);

  it("finds the documented targets in the Makefile (the reading above is not empty)", () => {
    expect(documented.size).toBeGreaterThan(20);
    expect(documented.get("test")).toMatch(/^Tests: unit/);
  });

  it("lists every target with a ## comment, with that comment, and nothing else", () => {
    const output = execFileSync("make", ["--no-print-directory", "help"], {
      cwd: repoRoot,
      encoding: "utf8",
    });
    expect(Object.fromEntries(helpEntries(output))).toEqual(Object.fromEntries(documented));
  });
});
