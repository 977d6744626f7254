// The plugin DaemonSet per backend and with publish: DRA: what runs on each node, with which host access and
// which privileges; and the devFS host directories a backend mounts.
import { describe, expect, it } from "vitest";
import type { DevicePluginConfigSpecInput } from "../../../../src/api/v1beta1/spec.js";
import { POD_RESOURCES_DIR } from "../../../../src/contract/kubelet-paths.js";
import { devfsHostDirectories } from "../../../../src/operator/render/backends.js";
import { PLUGIN_FLAGS } from "../../../../src/cli/plugin.js";
import { pluginRevision, renderPluginDaemonSet } from "../../../../src/operator/render/daemonset.js";
import { ctx, config, container, hostMounts, devicePluginsDir, podResourcesDir } from "./render-support.js";

describe("renderPluginDaemonSet per backend", () => {
  it.each<{ backend: string; spec: Partial<DevicePluginConfigSpecInput>; mounts: unknown[] }>([
    { backend: "Mock without a health file", spec: {}, mounts: [devicePluginsDir, podResourcesDir] },
    {
      backend: "Mock with a health file",
      spec: { backend: { type: "Mock", mock: { devices: 2, healthFile: "/run/dpo/health.json" } } },
      mounts: [
        devicePluginsDir,
        podResourcesDir,
        { host: "/run/dpo", type: "DirectoryOrCreate", at: "/run/dpo", readOnly: true },
      ],
    },
    {
      backend: "DevFS under / (top directory of each glob)",
      spec: {
        backend: {
          type: "DevFS",
          devFS: {
            paths: [{ glob: "/dev/ttyUSB*" }, { glob: "/dev/serial/by-id/*" }, { glob: "/opt/x/dev*" }],
          },
        },
      },
      mounts: [
        devicePluginsDir,
        podResourcesDir,
        { host: "/dev", type: "Directory", at: "/dev", readOnly: true },
        { host: "/opt", type: "Directory", at: "/opt", readOnly: true },
      ],
    },
    {
      backend: "DevFS under another root (the root, whole)",
      spec: { backend: { type: "DevFS", devFS: { root: "/host", paths: [{ glob: "/dev/ttyUSB*" }] } } },
      mounts: [
        devicePluginsDir,
        podResourcesDir,
        { host: "/host", type: "Directory", at: "/host", readOnly: true },
      ],
    },
    {
      backend: "PCI",
      spec: { backend: { type: "PCI", pci: { vendor: "10de" } } },
      mounts: [
        devicePluginsDir,
        podResourcesDir,
        { host: "/dev", type: "Directory", at: "/dev", readOnly: true },
        { host: "/sys", type: "Directory", at: "/sys", readOnly: true },
      ],
    },
    {
      backend: "PCI with custom roots",
      spec: {
        backend: { type: "PCI", pci: { vendor: "10de", sysfsRoot: "/host/sys", devRoot: "/host/dev" } },
      },
      mounts: [
        devicePluginsDir,
        podResourcesDir,
        { host: "/host/dev", type: "Directory", at: "/host/dev", readOnly: true },
        { host: "/host/sys", type: "Directory", at: "/host/sys", readOnly: true },
      ],
    },
  ])("$backend: host mounts at the same path, read-only except the kubelet's", ({ spec, mounts }) => {
    expect(hostMounts(renderPluginDaemonSet(config(spec), ctx))).toEqual(mounts);
  });

  it.each<{ backend: string; spec: Partial<DevicePluginConfigSpecInput> }>([
    { backend: "Mock", spec: {} },
    { backend: "DevFS", spec: { backend: { type: "DevFS", devFS: { paths: [{ glob: "/dev/tty*" }] } } } },
    { backend: "PCI", spec: { backend: { type: "PCI", pci: { vendor: "10de" } } } },
    { backend: "NVIDIA without XID events", spec: { backend: { type: "NVIDIA", nvidia: {} } } },
  ])("$backend runs as uid 0 without privilege, capabilities or a writable root", ({ spec }) => {
    expect(container(renderPluginDaemonSet(config(spec), ctx)).securityContext).toEqual({
      runAsUser: 0,
      runAsGroup: 0,
      runAsNonRoot: false,
      privileged: false,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    });
  });

  it("NVIDIA: sysfs and /dev, the NVIDIA Container Toolkit's variables, and CAP_SYSLOG only to read XIDs", () => {
    const plain = renderPluginDaemonSet(config({ backend: { type: "NVIDIA", nvidia: {} } }), ctx);
    expect(hostMounts(plain)).toEqual([
      devicePluginsDir,
      podResourcesDir,
      { host: "/dev", type: "Directory", at: "/dev", readOnly: true },
      { host: "/sys", type: "Directory", at: "/sys", readOnly: true },
    ]);
    expect(container(plain).env).toEqual(
      expect.arrayContaining([
        { name: "NVIDIA_VISIBLE_DEVICES", value: "all" },
        { name: "NVIDIA_DRIVER_CAPABILITIES", value: "utility" },
      ]),
    );
    const envNames = (spec: object) =>
      (container(renderPluginDaemonSet(config(spec), ctx)).env ?? []).map((e) => e.name);
    expect(envNames({ backend: { type: "NVIDIA", nvidia: {} } })).not.toContain("NVIDIA_MIG_MONITOR_DEVICES");
    expect(
      container(
        renderPluginDaemonSet(
          config({ backend: { type: "NVIDIA", nvidia: { mig: { strategy: "Mixed", profile: "1g.10gb" } } } }),
          ctx,
        ),
      ).env,
    ).toContainEqual({ name: "NVIDIA_MIG_MONITOR_DEVICES", value: "all" });
    const xids = renderPluginDaemonSet(
      config({ backend: { type: "NVIDIA", nvidia: { dmesgPath: "/usr/bin/dmesg" } } }),
      ctx,
    );
    expect(container(xids).securityContext).toMatchObject({
      privileged: false,
      capabilities: { drop: ["ALL"], add: ["SYSLOG"] },
    });
  });

  it("mounts the directory of the plugin's default PodResources socket, read-only, for every backend", () => {
    const flag = PLUGIN_FLAGS.find((f) => f.name === "pod-resources-socket");
    expect(flag?.default).toBe(`${POD_RESOURCES_DIR}/kubelet.sock`);
    const args = container(renderPluginDaemonSet(config(), ctx)).args ?? [];
    // The default is left to the plugin: a flag in the args would stop an older plugin image from starting.
    expect(args.some((a) => a.startsWith("--pod-resources"))).toBe(false);
  });

  it("mounts the plugin-watcher directory only in watcher mode, and tells the plugin", () => {
    const watcher = renderPluginDaemonSet(config(), { ...ctx, registrationMode: "watcher" });
    expect(hostMounts(watcher)).toContainEqual({
      host: "/var/lib/kubelet/plugins_registry",
      type: "Directory",
      at: "/var/lib/kubelet/plugins_registry",
      readOnly: false,
    });
    expect(container(watcher).args).toContain("watcher");
    const kubelet = renderPluginDaemonSet(config(), ctx);
    expect(hostMounts(kubelet).map((m) => m.host)).not.toContain("/var/lib/kubelet/plugins_registry");
  });

  it("mounts the host's CDI directory read-write and names it to the plugin only when CDI is enabled", () => {
    const cdi = renderPluginDaemonSet(config({ cdi: { enabled: true } }), ctx);
    // The plugin writes its spec there, for the node's container runtime; created if the node lacks it.
    expect(hostMounts(cdi)).toContainEqual({
      host: "/var/run/cdi",
      type: "DirectoryOrCreate",
      at: "/var/run/cdi",
      readOnly: false,
    });
    const args = container(cdi).args ?? [];
    expect(args[args.indexOf("--cdi-dir") + 1]).toBe("/var/run/cdi");
    const plain = renderPluginDaemonSet(config(), ctx);
    expect(hostMounts(plain).map((m) => m.host)).not.toContain("/var/run/cdi");
    expect(container(plain).args).not.toContain("--cdi-dir");
  });
});

describe("renderPluginDaemonSet with publish: DRA", () => {
  const dra = (extra: Partial<DevicePluginConfigSpecInput> = {}) =>
    config({ publish: "DRA", dra: { driverName: "foo.example.com" }, ...extra });

  it.each(["kubelet", "watcher"] as const)(
    "%s registration: its driver's DRA plugins dir, the plugin watcher's, PodResources and CDI; no device-plugins dir",
    (registrationMode) => {
      const ds = renderPluginDaemonSet(dra(), { ...ctx, registrationMode });
      // Backend mounts (Mock has none) come after the kubelet's; exactly these, in this order.
      expect(hostMounts(ds)).toEqual([
        {
          host: "/var/lib/kubelet/plugins/foo.example.com",
          type: "DirectoryOrCreate",
          at: "/var/lib/kubelet/plugins/foo.example.com",
          readOnly: false,
        },
        {
          host: "/var/lib/kubelet/plugins_registry",
          type: "Directory",
          at: "/var/lib/kubelet/plugins_registry",
          readOnly: false,
        },
        {
          host: "/var/lib/kubelet/pod-resources",
          type: "DirectoryOrCreate",
          at: "/var/lib/kubelet/pod-resources",
          readOnly: true,
        },
        { host: "/var/run/cdi", type: "DirectoryOrCreate", at: "/var/run/cdi", readOnly: false },
      ]);
      const hosts = hostMounts(ds).map((m) => m.host);
      expect(hosts).not.toContain("/var/lib/kubelet/device-plugins");
      expect(hosts.some((h) => h.endsWith("kubelet.sock"))).toBe(false);
      // CDI is how a prepared DRA device reaches a container: the directory is named even without spec.cdi.
      const args = container(ds).args ?? [];
      expect(args[args.indexOf("--cdi-dir") + 1]).toBe("/var/run/cdi");
    },
  );

  it("mounts no other driver's directory: the default driver name's own when spec.dra.driverName is unset", () => {
    const ds = renderPluginDaemonSet(config({ publish: "DRA" }), ctx);
    const dirs = hostMounts(ds).filter((m) => m.host.startsWith("/var/lib/kubelet/plugins"));
    expect(dirs.map((m) => m.host)).toEqual([
      "/var/lib/kubelet/plugins/foo.hardware-vendor.example",
      "/var/lib/kubelet/plugins_registry",
    ]);
    expect(dirs.map((m) => m.at)).toEqual(dirs.map((m) => m.host));
  });

  it("the only writable host mounts are the sockets' directories and CDI's, in both modes", () => {
    for (const spec of [{ publish: "DRA" as const }, { cdi: { enabled: true } }, {}]) {
      for (const registrationMode of ["kubelet", "watcher"] as const) {
        const writable = hostMounts(renderPluginDaemonSet(config(spec), { ...ctx, registrationMode }))
          .filter((m) => !m.readOnly)
          .map((m) => m.host);
        for (const host of writable) {
          expect(host, JSON.stringify(spec)).toMatch(
            /^(\/var\/lib\/kubelet\/(device-plugins|plugins_registry|plugins\/[^/]+)|\/var\/run\/cdi)$/,
          );
        }
        if (!("cdi" in spec) && spec.publish === undefined) expect(writable).not.toContain("/var/run/cdi");
      }
    }
  });

  it("keeps a backend's own host paths and privileges", () => {
    const ds = renderPluginDaemonSet(dra({ backend: { type: "PCI", pci: { vendor: "10de" } } }), ctx);
    const plain = renderPluginDaemonSet(config({ backend: { type: "PCI", pci: { vendor: "10de" } } }), ctx);
    const kubeletDirs = /^\/var\/(lib\/kubelet|run\/cdi)/;
    expect(hostMounts(ds).filter((m) => !kubeletDirs.test(m.host))).toEqual(
      hostMounts(plain).filter((m) => !kubeletDirs.test(m.host)),
    );
    expect(container(ds).securityContext).toEqual(container(plain).securityContext);
  });

  it("is a revision of its own: switching publish rolls the plugin like any other spec change", () => {
    expect(pluginRevision(dra(), ctx)).not.toBe(
      pluginRevision(config({ dra: { driverName: "foo.example.com" } }), ctx),
    );
  });
});

describe("devfsHostDirectories", () => {
  it.each([
    { root: "/", globs: ["/dev/ttyUSB*", "/dev/bus/usb/*/*"], want: ["/dev"] },
    { root: "/", globs: ["/top*", "/*/x"], want: [] },
    { root: "/host/", globs: ["/dev/ttyUSB*"], want: ["/host"] },
  ])("root $root, globs $globs → $want", ({ root, globs, want }) => {
    const dirs = devfsHostDirectories({
      root,
      paths: globs.map((glob) => ({
        glob,
        type: "CharDevice",
        permissions: "rw",
        maxContainersPerDevice: 1,
      })),
    });
    expect(dirs).toEqual(want);
  });
});

describe("devfsHostDirectories with device groups", () => {
  const path = (glob: string) => ({
    glob,
    type: "CharDevice" as const,
    permissions: "rw",
    maxContainersPerDevice: 1,
  });
  it("mounts sysfs and the shared nodes' directories, where grouping and /dev/kfd are read", () => {
    expect(
      devfsHostDirectories({
        root: "/",
        sysfsRoot: "/sys",
        paths: [path("/dev/dri/card*"), path("/dev/dri/renderD*")],
        groupBy: { key: "PCIAddress" },
        sharedPaths: [{ glob: "/run/kfd/kfd", permissions: "rw" }],
      }),
    ).toEqual(["/sys", "/dev", "/run"]);
  });

  it("mounts sysfs beside a root other than /", () => {
    expect(
      devfsHostDirectories({ root: "/host", sysfsRoot: "/host-sys", paths: [path("/dev/kfd")] }),
    ).toEqual(["/host", "/host-sys"]);
  });
});
