// CDI spec documents: kind and device-name rules, the file name, the lowest sufficient cdiVersion, and the
// writer's atomic write and careful removal.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import {
  buildCdiSpec,
  cdiDeviceNameProblem,
  cdiEnvName,
  cdiSpecFileName,
  CdiSpecWriter,
  parseCdiKind,
  qualifiedCdiName,
  requiredCdiVersion,
  type CdiDevice,
} from "../../../src/cdi/index.js";

const env = (name: string): CdiDevice => ({ name, containerEdits: { env: [`X_${name.length}=1`] } });

describe("parseCdiKind", () => {
  it.each([
    { kind: "vendor.example/foo", ok: true },
    { kind: "hardware-vendor.example/foo-shared", ok: true },
    { kind: "foo.bar.baz/foo-bar123.B_az", ok: true },
    { kind: "foo", ok: false },
    { kind: "vendor.com/foo/", ok: false },
    { kind: "vendor.com/foo/bar", ok: false },
    // The CDI parser wants a letter first in both parts, stricter than a DNS name.
    { kind: "3com.example/foo", ok: false },
    { kind: "vendor.example/9foo", ok: false },
    { kind: "vendor.example/foo-", ok: false },
    { kind: "/foo", ok: false },
  ])("$kind: $ok", ({ kind, ok }) => {
    expect(parseCdiKind(kind).ok).toBe(ok);
  });
});

describe("cdiDeviceNameProblem", () => {
  it.each([
    { name: "foo-0", ok: true },
    { name: "0000:3b:00.0", ok: true },
    { name: "bus_usb_001_002", ok: true },
    { name: "a", ok: true },
    { name: "", ok: false },
    { name: "_hidden", ok: false },
    { name: "foo-", ok: false },
    { name: "foo::0", ok: true },
    { name: "foo 0", ok: false },
    { name: "foo/0", ok: false },
  ])("$name: $ok", ({ name, ok }) => {
    expect(cdiDeviceNameProblem(name) === undefined).toBe(ok);
  });
});

describe("names", () => {
  it("file name is <vendor>-<class>.json, qualified names <kind>=<device>, env names upper case", () => {
    expect(cdiSpecFileName("vendor.example/foo")).toBe("vendor.example-foo.json");
    expect(() => cdiSpecFileName("foo")).toThrow(/vendor/);
    expect(qualifiedCdiName("vendor.example/foo", "foo-0")).toBe("vendor.example/foo=foo-0");
    expect(cdiEnvName("PCI_DEVICE_", "0000:3b:00.0")).toBe("PCI_DEVICE_0000_3B_00_0");
  });
});

describe("requiredCdiVersion", () => {
  it.each([
    {
      name: "env only, names starting with a letter",
      kind: "v.example/foo",
      devices: [env("foo-0")],
      want: "0.3.0",
    },
    {
      name: "device node without a host path",
      kind: "v.example/foo",
      devices: [{ name: "tty0", containerEdits: { deviceNodes: [{ path: "/dev/tty0" }] } }],
      want: "0.3.0",
    },
    {
      name: "device node with a host path",
      kind: "v.example/foo",
      devices: [
        {
          name: "tty0",
          containerEdits: { deviceNodes: [{ path: "/dev/tty0", hostPath: "/host/dev/tty0" }] },
        },
      ],
      want: "0.5.0",
    },
    {
      name: "a name starting with a digit",
      kind: "v.example/foo",
      devices: [env("0000:3b:00.0")],
      want: "0.5.0",
    },
    { name: "a dot in the class", kind: "v.example/foo.bar", devices: [env("foo-0")], want: "0.6.0" },
  ])("$name: $want", ({ kind, devices, want }) => {
    expect(requiredCdiVersion(kind, devices)).toBe(want);
  });
});

describe("buildCdiSpec", () => {
  it("sorts devices naturally, leaves out (and reports) what a runtime would refuse", () => {
    const { spec, skipped } = buildCdiSpec("v.example/foo", [
      env("foo-10"),
      env("foo-2"),
      env("foo-2"),
      { name: "empty", containerEdits: {} },
      { name: "-bad", containerEdits: { env: ["A=1"] } },
      { name: "badenv", containerEdits: { env: ["=1"] } },
      { name: "badperm", containerEdits: { deviceNodes: [{ path: "/dev/x", permissions: "rwx" }] } },
    ]);
    expect(spec?.devices.map((d) => d.name)).toEqual(["foo-2", "foo-10"]);
    expect(spec?.cdiVersion).toBe("0.3.0");
    expect(skipped.map((s) => s.name)).toEqual(["foo-2", "empty", "-bad", "badenv", "badperm"]);
  });

  it("has no spec without devices, and throws on an invalid kind", () => {
    expect(buildCdiSpec("v.example/foo", []).spec).toBeUndefined();
    expect(() => buildCdiSpec("nokind", [env("a")])).toThrow();
  });
});

describe("CdiSpecWriter", () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });
  const logger = pino({ level: "silent" });

  it("writes the whole spec under its name with no temp file left, and removes it when no device is left", async () => {
    dir = mkdtempSync(join(tmpdir(), "dpo-cdi-"));
    const writer = new CdiSpecWriter({ dir: join(dir, "cdi"), fileName: "v.example-foo.json", logger });
    await Promise.all([
      writer.write("v.example/foo", [env("foo-0")]),
      writer.write("v.example/foo", [env("foo-0"), env("foo-1")]),
    ]);
    expect(readdirSync(join(dir, "cdi"))).toEqual(["v.example-foo.json"]);
    const spec = JSON.parse(readFileSync(writer.path, "utf8")) as { devices: { name: string }[] };
    // Serialized: the last write wins.
    expect(spec.devices.map((d) => d.name)).toEqual(["foo-0", "foo-1"]);
    expect(await writer.write("v.example/foo", [])).toEqual({ written: false });
    expect(readdirSync(join(dir, "cdi"))).toEqual([]);
  });

  it("leaves a file another instance rewrote in place on remove", async () => {
    dir = mkdtempSync(join(tmpdir(), "dpo-cdi-"));
    const writer = new CdiSpecWriter({ dir, fileName: "v.example-foo.json", logger });
    await writer.write("v.example/foo", [env("foo-0")]);
    writeFileSync(writer.path, '{"cdiVersion":"0.3.0","kind":"v.example/foo","devices":[]}');
    await writer.remove();
    expect(readdirSync(dir)).toEqual(["v.example-foo.json"]);
  });

  it("refuses a file name runtimes would not read", () => {
    expect(() => new CdiSpecWriter({ dir: "/tmp", fileName: "v.example-foo.yml", logger })).toThrow();
    expect(() => new CdiSpecWriter({ dir: "/tmp", fileName: "a/b.json", logger })).toThrow();
  });
});
