// `dpo validate`'s reports for CI: the JUnit XML (one testcase per document, a failure per invalid one),
// the labels naming file, document, kind and name, and an unreadable file said in words.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  parseValidateArgs,
  formatValidateJunit,
  validateFiles,
  verdictLabel,
  xmlEscape,
} from "../../../src/cli/validate.js";
import { describeReadError } from "../../../src/cli/sources.js";

const fixtures = join(import.meta.dirname, "..", "..", "fixtures");
const VALID = readFileSync(join(fixtures, "valid", "mock-basic.yaml"), "utf8");
const INVALID = readFileSync(join(fixtures, "invalid", "sharing-timeslicing-without-replicas.yaml"), "utf8");
const NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: gpu\n";

const enoent = Object.assign(new Error("ENOENT: no such file or directory, open 'a.yaml'"), {
  code: "ENOENT",
});

describe("describeReadError", () => {
  it.each<[string, unknown, string]>([
    ["a.yaml", enoent, "cannot read a.yaml: no such file"],
    [
      "-",
      Object.assign(new Error("EACCES: permission denied, open"), { code: "EACCES" }),
      "cannot read <stdin>: permission denied",
    ],
    [
      "dir",
      Object.assign(new Error("EISDIR: illegal operation on a directory, read"), { code: "EISDIR" }),
      "cannot read dir: is a directory",
    ],
    [
      "b.yaml",
      Object.assign(new Error("EXDEV: cross-device link not permitted, open 'b.yaml'"), { code: "EXDEV" }),
      "cannot read b.yaml: cross-device link not permitted",
    ],
    ["c.yaml", "a string thrown", "cannot read c.yaml: a string thrown"],
    ["d.yaml", null, "cannot read d.yaml: null"],
  ])("%s: %s", (file, err, want) => {
    expect(describeReadError(file, err)).toBe(want);
  });

  it("says write for the report it could not write", () => {
    expect(describeReadError("out/report.xml", enoent, "write")).toBe(
      "cannot write out/report.xml: no such file",
    );
  });
});

describe("verdictLabel", () => {
  it.each<[Parameters<typeof verdictLabel>[0], string]>([
    [{ file: "a.yaml" }, "a.yaml"],
    [
      { file: "<stdin>", document: 3, kind: "DevicePluginConfig", name: "foo" },
      "<stdin>#3 DevicePluginConfig/foo",
    ],
    [{ file: "a.yaml", kind: "DevicePluginConfig" }, "a.yaml DevicePluginConfig/<no name>"],
    [{ file: "a.yaml", document: 0, name: "foo" }, "a.yaml#0 <no kind>/foo"],
  ])("%j", (verdict, want) => {
    expect(verdictLabel(verdict)).toBe(want);
  });
});

describe("parseValidateArgs", () => {
  it.each<[string[], ReturnType<typeof parseValidateArgs>]>([
    [["a.yaml"], { output: "text", files: ["a.yaml"] }],
    [["-o", "junit", "-"], { output: "junit", files: ["-"] }],
    [
      ["--junit", "report.xml", "-o", "json", "a.yaml"],
      { output: "json", junit: "report.xml", files: ["a.yaml"] },
    ],
  ])("%j", (argv, want) => {
    expect(parseValidateArgs(argv)).toEqual(want);
  });
});

describe("xmlEscape", () => {
  it("escapes markup and replaces characters XML 1.0 cannot hold", () => {
    expect(xmlEscape(`a<b>&"c"'d'\u0001\ud800e\tf`)).toBe(
      "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;\ufffd\ufffde\tf",
    );
  });
});

describe("formatValidateJunit", () => {
  it("has one testsuite per file and one testcase per document, failures for the invalid", async () => {
    const sources: Record<string, string> = {
      "-": [NAMESPACE, VALID, INVALID].join("---\n"),
      "one.yaml": VALID,
    };
    const read = (file: string) =>
      file in sources ? Promise.resolve(sources[file]!) : Promise.reject(enoent);
    const out = await validateFiles(["-", "one.yaml", "gone.yaml"], read);
    expect(formatValidateJunit(out)).toBe(
      [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<testsuites name="dpo validate" tests="5" failures="1" errors="1" skipped="1">',
        '  <testsuite name="&lt;stdin&gt;" tests="3" failures="1" errors="0" skipped="1">',
        '    <testcase classname="&lt;stdin&gt;" name="#0 Namespace/gpu">',
        '      <skipped message="v1 Namespace"/>',
        "    </testcase>",
        '    <testcase classname="&lt;stdin&gt;" name="#1 DevicePluginConfig/example-foo"/>',
        '    <testcase classname="&lt;stdin&gt;" name="#2 DevicePluginConfig/invalid-sharing-timeslicing-without-replicas">',
        '      <failure type="invalid" message="invalid (dpo.dev/v1beta1): 1 problem">&lt;stdin&gt;#2 DevicePluginConfig/invalid-sharing-timeslicing-without-replicas: spec.sharing.replicas: must be &gt;= 2 when strategy is TimeSlicing</failure>',
        "    </testcase>",
        "  </testsuite>",
        '  <testsuite name="one.yaml" tests="1" failures="0" errors="0" skipped="0">',
        '    <testcase classname="one.yaml" name="DevicePluginConfig/example-foo"/>',
        "  </testsuite>",
        '  <testsuite name="gone.yaml" tests="1" failures="0" errors="1" skipped="0">',
        '    <testcase classname="gone.yaml" name="gone.yaml">',
        '      <error type="unreadable" message="cannot read gone.yaml: no such file"/>',
        "    </testcase>",
        "  </testsuite>",
        "</testsuites>",
        "",
      ].join("\n"),
    );
  });

  it("an empty file is a failure", async () => {
    const out = await validateFiles(["empty.yaml"], () => Promise.resolve("# nothing\n"));
    expect(formatValidateJunit(out)).toContain(
      '<failure type="empty" message="no documents">empty.yaml: &lt;file&gt;: no documents</failure>',
    );
  });
});
