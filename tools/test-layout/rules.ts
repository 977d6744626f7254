// The test tree's layout, checked by `make lint` (tools/test-layout/check.ts) and proved rule by rule in
// test/unit/tools/test-layout/rules.test.ts: no test source over MAX_TEST_LINES lines, so a newcomer reads a
// test file whole, and test/unit/ mirrors the source folders, so the tests of src/kube/ are in test/unit/kube/.
import { readdir, readFile, stat } from "node:fs/promises";
import { join, relative, sep } from "node:path";

export const MAX_TEST_LINES = 500;

/**
 * Test sources allowed over MAX_TEST_LINES: none. A file that must stay whole for a reason the check cannot
 * see goes here with that reason beside it (the check says when one no longer needs its place).
 */
export const OVERSIZED_ALLOWED: readonly string[] = [];

/** The folder of test/unit/ for helpers that tests of several source folders share; it names no source folder. */
export const UNIT_SUPPORT_FOLDER = "support";

/** Lines as `wc -l` counts them, but a last line without its newline counts too. */
function lines(n: number): string {
  return `${n} line${n === 1 ? "" : "s"}`;
}

export function lineCount(text: string): number {
  if (text === "") return 0;
  return text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
}

/** Every file under `dir`, as paths relative to `root` with `/` between folders, sorted. */
async function filesUnder(root: string, dir: string): Promise<string[]> {
  const entries = await readdir(join(root, dir), { withFileTypes: true, recursive: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => relative(root, join(e.parentPath, e.name)).split(sep).join("/"))
    .sort();
}

async function isDirectory(path: string): Promise<boolean> {
  return stat(path).then(
    (s) => s.isDirectory(),
    () => false,
  );
}

/** The folder a folder of test/unit/ (relative to it, `/`-separated) mirrors: tools/ and bench/ as themselves. */
export function mirroredFolder(unitFolder: string): string {
  const top = unitFolder.split("/")[0];
  return top === "tools" || top === "bench" ? unitFolder : `src/${unitFolder}`;
}

/**
 * What breaks the layout in the repository at `root`, one line per problem naming the path, sorted; empty
 * when it holds. `allowed` is the list of test sources that may be over MAX_TEST_LINES.
 */
export async function testLayoutProblems(
  root: string,
  allowed: readonly string[] = OVERSIZED_ALLOWED,
): Promise<string[]> {
  const problems: string[] = [];
  const sources = (await filesUnder(root, "test")).filter((f) => f.endsWith(".ts"));
  for (const file of sources) {
    const count = lineCount(await readFile(join(root, file), "utf8"));
    if (count > MAX_TEST_LINES && !allowed.includes(file))
      problems.push(
        `${file}: ${lines(count)}, over ${MAX_TEST_LINES}: split it by the behaviour each part pins, with the ` +
          "shared builders in a support module beside it",
      );
  }
  for (const file of allowed) {
    if (!sources.includes(file)) {
      problems.push(
        `${file}: on the list of test sources allowed over ${MAX_TEST_LINES} lines, but not there`,
      );
      continue;
    }
    const count = lineCount(await readFile(join(root, file), "utf8"));
    if (count <= MAX_TEST_LINES)
      problems.push(
        `${file}: ${lines(count)}, yet on the list of test sources allowed over ${MAX_TEST_LINES}: take it off`,
      );
  }
  const unitFolders = new Set<string>();
  for (const file of await filesUnder(root, "test/unit")) {
    const parts = file.split("/").slice(2, -1);
    for (let i = 1; i <= parts.length; i++) unitFolders.add(parts.slice(0, i).join("/"));
  }
  for (const folder of [...unitFolders].sort()) {
    if (folder === UNIT_SUPPORT_FOLDER) continue;
    const mirrored = mirroredFolder(folder);
    if (!(await isDirectory(join(root, mirrored))))
      problems.push(
        `test/unit/${folder}/: names no folder of the sources (${mirrored}/ does not exist): test/unit/ mirrors ` +
          `src/, with tools/ and bench/ under test/unit/tools/ and test/unit/bench/, and shared helpers in ` +
          `test/unit/${UNIT_SUPPORT_FOLDER}/`,
      );
  }
  return problems.sort();
}
