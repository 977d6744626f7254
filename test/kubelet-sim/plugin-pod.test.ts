// The kubelet simulator's pure decisions: which pod runs, with which args, env and config, and the node
// status patch that moves a Node to the latest counts.
import type { V1Container, V1Pod } from "@kubernetes/client-node";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { validateDevicePluginConfig } from "../../src/api/validate.js";
import type { DevicePluginConfig } from "../../src/api/v1beta1/config.js";
import { nodeResourcePatch, type AdvertisedResource } from "../../tools/kubelet-sim/node-status.js";
import {
  configMapFileAt,
  desiredPluginPods,
  imageNodeFlags,
  expandVariableReferences,
  mapBackendHostPaths,
  resolveContainerEnv,
  rewritePluginArgs,
  simulatedPluginConfigText,
  simulatedPluginEnv,
} from "../../tools/kubelet-sim/plugin-pod.js";

const paths = { configFile: "/sim/config.yaml", devicePluginDir: "/sim/dp", pluginsRegistryDir: "/sim/reg" };
const defaultsAdded = [
  "--device-plugin-dir",
  "/sim/dp",
  "--plugins-registry-dir",
  "/sim/reg",
  "--metrics-addr",
  "0",
  "--health-addr",
  "127.0.0.1:0",
];

describe("rewritePluginArgs", () => {
  it.each([
    {
      name: "the rendered args: every node-specific flag replaced, the rest kept in order",
      args: [
        "plugin",
        "--config",
        "/etc/dpo/config.yaml",
        "--registration",
        "watcher",
        "--metrics-addr",
        ":8080",
        "--health-addr",
        ":8081",
      ],
      want: [
        "plugin",
        "--config",
        "/sim/config.yaml",
        "--registration",
        "watcher",
        "--metrics-addr",
        "0",
        "--health-addr",
        "127.0.0.1:0",
        "--device-plugin-dir",
        "/sim/dp",
        "--plugins-registry-dir",
        "/sim/reg",
      ],
    },
    {
      name: "--flag=value keeps its form",
      args: ["plugin", "--config=/etc/dpo/c.yaml", "--device-plugin-dir=/var/lib/kubelet/device-plugins"],
      want: [
        "plugin",
        "--config=/sim/config.yaml",
        "--device-plugin-dir=/sim/dp",
        "--plugins-registry-dir",
        "/sim/reg",
        "--metrics-addr",
        "0",
        "--health-addr",
        "127.0.0.1:0",
      ],
    },
    {
      name: "defaults are the real host's, so missing flags are added",
      args: ["plugin"],
      want: ["plugin", "--config", "/sim/config.yaml", ...defaultsAdded],
    },
  ])("$name", ({ args, want }) => {
    expect(rewritePluginArgs(args, paths)).toEqual(want);
  });
});

describe("rewritePluginArgs with a node CDI directory", () => {
  it("points --cdi-dir at the node's tree, and adds it when the pod leaves it to the host default", () => {
    const withCdi = { ...paths, cdiDir: "/sim/cdi" };
    const rendered = ["plugin", "--config", "/etc/dpo/config.yaml", "--cdi-dir", "/var/run/cdi"];
    expect(rewritePluginArgs(rendered, withCdi)).toEqual([
      "plugin",
      "--config",
      "/sim/config.yaml",
      "--cdi-dir",
      "/sim/cdi",
      ...defaultsAdded,
    ]);
    expect(rewritePluginArgs(["plugin"], withCdi)).toContain("/sim/cdi");
  });
});

describe("the PodResources socket and the metrics address", () => {
  const withNode = {
    ...paths,
    podResourcesSocket: "/sim/pod-resources/kubelet.sock",
    healthAddr: "127.0.0.1:4242",
    metricsAddr: "127.0.0.1:4242",
  };

  it("replaces --pod-resources-socket where the pod names it, in either form", () => {
    expect(
      rewritePluginArgs(
        ["plugin", "--pod-resources-socket", "/var/lib/kubelet/pod-resources/kubelet.sock"],
        withNode,
      ),
    ).toEqual(expect.arrayContaining(["--pod-resources-socket", "/sim/pod-resources/kubelet.sock"]));
    expect(rewritePluginArgs(["plugin", "--pod-resources-socket=/x.sock"], withNode)).toContain(
      "--pod-resources-socket=/sim/pod-resources/kubelet.sock",
    );
  });

  it("never adds it (an older build would refuse the flag) but passes it in the flag's environment variable", () => {
    const args = rewritePluginArgs(["plugin", "--config", "/etc/dpo/config.yaml"], withNode);
    expect(args.some((a) => a.startsWith("--pod-resources-socket"))).toBe(false);
    expect(simulatedPluginEnv(withNode)).toEqual({
      DPO_POD_RESOURCES_SOCKET: "/sim/pod-resources/kubelet.sock",
    });
    expect(simulatedPluginEnv(paths)).toEqual({});
  });

  it("serves /metrics on the probe port when asked, and turns metrics off otherwise", () => {
    const args = rewritePluginArgs(["plugin", "--metrics-addr", ":8080"], withNode);
    expect(args).toEqual(
      expect.arrayContaining(["--metrics-addr", "127.0.0.1:4242", "--health-addr", "127.0.0.1:4242"]),
    );
    expect(rewritePluginArgs(["plugin", "--metrics-addr", ":8080"], paths)).toEqual(
      expect.arrayContaining(["--metrics-addr", "0"]),
    );
  });
});

const pod: V1Pod = {
  metadata: {
    name: "dpo-foo-abcde",
    namespace: "dpo-system",
    uid: "uid-1",
    labels: { "dpo.dev/config": "foo" },
    annotations: { note: "x" },
  },
  spec: {
    nodeName: "node-a",
    serviceAccountName: "dpo-plugin",
    containers: [],
    volumes: [
      { name: "config", configMap: { name: "dpo-foo" } },
      { name: "picked", configMap: { name: "other", items: [{ key: "long-key", path: "short.yaml" }] } },
    ],
  },
  status: { phase: "Running", podIP: "10.0.0.5" },
};

describe("resolveContainerEnv", () => {
  it("resolves literal values, downward-API fields and $(VAR) references; reports what it cannot", () => {
    const container: V1Container = {
      name: "plugin",
      env: [
        { name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
        { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
        { name: "CONFIG_LABEL", valueFrom: { fieldRef: { fieldPath: "metadata.labels['dpo.dev/config']" } } },
        { name: "DPO_LOG_LEVEL", value: "debug" },
        { name: "WHERE", value: "$(NODE_NAME)/$(MISSING)/$$(NODE_NAME)" },
        { name: "SECRET", valueFrom: { secretKeyRef: { name: "s", key: "k" } } },
      ],
    };
    expect(resolveContainerEnv(pod, container)).toEqual({
      env: {
        NODE_NAME: "node-a",
        POD_NAMESPACE: "dpo-system",
        CONFIG_LABEL: "foo",
        DPO_LOG_LEVEL: "debug",
        WHERE: "node-a/$(MISSING)/$(NODE_NAME)",
      },
      unresolved: ["SECRET"],
    });
  });

  it.each([
    ["$(A)-$(B)", { A: "1" }, "1-$(B)"],
    ["$$(A)", { A: "1" }, "$(A)"],
    ["plain", {}, "plain"],
  ])("expands %s", (text, env, want) => {
    expect(expandVariableReferences(text, env)).toBe(want);
  });
});

describe("configMapFileAt", () => {
  const container: V1Container = {
    name: "plugin",
    volumeMounts: [
      { name: "config", mountPath: "/etc/dpo" },
      { name: "picked", mountPath: "/etc/picked/" },
    ],
  };
  it.each([
    { path: "/etc/dpo/config.yaml", want: { volume: "config", configMap: "dpo-foo", key: "config.yaml" } },
    { path: "/etc/picked/short.yaml", want: { volume: "picked", configMap: "other", key: "long-key" } },
    { path: "/etc/picked/absent.yaml", want: undefined },
    { path: "/etc/dpox/config.yaml", want: undefined },
  ])("$path", ({ path, want }) => {
    expect(configMapFileAt(pod, container, path)).toEqual(want);
  });
});

function podOf(name: string, node: string, created: string, extra: Partial<V1Pod["metadata"]> = {}): V1Pod {
  return {
    metadata: {
      name,
      namespace: "ns",
      uid: `uid-${name}`,
      labels: { "dpo.dev/config": "foo" },
      creationTimestamp: new Date(created),
      ...extra,
    },
    spec: { nodeName: node, containers: [] },
    status: { phase: "Running" },
  };
}

describe("desiredPluginPods", () => {
  it.each([
    {
      name: "the newer of two pods of one DaemonSet on the node (a rollout)",
      pods: [podOf("old", "n1", "2024-01-01T00:00:00Z"), podOf("new", "n1", "2024-01-01T00:01:00Z")],
      want: { "ns/foo": "new" },
    },
    {
      name: "pods of other nodes, terminating pods and finished pods do not count",
      pods: [
        podOf("elsewhere", "n2", "2024-01-01T00:00:00Z"),
        podOf("going", "n1", "2024-01-01T00:00:00Z", { deletionTimestamp: new Date("2024-01-01T00:02:00Z") }),
        { ...podOf("failed", "n1", "2024-01-01T00:00:00Z"), status: { phase: "Failed" } },
        { ...podOf("done", "n1", "2024-01-01T00:00:00Z"), status: { phase: "Succeeded" } },
      ],
      want: {},
    },
    {
      // The kubelet starts the containers of a pod bound to it; the pod is Running only after that.
      name: "a Pending pod bound to the node is started",
      pods: [{ ...podOf("pending", "n1", "2024-01-01T00:00:00Z"), status: { phase: "Pending" } }],
      want: { "ns/foo": "pending" },
    },
    {
      name: "one slot per config",
      pods: [
        podOf("a", "n1", "2024-01-01T00:00:00Z"),
        podOf("b", "n1", "2024-01-01T00:00:00Z", { labels: { "dpo.dev/config": "bar" } }),
      ],
      want: { "ns/foo": "a", "ns/bar": "b" },
    },
  ])("$name", ({ pods, want }) => {
    const desired = desiredPluginPods(pods, "n1");
    expect(Object.fromEntries([...desired].map(([slot, p]) => [slot, p.metadata?.name]))).toEqual(want);
  });
});

function config(backend: Record<string, unknown>): DevicePluginConfig {
  const result = validateDevicePluginConfig({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: "foo", uid: "u" },
    spec: { resourceName: "example.com/foo", backend },
  });
  if (!result.ok) throw new Error(JSON.stringify(result.errors));
  return result.value;
}

describe("mapBackendHostPaths", () => {
  const intoTree = (path: string): string => `/tree${path}`;
  it.each([
    {
      name: "mock health file",
      backend: { type: "Mock", mock: { devices: 1, healthFile: "/run/dpo/health.json" } },
      want: { mock: { healthFile: "/tree/run/dpo/health.json" } },
    },
    {
      name: "devFS root, defaulted to / (globs stay relative to it)",
      backend: { type: "DevFS", devFS: { paths: [{ glob: "/dev/ttyUSB*" }] } },
      want: { devFS: { root: "/tree/", paths: [{ glob: "/dev/ttyUSB*" }] } },
    },
    {
      name: "PCI sysfs and dev roots, defaulted",
      backend: { type: "PCI", pci: { vendor: "10de" } },
      want: { pci: { sysfsRoot: "/tree/sys", devRoot: "/tree/dev" } },
    },
  ])("$name", ({ backend, want }) => {
    expect(mapBackendHostPaths(config(backend), intoTree).spec.backend).toMatchObject(want);
  });

  it("passes a config the plugin would refuse through untouched", () => {
    const text = "apiVersion: dpo.dev/v1beta1\nkind: DevicePluginConfig\nmetadata: {name: x}\nspec: {}\n";
    expect(simulatedPluginConfigText(text, intoTree)).toBe(text);
  });
});

describe("nodeResourcePatch", () => {
  const r = "example.com/foo";
  const s = "example.com/bar";
  it.each<{
    name: string;
    written: [string, AdvertisedResource][];
    desired: [string, AdvertisedResource][];
    want: unknown;
  }>([
    {
      name: "nothing new",
      written: [[r, { capacity: 4, allocatable: 4 }]],
      desired: [[r, { capacity: 4, allocatable: 4 }]],
      want: undefined,
    },
    {
      name: "only what changed",
      written: [
        [r, { capacity: 4, allocatable: 4 }],
        [s, { capacity: 2, allocatable: 2 }],
      ],
      desired: [
        [r, { capacity: 4, allocatable: 3 }],
        [s, { capacity: 2, allocatable: 2 }],
      ],
      want: { status: { capacity: { [r]: "4" }, allocatable: { [r]: "3" } } },
    },
    {
      name: "a resource taken out with null",
      written: [[r, { capacity: 0, allocatable: 0 }]],
      desired: [[r, null]],
      want: { status: { capacity: { [r]: null }, allocatable: { [r]: null } } },
    },
    {
      name: "a first write",
      written: [],
      desired: [[r, { capacity: 4, allocatable: 0 }]],
      want: { status: { capacity: { [r]: "4" }, allocatable: { [r]: "0" } } },
    },
  ])("$name", ({ written, desired, want }) => {
    expect(nodeResourcePatch(new Map(written), new Map(desired))).toEqual(want);
  });
});

describe("imageNodeFlags", () => {
  it("reads the Node.js flags of this repository's image from its Dockerfile", () => {
    const dockerfile = readFileSync(join(import.meta.dirname, "..", "..", "Dockerfile"), "utf8");
    expect(imageNodeFlags(dockerfile)).toEqual([
      "--max-semi-space-size=1",
      "--min-semi-space-size=1",
      "--lite-mode",
      "--no-icu-timezone-data",
    ]);
  });

  it.each([
    { name: "no ENTRYPOINT", text: 'FROM node\nCMD ["x"]', want: [] },
    { name: "not node", text: 'ENTRYPOINT ["/bin/dpo", "--lite-mode"]', want: [] },
    { name: "no flags", text: 'ENTRYPOINT ["node", "/app/dist/dpo.js"]', want: [] },
  ])("$name: $want", ({ text, want }) => {
    expect(imageNodeFlags(text)).toEqual(want);
  });
});
