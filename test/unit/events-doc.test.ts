// docs/events.md lists every Event reason dpo records: the reasons are read from src/ (literal reasons,
// the Stalled condition's reasons and the problem reasons that transition events forward), so a new
// reason, or a new place that records a computed one, fails here until the page has it.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { PROBLEM_REASONS } from "../../src/api/v1beta1/status.js";
import { FEATURE_REASONS } from "../../src/operator/status/features.js";

const repoRoot = resolve(import.meta.dirname, "..", "..");
const src = join(repoRoot, "src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sourceFiles(join(dir, e.name))
      : e.name.endsWith(".ts") && !e.name.endsWith(".d.ts")
        ? [join(dir, e.name)]
        : [],
  );
}

const files = new Map(sourceFiles(src).map((f) => [relative(repoRoot, f), readFileSync(f, "utf8")]));

/** Reasons written as literals where an Event is made: `{ type: "Warning", reason: "X" }` or `record(o, "Normal", "X", ...)`. */
function literalReasons(text: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(/type: "(?:Normal|Warning)",\s*reason: "([A-Za-z]+)"/g)) found.push(m[1]!);
  for (const m of text.matchAll(/"(?:Normal|Warning)",\s*"([A-Za-z]+)"/g)) found.push(m[1]!);
  return found;
}

/** The Stalled condition's reasons (aggregate.ts), which transitionEvents records when Stalled turns True. */
function stalledReasons(): string[] {
  const text = files.get("src/operator/status/aggregate.ts") ?? "";
  const block = /const upgradeStalled[\s\S]*?\n\s*const truth =/.exec(text)?.[0] ?? "";
  const found = new Set<string>();
  for (const m of block.matchAll(/reason: "([A-Za-z]+)"/g)) found.add(m[1]!);
  for (const m of block.matchAll(/\? "([A-Za-z]+)" : "([A-Za-z]+)"/g)) {
    found.add(m[1]!);
    found.add(m[2]!);
  }
  if (block.includes("resourceApiUnavailable")) found.add(FEATURE_REASONS.resourceApiUnavailable);
  return [...found];
}

/** Files that record an Event whose reason is not a literal: each forwards reasons this test knows. */
const FORWARDING = {
  // StatusEvent reasons from transitionEvents: literals, stalled.reason and problem.reason.
  "src/operator/controllers/steps/status-writes.ts": "transition events",
  // RolloutDecision events from upgrade/rollout.ts: literals only.
  "src/operator/controllers/steps/plugin-workloads.ts": "rollout events",
  "src/operator/status/transition-events.ts": "stalled and problem reasons",
  // StatusEvent reasons from status/self-heals.ts: literals only.
  "src/operator/controllers/config-reconciler.ts": "self-heal events",
};

describe("docs/events.md", () => {
  const doc = readFileSync(join(repoRoot, "docs/events.md"), "utf8");
  const documented = new Set([...doc.matchAll(/^\| `([A-Za-z]+)`/gm)].map((m) => m[1]!));

  it("finds the reasons of each kind in src/ (the scan is live)", () => {
    const literal = [...files.values()].flatMap(literalReasons);
    expect(literal).toEqual(
      expect.arrayContaining(["Ready", "UpgradeStarted", "StorageMigrationFailed", "CertificatesUpdated"]),
    );
    expect(stalledReasons().sort()).toEqual(
      expect.arrayContaining([
        "ApplyFailed",
        "ResourceAPIUnavailable",
        "ResourceNameConflict",
        "UpgradeRolledBack",
      ]),
    );
  });

  it("lists every reason the operator and the plugin record", () => {
    const reasons = new Set([
      ...[...files.values()].flatMap(literalReasons),
      ...stalledReasons(),
      ...PROBLEM_REASONS,
    ]);
    expect([...reasons].filter((r) => !documented.has(r)).sort()).toEqual([]);
  });

  it("knows every place that records a computed reason", () => {
    const computed = [...files]
      .filter(
        ([, text]) =>
          /\.record\([^;]*?,\s*(?:e|event)\.type,\s*(?:e|event)\.reason/.test(text) ||
          /type: "(?:Normal|Warning)",\s*reason: [a-z]/.test(text),
      )
      .map(([path]) => path)
      .sort();
    expect(computed).toEqual(Object.keys(FORWARDING).sort());
  });

  it("is linked from docs/README.md", () => {
    expect(readFileSync(join(repoRoot, "docs/README.md"), "utf8")).toContain("(events.md)");
  });
});
