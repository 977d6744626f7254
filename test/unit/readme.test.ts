// The README is the project's front door: short enough to read (under 12 KB), the two commands a contributor
// runs on a fresh machine kept as they are; docs/README.md reaches every document; and every `helm install`
// in the docs labels its namespace for the Pod Security level the plugin pods need before the chart goes in.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const repoRoot = resolve(import.meta.dirname, "..", "..");
const readme = readFileSync(join(repoRoot, "README.md"), "utf8");

/** The fenced code blocks of a Markdown text, each with the 1-based line its fence opens on. */
function codeBlocks(markdown: string): { line: number; text: string }[] {
  const blocks: { line: number; text: string }[] = [];
  const lines = markdown.split("\n");
  let open: { line: number; body: string[] } | undefined;
  lines.forEach((line, i) => {
    if (/^\s*```/.test(line)) {
      if (open) blocks.push({ line: open.line, text: open.body.join("\n") });
      open = open ? undefined : { line: i + 1, body: [] };
    } else open?.body.push(line);
  });
  return blocks;
}

/**
 * The `helm install` commands of a text whose namespace is not labelled `privileged` for Pod Security
 * earlier in the same code block, as `file:line namespace`.
 */
function unlabelledHelmInstalls(file: string, markdown: string): string[] {
  const found: string[] = [];
  for (const block of codeBlocks(markdown)) {
    const text = block.text.replace(/\\\n\s*/g, " ");
    for (const match of text.matchAll(/helm install [^\n]*?(?:--namespace|-n)[ =](\S+)/g)) {
      const namespace = match[1] ?? "";
      const before = text.slice(0, match.index);
      const label = new RegExp(
        String.raw`kubectl label namespace ${namespace}\b[^\n]*pod-security\.kubernetes\.io/enforce=privileged`,
      );
      if (!label.test(before)) found.push(`${file}:${block.line} ${namespace}`);
    }
  }
  return found;
}

describe("README.md", () => {
  it("is under 12 KB", () => {
    expect(Buffer.byteLength(readme)).toBeLessThan(12 * 1024);
  });

  it("keeps the two commands that set up a fresh machine", () => {
    const blocks = codeBlocks(readme).map((b) => b.text);
    expect(blocks).toContainEqual(
      [
        "make demo   # a local control plane, three simulated device nodes, the operator and two sample configs",
        "make test   # unit, protocol, integration, end-to-end and real-node tests",
      ].join("\n"),
    );
  });

  it("draws the data flow and a rollout's timeline as Mermaid diagrams", () => {
    const mermaid = readme.match(/```mermaid\n(\w+)/g) ?? [];
    expect(mermaid.map((m) => m.replace("```mermaid\n", ""))).toEqual(["flowchart", "sequenceDiagram"]);
  });
});

describe("docs/README.md", () => {
  it("links every document under docs/", () => {
    const index = readFileSync(join(repoRoot, "docs/README.md"), "utf8");
    const docs = execFileSync("git", ["ls-files", "docs/*.md", "docs/adr/*.md"], {
      cwd: repoRoot,
      encoding: "utf8",
    })
      .split("\n")
      .filter((path) => path !== "" && path !== "docs/README.md")
      .map((path) => path.slice("docs/".length))
      .filter((doc) => !doc.startsWith("runbooks/")); // linked as a folder: one page per alert
    expect(docs.length).toBeGreaterThan(20);
    expect(docs.filter((doc) => !index.includes(`](${doc}`))).toEqual([]);
  });
});

describe("helm install in the docs", () => {
  it("labels the namespace for the privileged Pod Security level first, in the same block", () => {
    const markdown = execFileSync("git", ["ls-files", "*.md"], { cwd: repoRoot, encoding: "utf8" })
      .split("\n")
      .filter(Boolean);
    const installs = markdown.flatMap((file) =>
      unlabelledHelmInstalls(file, readFileSync(join(repoRoot, file), "utf8")),
    );
    expect(installs).toEqual([]);
  });

  it("finds an install whose namespace is not labelled, or labelled after it", () => {
    const doc = [
      "```sh",
      "helm install dpo dpo.tgz --namespace gpu --create-namespace",
      "kubectl label namespace gpu pod-security.kubernetes.io/enforce=privileged",
      "```",
      "```sh",
      "kubectl label namespace ops pod-security.kubernetes.io/enforce=privileged \\",
      "  pod-security.kubernetes.io/warn=privileged",
      "helm install dpo dpo.tgz -n ops",
      "```",
    ].join("\n");
    expect(unlabelledHelmInstalls("x.md", doc)).toEqual(["x.md:1 gpu"]);
  });
});
