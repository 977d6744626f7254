// The kubelet's root directory (--kubelet-root-dir, k0s' /var/lib/k0s/kubelet and the like): every kubelet
// directory that moves with it is mounted from under it, at the same path, and named to the plugin; the
// device-plugins directory, which the kubelet keeps in place whatever its root, does not move; the default
// renders as before; a change is a new revision; and bad values are refused naming the flag.
import type { V1DaemonSet, V1Volume, V1VolumeMount } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { DevicePluginConfigSchema, type DevicePluginConfig } from "../../../../src/api/v1beta1/config.js";
import type { DevicePluginConfigSpecInput } from "../../../../src/api/v1beta1/spec.js";
import { PLUGIN_FLAGS } from "../../../../src/cli/plugin.js";
import { parseKubeletRootDir } from "../../../../src/contract/kubelet-paths.js";
import type { RenderContext } from "../../../../src/operator/render/context.js";
import { pluginRevision, renderPluginDaemonSet } from "../../../../src/operator/render/daemonset.js";

const ctx: RenderContext = {
  namespace: "dpo-system",
  operatorImage: "registry.example/dpo:1.2.3",
  pluginServiceAccount: "dpo-plugin",
  registrationMode: "watcher",
};
const K0S = "/var/lib/k0s/kubelet";

function config(spec: Partial<DevicePluginConfigSpecInput> = {}): DevicePluginConfig {
  return DevicePluginConfigSchema.parse({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: "example-foo", uid: "uid-1", generation: 1 },
    spec: {
      resourceName: "hardware-vendor.example/foo",
      backend: { type: "Mock", mock: { devices: 4 } },
      ...spec,
    },
  });
}

const container = (ds: V1DaemonSet) => ds.spec!.template.spec!.containers[0]!;
function hostMounts(ds: V1DaemonSet): { host: string; at: string | undefined }[] {
  const mounts = new Map<string, V1VolumeMount>((container(ds).volumeMounts ?? []).map((m) => [m.name, m]));
  return (ds.spec!.template.spec!.volumes ?? [])
    .filter((v: V1Volume) => v.hostPath !== undefined)
    .map((v) => ({ host: v.hostPath!.path, at: mounts.get(v.name)?.mountPath }));
}
function flag(ds: V1DaemonSet, name: string): string | undefined {
  const args = container(ds).args ?? [];
  const i = args.indexOf(name);
  return i === -1 ? undefined : args[i + 1];
}
/** Every flag the plugin reads a kubelet directory from. */
const DIR_FLAGS = [
  "--device-plugin-dir",
  "--plugins-registry-dir",
  "--dra-plugins-dir",
  "--pod-resources-socket",
];

describe("renderPluginDaemonSet with a kubelet root directory", () => {
  it("device plugin API: plugins_registry and pod-resources under it, device-plugins where the kubelet keeps it", () => {
    const ds = renderPluginDaemonSet(config(), { ...ctx, kubeletRootDir: K0S });
    expect(hostMounts(ds)).toEqual([
      { host: "/var/lib/kubelet/device-plugins", at: "/var/lib/kubelet/device-plugins" },
      { host: `${K0S}/plugins_registry`, at: `${K0S}/plugins_registry` },
      { host: `${K0S}/pod-resources`, at: `${K0S}/pod-resources` },
    ]);
    expect(flag(ds, "--plugins-registry-dir")).toBe(`${K0S}/plugins_registry`);
    expect(flag(ds, "--pod-resources-socket")).toBe(`${K0S}/pod-resources/kubelet.sock`);
    expect(flag(ds, "--device-plugin-dir")).toBeUndefined();
  });

  it("DRA: the driver's directory under <root>/plugins, at the host's path, which the plugin tells the kubelet", () => {
    const ds = renderPluginDaemonSet(config({ publish: "DRA", dra: { driverName: "foo.example.com" } }), {
      ...ctx,
      kubeletRootDir: K0S,
    });
    expect(hostMounts(ds).filter((m) => m.host !== "/var/run/cdi")).toEqual([
      { host: `${K0S}/plugins/foo.example.com`, at: `${K0S}/plugins/foo.example.com` },
      { host: `${K0S}/plugins_registry`, at: `${K0S}/plugins_registry` },
      { host: `${K0S}/pod-resources`, at: `${K0S}/pod-resources` },
    ]);
    expect(flag(ds, "--dra-plugins-dir")).toBe(`${K0S}/plugins`);
    expect(flag(ds, "--plugins-registry-dir")).toBe(`${K0S}/plugins_registry`);
  });

  it("every flag it passes is one the plugin has, before --registration as `dpo plugin --help` lists them", () => {
    const args = container(renderPluginDaemonSet(config(), { ...ctx, kubeletRootDir: K0S })).args ?? [];
    const names = new Set(PLUGIN_FLAGS.map((f) => `--${f.name}`));
    for (const a of args.filter((a) => a.startsWith("--"))) expect(names, a).toContain(a);
  });

  it("the default root, given or not, renders as before: the plugin's own defaults, no directory flag", () => {
    for (const c of [config(), config({ publish: "DRA" })]) {
      const plain = renderPluginDaemonSet(c, ctx);
      const given = renderPluginDaemonSet(c, { ...ctx, kubeletRootDir: "/var/lib/kubelet" });
      expect(given).toEqual(plain);
      for (const f of DIR_FLAGS) expect(container(plain).args).not.toContain(f);
      for (const m of hostMounts(plain)) {
        if (m.host !== "/var/run/cdi") expect(m.host).toMatch(/^\/var\/lib\/kubelet\//);
      }
    }
  });

  it("a change of the root directory is a new revision", () => {
    expect(pluginRevision(config(), { ...ctx, kubeletRootDir: K0S })).not.toBe(pluginRevision(config(), ctx));
    expect(pluginRevision(config(), { ...ctx, kubeletRootDir: K0S })).not.toBe(
      pluginRevision(config(), { ...ctx, kubeletRootDir: "/var/snap/microk8s/common/var/lib/kubelet" }),
    );
  });
});

describe("parseKubeletRootDir", () => {
  it("takes an absolute path, dropping a trailing '/'", () => {
    expect(parseKubeletRootDir("/var/lib/k0s/kubelet/", "--kubelet-root-dir")).toBe(K0S);
    expect(parseKubeletRootDir("/var/snap/microk8s/common/var/lib/kubelet", "--kubelet-root-dir")).toBe(
      "/var/snap/microk8s/common/var/lib/kubelet",
    );
  });

  it.each(["var/lib/kubelet", "/", "", "/var/lib/../kubelet", "/var//lib", "/var/lib/kube let", "/a,b"])(
    "refuses '%s', naming the flag",
    (value) => {
      expect(() => parseKubeletRootDir(value, "--kubelet-root-dir")).toThrow(
        /^--kubelet-root-dir: '.*' is not a kubelet root directory/,
      );
    },
  );
});
