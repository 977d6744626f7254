// The relative links and #anchors of Markdown files, and whether each resolves to a committed file and, in a
// Markdown file, to a heading as GitHub names it; pure, so `make lint` (check-links.ts) and the unit test share it.
import { posix } from "node:path";

/** A link as written: the 1-based line it starts on and its target (`docs/x.md#part`, `#part`). */
export interface MarkdownLink {
  line: number;
  target: string;
}

/** A link that does not resolve, with the reason in words. */
export interface LinkProblem {
  file: string;
  line: number;
  target: string;
  why: string;
}

/** What a repository path is: a committed file, a folder holding committed files, or nothing. */
export type PathKind = "file" | "dir" | undefined;

/**
 * The text blanked out where no link or heading can be: fenced code blocks, HTML comments and inline code
 * spans. Every character becomes a space and newlines stay, so offsets and line numbers still hold.
 */
function blankCode(markdown: string, keepCodeSpans: boolean): string {
  const blank = (text: string) => text.replace(/[^\n]/g, " ");
  const lines = markdown.split("\n");
  let fence: { char: string; length: number } | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (fence) {
      if (
        marker?.[1]?.[0] === fence.char &&
        marker[1].length >= fence.length &&
        /^ {0,3}[`~]+\s*$/.test(line)
      ) {
        fence = undefined;
      }
      lines[i] = blank(line);
    } else if (marker?.[1]) {
      fence = { char: marker[1][0] ?? "`", length: marker[1].length };
      lines[i] = blank(line);
    }
  }
  const text = lines.join("\n").replace(/<!--[\s\S]*?-->/g, blank);
  return keepCodeSpans ? text : blankCodeSpans(text, blank);
}

/** Inline code spans blanked: a run of backticks up to the next run of the same length (CommonMark). */
function blankCodeSpans(text: string, blank: (text: string) => string): string {
  let out = "";
  let from = 0;
  const runs = [...text.matchAll(/`+/g)];
  for (let i = 0; i < runs.length; i++) {
    const open = runs[i];
    if (!open || open.index < from) continue;
    const close = runs.slice(i + 1).find((run) => run[0].length === open[0].length);
    if (!close) continue;
    const end = close.index + close[0].length;
    out += text.slice(from, open.index) + blank(text.slice(open.index, end));
    from = end;
    i = runs.indexOf(close);
  }
  return out + text.slice(from);
}

/** The heading's text as GitHub renders it: code spans keep their text, links their label, emphasis goes. */
function headingText(source: string): string {
  const parts = source.split(/(`+[^`]*`+)/);
  return parts
    .map((part) => {
      if (part.startsWith("`")) return part.replace(/^`+|`+$/g, "").trim();
      return part
        .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
        .replace(/<[^>]+>/g, "")
        .replace(/\*+/g, "")
        .replace(/(^|[^\p{L}\p{N}])_+|_+(?=$|[^\p{L}\p{N}])/gu, "$1");
    })
    .join("");
}

/** GitHub's anchor for a heading's text (github-slugger): lower case, punctuation gone, each space a hyphen. */
export function githubSlug(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-");
}

/**
 * Every anchor a Markdown file has: one per heading, ATX (`## Title`) or setext (a line underlined with `=`
 * or `-`), a repeated slug numbered `-1`, `-2` as GitHub does, plus HTML `id` and `name` attributes.
 */
export function headingAnchors(markdown: string): Set<string> {
  const lines = blankCode(markdown, true).split("\n");
  const occurrences = new Map<string, number>();
  const anchors = new Set<string>();
  const add = (text: string) => {
    const original = githubSlug(headingText(text.trim()));
    let slug = original;
    while (occurrences.has(slug)) {
      const count = (occurrences.get(original) ?? 0) + 1;
      occurrences.set(original, count);
      slug = `${original}-${count}`;
    }
    occurrences.set(slug, 0);
    anchors.add(slug);
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    const atx = /^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/.exec(line);
    const next = lines[i + 1] ?? "";
    if (atx) add(atx[1] ?? "");
    else if (
      line.trim() !== "" &&
      /^ {0,3}(=+|-+)[ \t]*$/.test(next) &&
      !/^ {0,3}([-*+]|\d+[.)])\s|^ {0,3}>|^\s*\|/.test(line) &&
      (i === 0 || (lines[i - 1] ?? "").trim() === "")
    ) {
      add(line);
      i++;
    }
    for (const match of line.matchAll(/<[a-z][^>]*\s(?:id|name)="([^"]+)"/gi)) anchors.add(match[1] ?? "");
  }
  return anchors;
}

/**
 * Every link target of a Markdown file outside code: inline links and images (`[text](target "title")`,
 * the text may wrap lines), reference definitions (`[label]: target`) and HTML `href`/`src` attributes.
 */
export function markdownLinks(markdown: string): MarkdownLink[] {
  const text = blankCode(markdown, false);
  const lineAt = (offset: number) => text.slice(0, offset).split("\n").length;
  const links: MarkdownLink[] = [];
  const inline =
    /!?\[(?:[^[\]]|\[[^[\]]*\])*\]\(\s*(<[^>\n]*>|[^\s()<>]*(?:\([^\s()]*\)[^\s()<>]*)*)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g;
  for (const match of text.matchAll(inline)) {
    const target = (match[1] ?? "").replace(/^<|>$/g, "");
    const at = match.index + match[0].indexOf("](");
    links.push({ line: lineAt(at), target });
  }
  for (const match of text.matchAll(/^ {0,3}\[[^\]\n]+\]:[ \t]*(<[^>\n]*>|\S+)/gm)) {
    links.push({ line: lineAt(match.index), target: (match[1] ?? "").replace(/^<|>$/g, "") });
  }
  for (const match of text.matchAll(/<[a-z][^>]*\s(?:href|src)="([^"]*)"/gi)) {
    links.push({ line: lineAt(match.index), target: match[1] ?? "" });
  }
  return links.sort((a, b) => a.line - b.line);
}

/** A target with a scheme (`https:`, `mailto:`) leaves the repository: not checked here. */
const EXTERNAL = /^[a-z][a-z0-9+.-]*:|^\/\//i;
/** GitHub's line anchors of a source file (`#L10`, `#L10-L20`). */
const LINE_ANCHOR = /^L\d+(?:-L\d+)?$/;

/**
 * The problems of every relative link in `files` (repository paths of Markdown files): a target that is not a
 * committed file or folder, or an anchor that no heading of the Markdown file it names has.
 */
export function checkLinks(
  files: readonly string[],
  read: (path: string) => string,
  kind: (path: string) => PathKind,
): LinkProblem[] {
  const anchorCache = new Map<string, Set<string>>();
  const anchorsOf = (path: string) => {
    let anchors = anchorCache.get(path);
    if (!anchors) {
      anchors = headingAnchors(read(path));
      anchorCache.set(path, anchors);
    }
    return anchors;
  };
  const problems: LinkProblem[] = [];
  for (const file of files) {
    for (const { line, target } of markdownLinks(read(file))) {
      if (EXTERNAL.test(target)) continue;
      const problem = (why: string) => problems.push({ file, line, target, why });
      if (target === "") {
        problem("empty link target");
        continue;
      }
      const hash = target.indexOf("#");
      const pathPart = (hash < 0 ? target : target.slice(0, hash)).replace(/\?.*$/, "");
      const fragment = hash < 0 ? undefined : target.slice(hash + 1);
      let decoded: string;
      try {
        decoded = decodeURIComponent(pathPart);
      } catch {
        problem("the path is not valid percent-encoding");
        continue;
      }
      const resolved =
        decoded === ""
          ? file
          : decoded.startsWith("/")
            ? posix.normalize(decoded.slice(1))
            : posix.normalize(posix.join(posix.dirname(file), decoded));
      const path = resolved.replace(/\/+$/, "") || ".";
      if (path === ".." || path.startsWith("../")) {
        problem("points outside the repository");
        continue;
      }
      const found = path === "." ? "dir" : kind(path);
      if (!found) {
        problem(`${path} is not a committed file or folder`);
        continue;
      }
      if (fragment === undefined || fragment === "") continue;
      if (found === "file" && /\.md$/i.test(path)) {
        let anchor: string;
        try {
          anchor = decodeURIComponent(fragment);
        } catch {
          anchor = fragment;
        }
        if (!anchorsOf(path).has(anchor)) problem(`${path} has no heading with the anchor #${anchor}`);
      } else if (found === "file" && !LINE_ANCHOR.test(fragment)) {
        problem(`#${fragment} is not a line anchor (#L10 or #L10-L20) and ${path} is not Markdown`);
      }
    }
  }
  return problems;
}

/** The kind of every path, from the list of committed files: each file and every folder above one. */
export function pathKinds(committed: readonly string[]): (path: string) => PathKind {
  const files = new Set(committed);
  const dirs = new Set<string>();
  for (const file of committed) {
    for (let dir = posix.dirname(file); dir !== "." && !dirs.has(dir); dir = posix.dirname(dir))
      dirs.add(dir);
  }
  return (path) => (files.has(path) ? "file" : dirs.has(path) ? "dir" : undefined);
}
