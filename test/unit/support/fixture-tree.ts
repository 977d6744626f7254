// Lays out a recorded /dev and /sys tree (test/fixtures/sysfs/*.tree) in a temporary directory, so a
// backend can be pointed at it as at a host's. One entry a line, paths absolute inside the tree:
//   d PATH            a directory
//   f PATH TEXT...    a file holding TEXT and a newline (sysfs attributes read that way)
//   l PATH TARGET     a symbolic link, TARGET as sysfs writes it (relative)
//   c PATH            a character device: a link to /dev/null, which stat() follows as a runtime does
// Lines starting with # are comments (the SOURCE note heads each file).
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

export const FIXTURE_TREES = join(import.meta.dirname, "..", "..", "fixtures", "sysfs");

export interface FixtureTree {
  /** The directory standing for the host's `/`. */
  readonly root: string;
  readonly remove: () => Promise<void>;
}

/** Materializes `test/fixtures/sysfs/<name>.tree`; throws on a line it does not understand. */
export async function layOutFixtureTree(name: string): Promise<FixtureTree> {
  const text = await readFile(join(FIXTURE_TREES, `${name}.tree`), "utf8");
  const root = await mkdtemp(join(tmpdir(), `dpo-tree-${name}-`));
  const at = (path: string) => join(root, path);
  for (const [index, raw] of text.split("\n").entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const [kind, path, ...rest] = line.split(/\s+/);
    if (path === undefined || !path.startsWith("/"))
      throw new Error(`${name}.tree:${index + 1}: no absolute path`);
    if (kind === "d") {
      await mkdir(at(path), { recursive: true });
      continue;
    }
    await mkdir(dirname(at(path)), { recursive: true });
    if (kind === "f") await writeFile(at(path), `${rest.join(" ")}\n`);
    else if (kind === "l" && rest.length === 1) await symlink(rest[0]!, at(path));
    else if (kind === "c") await symlink("/dev/null", at(path));
    else throw new Error(`${name}.tree:${index + 1}: cannot read ${JSON.stringify(raw)}`);
  }
  return { root, remove: () => rm(root, { recursive: true, force: true }) };
}
