// The plugin container's resources: the defaults bench-plugin measured when neither the config nor the
// operator sets any, a config's own taken whole, and the image's entrypoint (with the Node flags the
// measurement ran under) never replaced by a command.
import { describe, expect, it } from "vitest";
import { loadDevicePluginConfig } from "../../../../src/api/validate.js";
import { convertManifests } from "../../../../src/api/conversion/manifest.js";
import {
  DEFAULT_PLUGIN_RESOURCES,
  renderPluginDaemonSet,
} from "../../../../src/operator/render/daemonset.js";
import { ctx, config, container } from "./render-support.js";

describe("renderPluginDaemonSet", () => {
  it.each([
    { publish: "DevicePlugin", extra: {} },
    { publish: "DRA", extra: { publish: "DRA", dra: { driverName: "foo.example.com" } } },
  ] as const)("$publish: requests and limits from bench-plugin when the config sets none", ({ extra }) => {
    const ds = renderPluginDaemonSet(config(extra), ctx);
    expect(container(ds).resources).toEqual({
      requests: { cpu: "10m", memory: "80Mi" },
      limits: { memory: "160Mi" },
    });
  });

  it.each([
    { publish: "DevicePlugin", extra: {} },
    { publish: "DRA", extra: { publish: "DRA", dra: { driverName: "foo.example.com" } } },
  ] as const)(
    "$publish: the plugin runs the image's entrypoint, and with it the Node flags bench-plugin measured",
    ({ extra }) => {
      // The image's ENTRYPOINT holds the flags that keep a plugin's memory low (Dockerfile: semi-space, lite
      // mode, local time from the C library); a command here would start Node without them.
      for (const image of ["", "registry.example/own-dpo:1.2.3"]) {
        const c = container(renderPluginDaemonSet(config({ ...extra, plugin: { image } }), ctx));
        expect(c).not.toHaveProperty("command");
        expect(c.args?.[0]).toBe("plugin");
      }
    },
  );

  it("gives a v1alpha1 config, which cannot name resources, the same defaults once served as v1beta1", () => {
    // The operator reads every config as v1beta1: the API server converts a v1alpha1 one first.
    const converted = convertManifests(
      [
        "apiVersion: dpo.dev/v1alpha1",
        "kind: DevicePluginConfig",
        "metadata: { name: example-foo, uid: uid-1, generation: 1 }",
        "spec: { resourceName: hardware-vendor.example/foo, backend: Mock, mock: { devices: 4 } }",
      ].join("\n"),
      "dpo.dev/v1beta1",
    );
    if (!converted.ok) throw new Error(JSON.stringify(converted.problems));
    const loaded = loadDevicePluginConfig(converted.text);
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.errors));
    expect(container(renderPluginDaemonSet(loaded.value, ctx)).resources).toEqual(DEFAULT_PLUGIN_RESOURCES);
  });

  it.each<{
    what: string;
    resources: { requests?: Record<string, string>; limits?: Record<string, string> };
    want: unknown;
  }>([
    {
      what: "requests alone: exactly those, no default limit beside them",
      resources: { requests: { memory: "256Mi" } },
      want: { requests: { memory: "256Mi" } },
    },
    {
      what: "limits alone: exactly those",
      resources: { limits: { memory: "512Mi", cpu: "1" } },
      want: { limits: { memory: "512Mi", cpu: "1" } },
    },
    { what: "empty requests: none at all", resources: { requests: {} }, want: undefined },
    {
      what: "empty requests and limits: none at all",
      resources: { requests: {}, limits: {} },
      want: undefined,
    },
  ])("a config's own resources override the defaults whole: $what", ({ resources, want }) => {
    const ds = renderPluginDaemonSet(config({ plugin: { resources } }), ctx);
    expect(container(ds).resources).toEqual(want);
  });

  it("takes the operator's --plugin-pod-defaults resources over the built-in ones, and a config's own over both", () => {
    const defaults = { resources: { requests: { memory: "96Mi" }, limits: { memory: "192Mi" } } };
    const withDefaults = { ...ctx, pluginPodDefaults: defaults };
    expect(container(renderPluginDaemonSet(config(), withDefaults)).resources).toEqual(defaults.resources);
    const own = { requests: { memory: "300Mi" } };
    expect(
      container(renderPluginDaemonSet(config({ plugin: { resources: own } }), withDefaults)).resources,
    ).toEqual(own);
  });
});
