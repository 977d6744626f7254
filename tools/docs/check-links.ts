// `make lint`'s link check: every relative link and #anchor in the committed Markdown files resolves to a
// committed file and, in Markdown, to a heading (tools/docs/links.ts); prints each broken one and exits 1.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { checkLinks, pathKinds } from "./links.js";

const repo = resolve(import.meta.dirname, "..", "..");
const committed = execFileSync("git", ["ls-files", "-z"], { cwd: repo, encoding: "utf8" })
  .split("\0")
  .filter(Boolean);
const markdown = committed.filter((path) => /\.md$/i.test(path) && !path.startsWith("node_modules/"));
const problems = checkLinks(markdown, (path) => readFileSync(join(repo, path), "utf8"), pathKinds(committed));
for (const p of problems) console.error(`${p.file}:${p.line}: ${p.target}: ${p.why}`);
if (problems.length > 0) {
  console.error(`check-links: ${problems.length} broken links in ${markdown.length} Markdown files`);
  process.exit(1);
}
console.log(`check-links: every relative link and anchor of ${markdown.length} Markdown files resolves`);
