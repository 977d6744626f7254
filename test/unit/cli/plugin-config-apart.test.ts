// The plugin's config checked before the process replaces itself: the handover is taken only when it was
// made of the same text, anything else in its variable is refused by name, a handover too large for one
// environment variable leaves the plugin reading in process, and the dpo CLI really replaces itself (the
// same pid, the handover in the environment it was started with).
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  CHECKED_CONFIG_ENV,
  MAX_HANDOVER_BYTES,
  handoverEnv,
  parsePluginConfigRead,
  readPluginConfigApart,
  setCliEntry,
  takeHandover,
} from "../../../src/cli/plugin-config-apart.js";
import { isReservedEnvName } from "../../../src/api/v1beta1/plugin-pod.js";
import type { PluginConfigRead } from "../../../src/contract/plugin-config-read.js";
import { waitFor } from "../../../tools/cluster/wait.js";

const repo = join(import.meta.dirname, "..", "..", "..");

const MANIFEST = [
  "apiVersion: dpo.dev/v1beta1",
  "kind: DevicePluginConfig",
  "metadata: { name: example }",
  "spec: { resourceName: example.com/foo, backend: { type: Mock, mock: { devices: 2 } } }",
].join("\n");

const READ = {
  ok: true,
  value: { spec: { resourceName: "handed.example/x" } },
  ignored: [],
} as unknown as PluginConfigRead;

describe("parsePluginConfigRead", () => {
  it.each([
    { read: { ok: true, value: { spec: {} }, ignored: [] }, ok: true },
    { read: { ok: false, errors: [{ path: "spec", message: "x" }] }, ok: false },
  ])("takes $read", ({ read, ok }) => {
    expect(parsePluginConfigRead(read).ok).toBe(ok);
  });

  it.each([
    { read: null, error: /no object/ },
    { read: "x", error: /no object/ },
    { read: [], error: /neither a config nor its errors/ },
    { read: { ok: true, value: {} }, error: /neither a config nor its errors/ },
    { read: { ok: true, value: "x", ignored: [] }, error: /neither a config nor its errors/ },
    { read: { ok: false, errors: "x" }, error: /neither a config nor its errors/ },
    { read: { ok: "yes" }, error: /neither a config nor its errors/ },
  ])("refuses $read", ({ read, error }) => {
    expect(() => parsePluginConfigRead(read)).toThrow(error);
  });
});

describe("takeHandover", () => {
  it("reads a variable no config can set: spec.plugin.env refuses it", () => {
    expect(isReservedEnvName(CHECKED_CONFIG_ENV)).toBe(true);
  });

  it.each([
    { name: "no handover", value: undefined, want: undefined },
    { name: "one made of this text", value: JSON.stringify({ text: "t", read: READ }), want: READ },
    {
      name: "one made of another text (the file changed)",
      value: JSON.stringify({ text: "u", read: READ }),
      want: undefined,
    },
  ])("$name", ({ value, want }) => {
    const env: NodeJS.ProcessEnv = {
      KEEP: "1",
      ...(value === undefined ? {} : { [CHECKED_CONFIG_ENV]: value }),
    };
    expect(takeHandover(env, "t")).toEqual(want);
    expect(env).toEqual({ KEEP: "1" });
  });

  it.each([
    { value: "{", error: new RegExp(`${CHECKED_CONFIG_ENV} is not JSON`) },
    { value: "null", error: new RegExp(`${CHECKED_CONFIG_ENV} names no config text`) },
    { value: JSON.stringify({ read: READ }), error: /names no config text/ },
    { value: JSON.stringify({ text: "t", read: { ok: "yes" } }), error: /neither a config nor its errors/ },
  ])("refuses $value, and removes it all the same", ({ value, error }) => {
    const env: NodeJS.ProcessEnv = { [CHECKED_CONFIG_ENV]: value };
    expect(() => takeHandover(env, "t")).toThrow(error);
    expect(env).toEqual({});
  });
});

describe("handoverEnv", () => {
  it("keeps the environment and adds the handover, which takeHandover reads back", () => {
    const env = handoverEnv({ A: "1", B: undefined }, "t", READ);
    expect(typeof env).toBe("object");
    const next = env as Record<string, string>;
    expect(Object.keys(next).sort()).toEqual(["A", CHECKED_CONFIG_ENV]);
    expect(takeHandover(next, "t")).toEqual(READ);
  });

  it("says why when the handover would not fit in one environment variable", () => {
    const text = "x".repeat(MAX_HANDOVER_BYTES);
    expect(handoverEnv({}, text, READ)).toMatch(/more than the 98304 one environment variable may/);
  });
});

describe("readPluginConfigApart", () => {
  afterEach(() => {
    setCliEntry(undefined);
    delete process.env[CHECKED_CONFIG_ENV];
  });

  it("reads in process, silently, when this is not the dpo CLI", async () => {
    const warnings: string[] = [];
    const read = await readPluginConfigApart(MANIFEST, (m) => warnings.push(m));
    expect(read.ok && read.value.spec.resourceName).toBe("example.com/foo");
    expect(warnings).toEqual([]);
  });

  it("takes the handover made of this text instead of reading it", async () => {
    process.env[CHECKED_CONFIG_ENV] = JSON.stringify({ text: MANIFEST, read: READ });
    expect(await readPluginConfigApart(MANIFEST, () => undefined)).toEqual(READ);
    expect(process.env[CHECKED_CONFIG_ENV]).toBeUndefined();
  });

  it("reads in process and says why when the config is too large to hand over", async () => {
    setCliEntry(join(repo, "src", "cli", "main.ts"));
    const warnings: string[] = [];
    const large = `${MANIFEST}\n${"#".repeat(MAX_HANDOVER_BYTES)}\n`;
    const read = await readPluginConfigApart(large, (m) => warnings.push(m));
    expect(read.ok && read.value.spec.resourceName).toBe("example.com/foo");
    expect(warnings).toEqual([
      expect.stringMatching(/more than the 98304 one environment variable may; the plugin keeps/),
    ]);
  });
});

describe("dpo plugin", () => {
  const work = mkdtempSync(join(tmpdir(), "dpo-apart-"));
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  const start = (config: string) => {
    const path = join(work, `${Math.random().toString(36).slice(2)}.yaml`);
    writeFileSync(path, config);
    const env: NodeJS.ProcessEnv = { ...process.env, DPO_LOG_LEVEL: "info" };
    delete env[CHECKED_CONFIG_ENV];
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        join(repo, "src", "cli", "main.ts"),
        "plugin",
        "--config",
        path,
        "--device-plugin-dir",
        work,
        "--metrics-addr",
        "0",
        "--health-addr",
        "0",
      ],
      { cwd: repo, stdio: ["ignore", "pipe", "pipe"], env },
    );
    const out = { stdout: "", stderr: "" };
    child.stdout.on("data", (chunk: Buffer) => (out.stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (out.stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
    return { child, out, exited };
  };

  it("replaces itself once the config is valid: the same pid, started again with the checked config", async () => {
    const { child, out, exited } = start(MANIFEST);
    try {
      await waitFor(
        "the plugin to wait for the kubelet",
        (observe) => {
          observe(out);
          return out.stdout.includes("waiting for the kubelet");
        },
        { timeoutMs: 30_000 },
      );
      // The environment the process image was started with: execve's, which holds the handover.
      const environ = readFileSync(`/proc/${child.pid}/environ`, "utf8").split("\0");
      const handover = environ.find((e) => e.startsWith(`${CHECKED_CONFIG_ENV}=`));
      expect(handover, "the handover in the environment of the process serving").toBeDefined();
      const { read } = JSON.parse(handover!.slice(CHECKED_CONFIG_ENV.length + 1)) as {
        read: PluginConfigRead;
      };
      expect(read.ok && read.value.spec.resourceName).toBe("example.com/foo");
      expect(out.stderr).toBe("");
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
  });

  it("refuses an invalid config before replacing itself, naming the field", async () => {
    const { out, exited } = start(MANIFEST.replace("devices: 2", "devices: -2"));
    expect(await exited).toBe(1);
    expect(out.stderr).toMatch(/spec\.backend\.mock\.devices/);
    expect(out.stderr).not.toContain(CHECKED_CONFIG_ENV);
  });
});
