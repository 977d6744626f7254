// The plugin's config read in a child process: what the child prints is checked before it is trusted, and
// a child that cannot run leaves the plugin reading the config itself, saying why.
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  parsePluginConfigRead,
  readPluginConfigApart,
  setCliEntry,
} from "../../../src/cli/plugin-config-apart.js";

const MANIFEST = [
  "apiVersion: dpo.dev/v1beta1",
  "kind: DevicePluginConfig",
  "metadata: { name: example }",
  "spec: { resourceName: example.com/foo, backend: { type: Mock, mock: { devices: 2 } } }",
].join("\n");

describe("parsePluginConfigRead", () => {
  it.each([
    { output: '{"ok":true,"value":{"spec":{}},"ignored":[]}', ok: true },
    { output: '{"ok":false,"errors":[{"path":"spec","message":"x"}]}', ok: false },
  ])("takes $output", ({ output, ok }) => {
    expect(parsePluginConfigRead(output).ok).toBe(ok);
  });

  it.each([
    { output: "", error: /JSON/ },
    { output: "null", error: /no object/ },
    { output: "[]", error: /neither a config nor its errors/ },
    { output: '{"ok":true,"value":{}}', error: /neither a config nor its errors/ },
    { output: '{"ok":true,"value":"x","ignored":[]}', error: /neither a config nor its errors/ },
    { output: '{"ok":false,"errors":"x"}', error: /neither a config nor its errors/ },
    { output: '{"ok":"yes"}', error: /neither a config nor its errors/ },
  ])("refuses $output", ({ output, error }) => {
    expect(() => parsePluginConfigRead(output)).toThrow(error);
  });
});

describe("readPluginConfigApart", () => {
  afterEach(() => setCliEntry(undefined));

  it("reads in process, silently, when this is not the dpo CLI", async () => {
    const warnings: string[] = [];
    const read = await readPluginConfigApart(MANIFEST, (m) => warnings.push(m));
    expect(read.ok && read.value.spec.resourceName).toBe("example.com/foo");
    expect(warnings).toEqual([]);
  });

  it("reads in process and says why when the child fails", async () => {
    setCliEntry(join(import.meta.dirname, "no-such-entry.js"));
    const warnings: string[] = [];
    const read = await readPluginConfigApart(MANIFEST, (m) => warnings.push(m));
    expect(read.ok && read.value.spec.resourceName).toBe("example.com/foo");
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/cannot check the config in a child process \(exited with code 1/);
  });
});
