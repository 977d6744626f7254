// The test tree's layout rules (tools/test-layout, run by `make lint`): the repository keeps them, and each one
// fires on a small tree that breaks it: a test source over 500 lines, a stale entry of the allow-list, and a
// folder of test/unit/ that names no source folder.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  lineCount,
  MAX_TEST_LINES,
  mirroredFolder,
  OVERSIZED_ALLOWED,
  testLayoutProblems,
} from "../../../../tools/test-layout/rules.js";

const REPO = join(import.meta.dirname, "..", "..", "..", "..");

describe("the repository", () => {
  it("keeps its test layout: no problem", async () => {
    expect(await testLayoutProblems(REPO)).toEqual([]);
  });

  it("allows no test file over the limit", () => {
    expect(OVERSIZED_ALLOWED).toEqual([]);
  });
});

describe("lineCount", () => {
  it.each([
    ["", 0],
    ["a", 1],
    ["a\n", 1],
    ["a\nb", 2],
    ["a\nb\n", 2],
    ["\n\n", 2],
  ])("%j has %i lines", (text, lines) => {
    expect(lineCount(text)).toBe(lines);
  });
});

describe("mirroredFolder", () => {
  it.each([
    ["kube", "src/kube"],
    ["operator/upgrade", "src/operator/upgrade"],
    ["tools", "tools"],
    ["tools/cluster", "tools/cluster"],
    ["bench/upgrade", "bench/upgrade"],
    ["toolsmith", "src/toolsmith"],
  ])("test/unit/%s mirrors %s", (folder, mirrored) => {
    expect(mirroredFolder(folder)).toBe(mirrored);
  });
});

describe("the rules on a small tree", () => {
  let root: string;

  /** A file of `lines` lines at `path` under the tree. */
  async function file(path: string, lines = 1): Promise<void> {
    await mkdir(dirname(join(root, path)), { recursive: true });
    await writeFile(join(root, path), "// line\n".repeat(lines));
  }

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), "dpo-test-layout-"));
    for (const folder of ["src/kube", "src/operator/upgrade", "tools/cluster", "bench/upgrade"])
      await mkdir(join(root, folder), { recursive: true });
    await file("test/unit/kube/informer.test.ts");
    await file("test/unit/operator/upgrade/planner.test.ts");
    await file("test/unit/tools/cluster/wait.test.ts");
    await file("test/unit/bench/upgrade/knobs.test.ts");
    await file("test/unit/support/api-arbitraries.ts");
    await file("test/unit/layers.test.ts");
    await file("test/e2e/dra.test.ts");
  });

  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("finds nothing wrong with a tree that keeps them", async () => {
    await file("test/e2e/dra.test.ts", MAX_TEST_LINES);
    expect(await testLayoutProblems(root, [])).toEqual([]);
  });

  it("names a test source of 501 lines, in any tier", async () => {
    await file("test/e2e/dra.test.ts", MAX_TEST_LINES + 1);
    await file("test/unit/kube/informer-support.ts", MAX_TEST_LINES + 1);
    expect(await testLayoutProblems(root, [])).toEqual([
      expect.stringMatching(/^test\/e2e\/dra\.test\.ts: 501 lines, over 500: split it/),
      expect.stringMatching(/^test\/unit\/kube\/informer-support\.ts: 501 lines, over 500: split it/),
    ]);
  });

  it("leaves long files that are not TypeScript alone (captured fixtures)", async () => {
    await file("test/fixtures/gitops-health/phases.yaml", MAX_TEST_LINES + 1);
    expect(await testLayoutProblems(root, [])).toEqual([]);
  });

  it("lets an allow-listed file be long, and says when one on the list is short or gone", async () => {
    await file("test/unit/operator/upgrade/planner.test.ts", MAX_TEST_LINES + 1);
    expect(await testLayoutProblems(root, ["test/unit/operator/upgrade/planner.test.ts"])).toEqual([]);
    expect(
      await testLayoutProblems(root, ["test/unit/kube/informer.test.ts", "test/unit/gone.test.ts"]),
    ).toEqual([
      "test/unit/gone.test.ts: on the list of test sources allowed over 500 lines, but not there",
      "test/unit/kube/informer.test.ts: 1 line, yet on the list of test sources allowed over 500: take it off",
      expect.stringMatching(/^test\/unit\/operator\/upgrade\/planner\.test\.ts: 501 lines, over 500/),
    ]);
  });

  it.each([
    ["test/unit/upgrade/planner.test.ts", "test/unit/upgrade/", "src/upgrade/"],
    ["test/unit/operator/render/daemonset.test.ts", "test/unit/operator/render/", "src/operator/render/"],
    ["test/unit/tools/nowhere/x.test.ts", "test/unit/tools/nowhere/", "tools/nowhere/"],
    ["test/unit/bench/dra/x.test.ts", "test/unit/bench/dra/", "bench/dra/"],
    ["test/unit/support/deep/x.ts", "test/unit/support/deep/", "src/support/deep/"],
  ])("names %s's folder, which mirrors no source folder", async (path, folder, mirrored) => {
    await file(path);
    expect(await testLayoutProblems(root, [])).toEqual([
      `${folder}: names no folder of the sources (${mirrored} does not exist): test/unit/ mirrors src/, with ` +
        "tools/ and bench/ under test/unit/tools/ and test/unit/bench/, and shared helpers in test/unit/support/",
    ]);
  });
});
