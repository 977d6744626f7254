// The operator's plugin policy: which images and backend host directories a config may use, each refusal naming its field.
import { describe, expect, it } from "vitest";
import {
  DevicePluginConfigSchema,
  type DevicePluginConfigInput,
} from "../../../../src/api/v1beta1/config.js";
import type {
  DevicePluginConfigSpec,
  DevicePluginConfigSpecInput,
} from "../../../../src/api/v1beta1/spec.js";
import { OPERATOR_FLAGS } from "../../../../src/cli/operator.js";
import { backendPodNeeds } from "../../../../src/operator/render/backends.js";
import {
  DEFAULT_PLUGIN_HOST_PATHS,
  effectivePluginPolicy,
  imageAllowed,
  imageRepository,
  pluginPolicyFromFlags,
  pluginPolicyRefusals,
  type PluginPolicy,
} from "../../../../src/operator/render/plugin-policy.js";

const OPERATOR_IMAGE = "ghcr.io/dpo-dev/dpo:1.2.3";
const DEFAULT_POLICY = pluginPolicyFromFlags("", "", OPERATOR_IMAGE);

function spec(extra: Partial<DevicePluginConfigSpecInput> = {}): DevicePluginConfigSpec {
  const input: DevicePluginConfigInput = {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: "foo" },
    spec: {
      resourceName: "hardware-vendor.example/foo",
      backend: { type: "Mock", mock: { devices: 2 } },
      ...extra,
    },
  };
  return DevicePluginConfigSchema.parse(input).spec;
}

const fields = (s: DevicePluginConfigSpec, policy: PluginPolicy = DEFAULT_POLICY) =>
  pluginPolicyRefusals(s, policy).map((r) => r.field);

describe("imageRepository", () => {
  it.each([
    ["ghcr.io/dpo-dev/dpo:1.2.3", "ghcr.io/dpo-dev/dpo"],
    ["ghcr.io/dpo-dev/dpo@sha256:abc", "ghcr.io/dpo-dev/dpo"],
    ["ghcr.io/dpo-dev/dpo:1.2.3@sha256:abc", "ghcr.io/dpo-dev/dpo"],
    ["registry.example:5000/dpo", "registry.example:5000/dpo"],
    ["registry.example:5000/dpo:1", "registry.example:5000/dpo"],
    ["dpo", "dpo"],
  ])("%s is in %s", (image, repository) => {
    expect(imageRepository(image)).toBe(repository);
  });
});

describe("the default policy", () => {
  it("allows the operator's own repository, any tag or digest, and nothing else", () => {
    expect(DEFAULT_POLICY.images).toEqual(["ghcr.io/dpo-dev/dpo"]);
    expect(imageAllowed("ghcr.io/dpo-dev/dpo:9.9.9", DEFAULT_POLICY.images)).toBe(true);
    expect(imageAllowed("ghcr.io/dpo-dev/dpo@sha256:abc", DEFAULT_POLICY.images)).toBe(true);
    expect(imageAllowed("ghcr.io/dpo-dev/dpo-evil:1", DEFAULT_POLICY.images)).toBe(false);
    expect(imageAllowed("ghcr.io/dpo-dev/dpo/sub:1", DEFAULT_POLICY.images)).toBe(false);
    expect(imageAllowed("registry.example/evil:1", DEFAULT_POLICY.images)).toBe(false);
  });

  it("is what a render context without a policy gets", () => {
    expect(effectivePluginPolicy({ operatorImage: OPERATOR_IMAGE })).toEqual(DEFAULT_POLICY);
    expect(DEFAULT_POLICY.hostPaths).toEqual(DEFAULT_PLUGIN_HOST_PATHS);
  });

  it.each<[string, Partial<DevicePluginConfigSpecInput>]>([
    ["Mock without a health file", {}],
    [
      "PCI with a sysfsRoot of / (not mounted)",
      { backend: { type: "PCI", pci: { vendor: "10de", sysfsRoot: "/" } } },
    ],
    [
      "Mock with its health file in /run/dpo",
      { backend: { type: "Mock", mock: { devices: 1, healthFile: "/run/dpo/h.json" } } },
    ],
    [
      "DevFS under /dev",
      {
        backend: {
          type: "DevFS",
          devFS: { paths: [{ glob: "/dev/ttyUSB*" }, { glob: "/dev/serial/by-id/*" }] },
        },
      },
    ],
    ["PCI with its defaults", { backend: { type: "PCI", pci: { vendor: "10de" } } }],
    [
      "NVIDIA with its defaults and dmesg",
      { backend: { type: "NVIDIA", nvidia: { dmesgPath: "/usr/bin/dmesg" } } },
    ],
    ["an empty image (the operator's own)", { plugin: { image: "" } }],
    ["the operator's image at another tag", { plugin: { image: "ghcr.io/dpo-dev/dpo:1.2.4" } }],
  ])("allows what the backends need today: %s", (_what, extra) => {
    expect(pluginPolicyRefusals(spec(extra), DEFAULT_POLICY)).toEqual([]);
  });

  it.each<[string, Partial<DevicePluginConfigSpecInput>, string[]]>([
    ["another image", { plugin: { image: "registry.example/evil:1" } }, ["spec.plugin.image"]],
    [
      "a Mock health file in /etc",
      { backend: { type: "Mock", mock: { devices: 1, healthFile: "/etc/kubernetes/h.json" } } },
      ["spec.backend.mock.healthFile"],
    ],
    [
      "a Mock health file in /run (containerd's socket)",
      { backend: { type: "Mock", mock: { devices: 1, healthFile: "/run/h.json" } } },
      ["spec.backend.mock.healthFile"],
    ],
    [
      "a look-alike of /run/dpo",
      { backend: { type: "Mock", mock: { devices: 1, healthFile: "/run/dpo-x/h.json" } } },
      ["spec.backend.mock.healthFile"],
    ],
    [
      "a DevFS root of /var/lib/kubelet",
      { backend: { type: "DevFS", devFS: { root: "/var/lib/kubelet", paths: [{ glob: "/x/*" }] } } },
      ["spec.backend.devFS.root"],
    ],
    [
      "a DevFS glob under /etc",
      { backend: { type: "DevFS", devFS: { paths: [{ glob: "/dev/ttyUSB*" }, { glob: "/etc/ssl/*" }] } } },
      ["spec.backend.devFS.paths[1].glob"],
    ],
    [
      "a PCI sysfsRoot of /",
      { backend: { type: "PCI", pci: { vendor: "10de", sysfsRoot: "/var" } } },
      ["spec.backend.pci.sysfsRoot"],
    ],
    [
      "an NVIDIA devRoot of /root",
      { backend: { type: "NVIDIA", nvidia: { devRoot: "/root" } } },
      ["spec.backend.nvidia.devRoot"],
    ],
    [
      "nvidia-smi run from the host's /dev",
      { backend: { type: "NVIDIA", nvidia: { nvidiaSmiPath: "/dev/shm/nvidia-smi" } } },
      ["spec.backend.nvidia.nvidiaSmiPath"],
    ],
    [
      "dmesg run from the host's /sys",
      { backend: { type: "NVIDIA", nvidia: { dmesgPath: "/sys/x/dmesg" } } },
      ["spec.backend.nvidia.dmesgPath"],
    ],
  ])("refuses %s, naming the field", (_what, extra, want) => {
    expect(fields(spec(extra))).toEqual(want);
  });

  it("names the image, the allowed repositories and the flag in its message", () => {
    expect(
      pluginPolicyRefusals(spec({ plugin: { image: "registry.example/evil:1" } }), DEFAULT_POLICY),
    ).toEqual([
      {
        field: "spec.plugin.image",
        message:
          "registry.example/evil:1 is not in an allowed repository (ghcr.io/dpo-dev/dpo; the operator's --plugin-image-allow)",
      },
    ]);
  });

  it("checks every host directory a backend mounts (the render's own list)", () => {
    const allowed = new Set(DEFAULT_PLUGIN_HOST_PATHS);
    for (const extra of [
      { backend: { type: "Mock" as const, mock: { devices: 1, healthFile: "/etc/h.json" } } },
      { backend: { type: "DevFS" as const, devFS: { paths: [{ glob: "/etc/x*" }, { glob: "/opt/y/*" }] } } },
      { backend: { type: "PCI" as const, pci: { vendor: "10de", sysfsRoot: "/a", devRoot: "/b" } } },
      { backend: { type: "NVIDIA" as const, nvidia: { sysfsRoot: "/a", devRoot: "/b" } } },
    ]) {
      const s = spec(extra);
      const mounted = backendPodNeeds(s.backend).hostPaths.filter((m) => !allowed.has(m.hostPath));
      expect(pluginPolicyRefusals(s, DEFAULT_POLICY)).toHaveLength(mounted.length);
    }
  });
});

describe("pluginPolicyFromFlags", () => {
  it("takes repositories, prefixes and *, and directories", () => {
    const policy = pluginPolicyFromFlags(
      "registry.example/team/, ghcr.io/dpo-dev/dpo,*",
      "/dev,/sys/,/run/dpo,/opt/health",
      OPERATOR_IMAGE,
    );
    expect(policy).toEqual({
      images: ["registry.example/team/", "ghcr.io/dpo-dev/dpo", "*"],
      hostPaths: ["/dev", "/sys", "/run/dpo", "/opt/health"],
    });
    expect(fields(spec({ plugin: { image: "anything.example/x:1" } }), policy)).toEqual([]);
  });

  it("a prefix allows what is under it only", () => {
    const policy = pluginPolicyFromFlags("registry.example/team/", "", OPERATOR_IMAGE);
    expect(imageAllowed("registry.example/team/dpo:1", policy.images)).toBe(true);
    expect(imageAllowed("registry.example/team-b/dpo:1", policy.images)).toBe(false);
    // The operator's own repository is no longer implied once the flag lists repositories.
    expect(imageAllowed(OPERATOR_IMAGE, policy.images)).toBe(false);
  });

  it.each([
    [
      "ghcr.io/dpo-dev/dpo:1.2.3",
      "",
      "--plugin-image-allow: 'ghcr.io/dpo-dev/dpo:1.2.3' must be a repository",
    ],
    ["ghcr.io/dpo-dev/dpo@sha256:abc", "", "--plugin-image-allow: 'ghcr.io/dpo-dev/dpo@sha256:abc' must be"],
    ["", "dev", "--plugin-host-path-allow: 'dev' must be an absolute directory"],
  ])("refuses %j %j, naming the flag", (images, hostPaths, message) => {
    expect(() => pluginPolicyFromFlags(images, hostPaths, OPERATOR_IMAGE)).toThrow(message);
  });

  it("the operator has both flags, with DPO_ twins", () => {
    const names = OPERATOR_FLAGS.map((f) => `${f.name}=${f.env}`);
    expect(names).toContain("plugin-image-allow=DPO_PLUGIN_IMAGE_ALLOW");
    expect(names).toContain("plugin-host-path-allow=DPO_PLUGIN_HOST_PATH_ALLOW");
  });
});
