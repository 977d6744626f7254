// The plugin DaemonSet: what runs on each node, with which host access and which privileges, per backend.
import type { V1DaemonSet, V1Volume, V1VolumeMount } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import {
  DevicePluginConfigSchema,
  type DevicePluginConfig,
  type DevicePluginConfigInput,
} from "../../src/api/v1beta1/config.js";
import type { DevicePluginConfigSpecInput } from "../../src/api/v1beta1/spec.js";
import { loadDevicePluginConfig } from "../../src/api/validate.js";
import { convertManifests } from "../../src/api/conversion/manifest.js";
import { POD_RESOURCES_DIR } from "../../src/contract/kubelet-paths.js";
import { configHash } from "../../src/contract/plugin-config.js";
import { devfsHostDirectories } from "../../src/operator/render/backends.js";
import { renderPluginConfigMap } from "../../src/operator/render/configmap.js";
import type { RenderContext } from "../../src/operator/render/context.js";
import { PLUGIN_FLAGS } from "../../src/cli/plugin.js";
import {
  DEFAULT_PLUGIN_RESOURCES,
  pluginRevision,
  renderPluginDaemonSet,
} from "../../src/operator/render/daemonset.js";

const ctx: RenderContext = {
  namespace: "dpo-system",
  operatorImage: "registry.example/dpo:1.2.3",
  pluginServiceAccount: "dpo-plugin",
  registrationMode: "kubelet",
};

function config(spec: Partial<DevicePluginConfigSpecInput> = {}, name = "example-foo"): DevicePluginConfig {
  const input: DevicePluginConfigInput = {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name, uid: "uid-1", generation: 1 },
    spec: {
      resourceName: "hardware-vendor.example/foo",
      backend: { type: "Mock", mock: { devices: 4 } },
      ...spec,
    },
  };
  return DevicePluginConfigSchema.parse(input);
}

function podSpec(ds: V1DaemonSet) {
  return ds.spec!.template.spec!;
}
function container(ds: V1DaemonSet) {
  return podSpec(ds).containers[0]!;
}
/** hostPath volumes joined with their mounts, the way a reviewer reads them. */
function hostMounts(ds: V1DaemonSet) {
  const mounts = new Map<string, V1VolumeMount>((container(ds).volumeMounts ?? []).map((m) => [m.name, m]));
  return (podSpec(ds).volumes ?? [])
    .filter((v: V1Volume) => v.hostPath !== undefined)
    .map((v) => ({
      host: v.hostPath!.path,
      type: v.hostPath!.type,
      at: mounts.get(v.name)?.mountPath,
      readOnly: mounts.get(v.name)?.readOnly,
    }));
}

const devicePluginsDir = {
  host: "/var/lib/kubelet/device-plugins",
  type: "Directory",
  at: "/var/lib/kubelet/device-plugins",
  readOnly: false,
};
/** Read-only: the plugin only connects to the kubelet's PodResources socket. */
const podResourcesDir = {
  host: "/var/lib/kubelet/pod-resources",
  type: "DirectoryOrCreate",
  at: "/var/lib/kubelet/pod-resources",
  readOnly: true,
};

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

describe("renderPluginDaemonSet", () => {
  it("lives in the operator namespace, labelled, owned by the config and selecting its pods", () => {
    const ds = renderPluginDaemonSet(config(), ctx);
    const revision = pluginRevision(config(), ctx);
    expect(revision).toMatch(/^[0-9a-f]{10}$/);
    expect(ds.apiVersion).toBe("apps/v1");
    expect(ds.kind).toBe("DaemonSet");
    expect(ds.metadata?.name).toBe(`dpo-example-foo-${revision}`);
    expect(ds.metadata?.namespace).toBe("dpo-system");
    expect(ds.metadata?.ownerReferences).toEqual([
      {
        apiVersion: "dpo.dev/v1beta1",
        kind: "DevicePluginConfig",
        name: "example-foo",
        uid: "uid-1",
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    expect(ds.spec?.selector.matchLabels).toEqual({
      "dpo.dev/config": "example-foo",
      "dpo.dev/revision": revision,
    });
    // The API server refuses a selector that does not match the template's labels.
    expect(ds.spec?.template.metadata?.labels).toMatchObject(ds.spec!.selector.matchLabels!);
    expect(ds.spec?.template.metadata?.labels).toEqual(ds.metadata?.labels);
    // The operator moves nodes between revisions: a role change must never restart pods.
    expect(ds.spec?.updateStrategy).toEqual({ type: "OnDelete" });
    expect(ds.spec?.revisionHistoryLimit).toBe(2);
    // By default the base: every node without a revision label runs it.
    expect(
      podSpec(ds).affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
        ?.nodeSelectorTerms?.[0],
    ).toEqual({ matchExpressions: [{ key: "revision.dpo.dev/example-foo", operator: "DoesNotExist" }] });
    expect(podSpec(ds).terminationGracePeriodSeconds).toBe(10);
    expect(podSpec(ds).serviceAccountName).toBe("dpo-plugin");
    expect(podSpec(ds).priorityClassName).toBe("system-node-critical");
  });

  it("runs `dpo plugin` on the mounted config with the node name from the downward API", () => {
    const c = container(renderPluginDaemonSet(config({ plugin: { logLevel: "debug" } }), ctx));
    expect(c.name).toBe("plugin");
    expect(c.imagePullPolicy).toBe("IfNotPresent");
    expect(c.args).toEqual([
      "plugin",
      "--config",
      "/etc/dpo/config.yaml",
      "--registration",
      "kubelet",
      "--metrics-addr",
      ":8080",
      "--health-addr",
      ":8081",
    ]);
    expect(c.env).toEqual([
      { name: "NODE_NAME", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "spec.nodeName" } } },
      {
        name: "POD_NAMESPACE",
        valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } },
      },
      { name: "POD_UID", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.uid" } } },
      { name: "DPO_LOG_LEVEL", value: "debug" },
      { name: "DPO_REVISION", value: pluginRevision(config({ plugin: { logLevel: "debug" } }), ctx) },
    ]);
    expect(c.ports).toEqual([
      { name: "metrics", containerPort: 8080, protocol: "TCP" },
      { name: "health", containerPort: 8081, protocol: "TCP" },
    ]);
    expect(c.readinessProbe?.httpGet).toEqual({ path: "/readyz", port: "health", scheme: "HTTP" });
    expect(c.livenessProbe?.httpGet).toEqual({ path: "/healthz", port: "health", scheme: "HTTP" });
    expect(c.volumeMounts?.[0]).toEqual({ name: "config", mountPath: "/etc/dpo", readOnly: true });
    const ds = renderPluginDaemonSet(config(), ctx);
    expect(podSpec(ds).volumes?.[0]).toEqual({
      name: "config",
      configMap: { name: ds.metadata?.name, defaultMode: 0o444 },
    });
  });

  it.each([
    { image: "", want: "registry.example/dpo:1.2.3" },
    { image: "registry.example/custom:9", want: "registry.example/custom:9" },
  ])("uses image '$image' → $want", ({ image, want }) => {
    expect(container(renderPluginDaemonSet(config({ plugin: { image } }), ctx)).image).toBe(want);
  });

  it("passes nodeSelector, tolerations, priority class and resources through, and leaves empty ones out", () => {
    const ds = renderPluginDaemonSet(
      config({
        nodeSelector: { "feature.example/foo": "true" },
        tolerations: [{ key: "gpu", operator: "Exists", effect: "NoSchedule" }],
        plugin: {
          priorityClassName: "custom-priority",
          resources: { requests: { cpu: "10m", memory: "32Mi" }, limits: { memory: "64Mi" } },
        },
      }),
      ctx,
    );
    expect(podSpec(ds).nodeSelector).toEqual({ "feature.example/foo": "true" });
    // The config's tolerations, and the rollout's Replace taint (ADR 0004), which every revision tolerates.
    expect(podSpec(ds).tolerations).toEqual([
      { key: "gpu", operator: "Exists", effect: "NoSchedule" },
      { key: "replace.dpo.dev/example-foo", operator: "Exists", effect: "NoSchedule" },
    ]);
    expect(podSpec(ds).priorityClassName).toBe("custom-priority");
    expect(container(ds).resources).toEqual({
      requests: { cpu: "10m", memory: "32Mi" },
      limits: { memory: "64Mi" },
    });

    const bare = renderPluginDaemonSet(config({ plugin: { priorityClassName: "" } }), ctx);
    expect(podSpec(bare)).not.toHaveProperty("nodeSelector");
    expect(podSpec(bare).tolerations).toEqual([
      { key: "replace.dpo.dev/example-foo", operator: "Exists", effect: "NoSchedule" },
    ]);
    expect(podSpec(bare)).not.toHaveProperty("priorityClassName");
    // No resources in the config: the measured defaults (the next test), never none.
    expect(container(bare).resources).toEqual(DEFAULT_PLUGIN_RESOURCES);
  });

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

  it("annotates the pod template with the ConfigMap's hash, so a spec change rolls the pods", () => {
    const c = config();
    const ds = renderPluginDaemonSet(c, ctx);
    const hash = ds.spec?.template.metadata?.annotations?.["dpo.dev/config-hash"];
    expect(hash).toBe(configHash(renderPluginConfigMap(c, ctx, "0123456789").data!));
    const changed = renderPluginDaemonSet(config({ sharing: { strategy: "TimeSlicing", replicas: 2 } }), ctx);
    expect(changed.spec?.template.metadata?.annotations?.["dpo.dev/config-hash"]).not.toBe(hash);
  });

  it("gives every mount a volume and every volume a unique name", () => {
    const ds = renderPluginDaemonSet(config({ backend: { type: "PCI", pci: { vendor: "10de" } } }), {
      ...ctx,
      registrationMode: "watcher",
    });
    const names = (podSpec(ds).volumes ?? []).map((v) => v.name);
    expect(new Set(names).size).toBe(names.length);
    const mounts = container(ds).volumeMounts ?? [];
    // The loop below passes on no mount at all; the plugin always mounts the device-plugins directory.
    expect(mounts.length).toBeGreaterThan(0);
    for (const mount of mounts) expect(names).toContain(mount.name);
  });

  it("bounds the names of a config with a long name", () => {
    const ds = renderPluginDaemonSet(config({}, `${"n".repeat(70)}.example.com`), ctx);
    expect(ds.metadata!.name!.length).toBeLessThanOrEqual(63);
    expect(podSpec(ds).volumes?.[0]?.configMap?.name).toBe(ds.metadata?.name);
  });

  it("gives every template its own revision, and none to a change of spec.upgrade", () => {
    const base = pluginRevision(config(), ctx);
    expect(pluginRevision(config(), ctx)).toBe(base);
    expect(pluginRevision(config({ plugin: { image: "registry.example/dpo:2" } }), ctx)).not.toBe(base);
    expect(pluginRevision(config({ plugin: { logLevel: "debug" } }), ctx)).not.toBe(base);
    expect(pluginRevision(config({ sharing: { strategy: "TimeSlicing", replicas: 2 } }), ctx)).not.toBe(base);
    expect(
      pluginRevision(config({ upgrade: { paused: true, maxUnavailable: "50%", strategy: "Replace" } }), ctx),
    ).toBe(base);
    // The role is where the revision runs, not what it runs.
    const moving = renderPluginDaemonSet(config(), ctx, { role: "moving" });
    expect(moving.metadata?.labels?.["dpo.dev/revision"]).toBe(base);
  });

  it.each([
    {
      role: "base" as const,
      want: (rev: string) => [
        { matchExpressions: [{ key: "revision.dpo.dev/example-foo", operator: "DoesNotExist" }] },
        { matchExpressions: [{ key: "revision.dpo.dev/example-foo", operator: "In", values: [rev] }] },
        { matchExpressions: [{ key: "surge.dpo.dev/example-foo", operator: "In", values: [rev] }] },
      ],
    },
    {
      role: "moving" as const,
      want: (rev: string) => [
        { matchExpressions: [{ key: "revision.dpo.dev/example-foo", operator: "In", values: [rev] }] },
        { matchExpressions: [{ key: "surge.dpo.dev/example-foo", operator: "In", values: [rev] }] },
      ],
    },
  ])(
    "places the $role revision by the nodes' revision labels, whatever the number of nodes",
    ({ role, want }) => {
      const ds = renderPluginDaemonSet(config(), ctx, { role });
      expect(
        podSpec(ds).affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms,
      ).toEqual(want(pluginRevision(config(), ctx)));
    },
  );

  it("keys the node labels by the config label value, bounded for a long config name", () => {
    const long = `${"n".repeat(70)}.example.com`;
    const ds = renderPluginDaemonSet(config({}, long), ctx, { role: "moving" });
    const terms =
      podSpec(ds).affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ??
      [];
    for (const term of terms) {
      for (const e of term.matchExpressions ?? []) {
        const [prefix, name] = e.key.split("/");
        expect(prefix).toMatch(/^(revision|surge)\.dpo\.dev$/);
        expect(name!.length).toBeLessThanOrEqual(63);
      }
    }
  });

  it("renders the same object every time", () => {
    const spec: Partial<DevicePluginConfigSpecInput> = {
      backend: { type: "DevFS", devFS: { paths: [{ glob: "/dev/ttyUSB*" }, { glob: "/dev/ttyACM*" }] } },
      tolerations: [{ operator: "Exists" }],
    };
    const a = renderPluginDaemonSet(config(spec), ctx);
    const b = renderPluginDaemonSet(config(spec), ctx);
    expect(b).toEqual(a);
    expect(JSON.stringify(b)).toBe(JSON.stringify(a));
  });
});
