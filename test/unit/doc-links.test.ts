// Every relative link and #anchor in the committed Markdown files resolves (tools/docs/links.ts, which `make
// lint` runs): GitHub's heading slugs, and a broken link or anchor in a file reported with its line.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { checkLinks, githubSlug, headingAnchors, markdownLinks, pathKinds } from "../../tools/docs/links.js";

const repoRoot = resolve(import.meta.dirname, "..", "..");

/** A checkout in memory: path → Markdown text; every other committed path is listed in `others`. */
function check(files: Record<string, string>, others: string[] = []) {
  const kinds = pathKinds([...Object.keys(files), ...others]);
  const read = (path: string) => {
    const text = files[path];
    if (text === undefined) throw new Error(`read of ${path}`);
    return text;
  };
  return checkLinks(Object.keys(files), read, kinds);
}

describe("githubSlug", () => {
  it.each([
    ["dpo — the device-plugin operator", "dpo--the-device-plugin-operator"],
    ["A first config", "a-first-config"],
    ["Extended resources through DRA (KEP-5004)", "extended-resources-through-dra-kep-5004"],
    ["`make chaos-api`", "make-chaos-api"],
    ["Feature gates: default on, or off?", "feature-gates-default-on-or-off"],
    ["dpo_plugin_devices & friends", "dpo_plugin_devices--friends"],
    ["Über 1.35.4", "über-1354"],
  ])("%s → %s", (heading, slug) => {
    expect(githubSlug(heading)).toBe(slug);
  });
});

describe("headingAnchors", () => {
  it("numbers repeated headings as GitHub does, and reads setext headings and HTML ids", () => {
    const doc = [
      "Title",
      "=====",
      "",
      "## Usage",
      "## Usage",
      "### `make fuzz-config`",
      "## *Usage*",
      '<a id="custom-spot"></a>',
      "```sh",
      "# not a heading",
      "```",
    ].join("\n");
    expect([...headingAnchors(doc)]).toEqual([
      "title",
      "usage",
      "usage-1",
      "make-fuzz-config",
      "usage-2",
      "custom-spot",
    ]);
  });
});

describe("markdownLinks", () => {
  it("finds inline links, wrapped ones, reference definitions and hrefs, and none in code", () => {
    const doc = [
      "See [the guide](docs/guide.md#setup) and [a",
      'wrapped label](other.md "title").',
      "`[in code](nowhere.md)`",
      "```",
      "[in a fence](nowhere.md)",
      "```",
      "[ref]: ref.md",
      '<a href="html.md">x</a> ![image](img/a.png)',
    ].join("\n");
    expect(markdownLinks(doc)).toEqual([
      { line: 1, target: "docs/guide.md#setup" },
      { line: 2, target: "other.md" },
      { line: 7, target: "ref.md" },
      { line: 8, target: "img/a.png" },
      { line: 8, target: "html.md" },
    ]);
  });
});

describe("checkLinks", () => {
  const guide = "# Guide\n\n## Setting up\n";

  it("passes links that resolve to a file, a folder, a heading or a source line", () => {
    const files = {
      "README.md":
        "[g](docs/guide.md#setting-up) [d](docs/) [s](src/a.ts#L3-L9) [h](#readme) [x](https://x.io/#y)\n",
      "docs/guide.md": `${guide}[up](../README.md#readme) [here](#guide)\n`,
    };
    expect(check({ ...files, "README.md": `# Readme\n${files["README.md"]}` }, ["src/a.ts"])).toEqual([]);
  });

  it("fails on a link to a file that is not committed", () => {
    expect(check({ "README.md": "# R\n\nsee [the guide](docs/gone.md)\n", "docs/guide.md": guide })).toEqual([
      {
        file: "README.md",
        line: 3,
        target: "docs/gone.md",
        why: "docs/gone.md is not a committed file or folder",
      },
    ]);
  });

  it("fails on an anchor that no heading of the target has, in another file or the same one", () => {
    expect(
      check({
        "README.md": "# R\n[a](docs/guide.md#setup)\n[b](#r)\n[c](#nothing-here)\n",
        "docs/guide.md": guide,
      }),
    ).toEqual([
      {
        file: "README.md",
        line: 2,
        target: "docs/guide.md#setup",
        why: "docs/guide.md has no heading with the anchor #setup",
      },
      {
        file: "README.md",
        line: 4,
        target: "#nothing-here",
        why: "README.md has no heading with the anchor #nothing-here",
      },
    ]);
  });

  it("fails on a link out of the repository and on an anchor into a source file that is not a line", () => {
    expect(check({ "docs/a.md": "[x](../../etc/passwd) [y](../src/a.ts#main)\n" }, ["src/a.ts"])).toEqual([
      { file: "docs/a.md", line: 1, target: "../../etc/passwd", why: "points outside the repository" },
      {
        file: "docs/a.md",
        line: 1,
        target: "../src/a.ts#main",
        why: "#main is not a line anchor (#L10 or #L10-L20) and src/a.ts is not Markdown",
      },
    ]);
  });

  it("finds no broken link in this checkout's committed Markdown", () => {
    const committed = execFileSync("git", ["ls-files", "-z"], { cwd: repoRoot, encoding: "utf8" })
      .split("\0")
      .filter(Boolean);
    const markdown = committed.filter((path) => path.endsWith(".md"));
    expect(markdown).toContain("README.md");
    const read = (path: string) => readFileSync(join(repoRoot, path), "utf8");
    expect(checkLinks(markdown, read, pathKinds(committed))).toEqual([]);
  });
});
