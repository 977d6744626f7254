// The plugin config's hash, which the operator puts on the pods and the plugin reports back, and how a plugin
// reads a config that a newer operator wrote.
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { loadDevicePluginConfig } from "../../../src/api/validate.js";
import { configHash, PLUGIN_OPTIONAL_FIELDS_ANNOTATION } from "../../../src/contract/plugin-config.js";
import { readPluginConfig } from "../../../src/contract/plugin-config-read.js";

describe("configHash", () => {
  it("is a short hex digest that ignores key order and tells keys from values", () => {
    expect(configHash({ a: "1", b: "2" })).toMatch(/^[0-9a-f]{16}$/);
    expect(configHash({ b: "2", a: "1" })).toBe(configHash({ a: "1", b: "2" }));
    expect(configHash({ ab: "c" })).not.toBe(configHash({ a: "bc" }));
  });
});

/** A DevFS config as a later operator might write it: `future` merged into its spec, `optional` annotated. */
function manifest(future: Record<string, unknown> = {}, optional?: string): string {
  return stringify({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: {
      name: "serial",
      uid: "uid-1",
      ...(optional !== undefined ? { annotations: { [PLUGIN_OPTIONAL_FIELDS_ANNOTATION]: optional } } : {}),
    },
    spec: {
      resourceName: "devices.example/serial",
      backend: {
        type: "DevFS",
        devFS: { paths: [{ glob: "/dev/ttyUSB*" }, { glob: "/dev/ttyACM*" }] },
      },
      ...future,
    },
  });
}

const today = loadDevicePluginConfig(manifest());
if (!today.ok) throw new Error(JSON.stringify(today.errors));

describe("readPluginConfig", () => {
  it("reads a config of today's fields as the strict loader does", () => {
    expect(readPluginConfig(manifest())).toEqual({ ok: true, value: today.value, ignored: [] });
  });

  it("leaves out fields it does not know that the operator marked optional, and names them", () => {
    const text = manifest(
      { futureHint: "x", plugin: { logLevel: "debug", logFormat: "json" } },
      "spec.futureHint, spec.plugin.logFormat",
    );
    const read = readPluginConfig(text);
    if (!read.ok) throw new Error(JSON.stringify(read.errors));
    expect(read.ignored).toEqual(["spec.futureHint", "spec.plugin.logFormat"]);
    expect(read.value.spec).toEqual({
      ...today.value.spec,
      plugin: { ...today.value.spec.plugin, logLevel: "debug" },
    });
  });

  it("leaves out a marked field in every item of a list", () => {
    const future = manifest({}, "spec.backend.devFS.paths[].label").replace(
      /glob: \/dev\/(ttyUSB|ttyACM)\*/g,
      (m) => `${m}\n          label: serial`,
    );
    const read = readPluginConfig(future);
    if (!read.ok) throw new Error(`${JSON.stringify(read.errors)}\n${future}`);
    expect(read.ignored).toEqual(["spec.backend.devFS.paths[0].label", "spec.backend.devFS.paths[1].label"]);
    expect(read.value.spec).toEqual(today.value.spec);
  });

  it("refuses, naming it, a field it does not know that is not marked optional", () => {
    const read = readPluginConfig(manifest({ futureHint: "x", futureMust: 1 }, "spec.futureHint"));
    expect(read).toEqual({ ok: false, errors: [{ path: "spec.futureMust", message: "unknown field" }] });
  });

  it("never leaves out a field it knows, whatever the annotation says", () => {
    const read = readPluginConfig(
      manifest({ futureHint: "x", priority: 5 }, "spec.futureHint,spec.priority"),
    );
    if (!read.ok) throw new Error(JSON.stringify(read.errors));
    expect(read.ignored).toEqual(["spec.futureHint"]);
    expect(read.value.spec.priority).toBe(5);
  });

  it("refuses a known field's bad value even when it is marked optional", () => {
    const read = readPluginConfig(
      manifest({ futureHint: "x", priority: 5000 }, "spec.futureHint,spec.priority"),
    );
    expect(read.ok).toBe(false);
    if (read.ok) return;
    expect(read.errors.map((e) => e.path)).toContain("spec.priority");
  });

  it("names the annotation when an entry is not a field path", () => {
    const read = readPluginConfig(manifest({ futureHint: "x" }, "spec.futureHint,metadata.name"));
    expect(read).toEqual({
      ok: false,
      errors: [
        { path: "spec.futureHint", message: "unknown field" },
        {
          path: `metadata.annotations[${PLUGIN_OPTIONAL_FIELDS_ANNOTATION}]`,
          message:
            "'metadata.name' is not a field path such as spec.plugin.logFormat or spec.devFS.paths[].label",
        },
      ],
    });
  });

  it.each([
    ["not YAML", "a: [", "<document>"],
    ["two documents", `${manifest()}---\n${manifest()}`, "<document>"],
    ["a list", "- 1\n", "<root>"],
    [
      "annotations that are no map",
      manifest({ futureHint: "x" }).replace("uid: uid-1", "uid: uid-1\n  annotations: 7"),
      "metadata.annotations",
    ],
  ])("refuses %s with the strict loader's errors", (_what, text, path) => {
    const read = readPluginConfig(text);
    expect(read.ok).toBe(false);
    if (read.ok) return;
    expect(read.errors.map((e) => e.path)).toContain(path);
  });
});
