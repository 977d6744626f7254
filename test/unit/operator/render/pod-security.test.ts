// Pod Security Standards on dpo's pods, judged by the checks of k8s.io/pod-security-admission (the code the
// API server's PodSecurity admission runs, tools/pod-security): the plugin pods fail only what the kubelet's
// directories force (and NVIDIA's XID reader its one capability); the operator pod passes `restricted`.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { V1DaemonSet, V1Deployment, V1PodTemplateSpec } from "@kubernetes/client-node";
import { parse, parseAllDocuments } from "yaml";
import { beforeAll, describe, expect, it } from "vitest";
import { DevicePluginConfigSchema, type DevicePluginConfig } from "../../../../src/api/v1beta1/config.js";
import type { DevicePluginConfigSpecInput } from "../../../../src/api/v1beta1/spec.js";
import type { RegistrationMode } from "../../../../src/contract/registration.js";
import type { RenderContext } from "../../../../src/operator/render/context.js";
import { renderPluginDaemonSet } from "../../../../src/operator/render/daemonset.js";
import {
  buildPodSecurity,
  podSecurity,
  type PodSecurityInput,
  type PodSecurityLevel,
  type PodSecurityResult,
} from "../../../../tools/pod-security/harness.js";

/** The policy's newest rules, and those of the pinned and the oldest supported Kubernetes minors (tools/cluster/versions.env). */
const VERSIONS = ["latest", "v1.37", "v1.35"];
const LEVELS: PodSecurityLevel[] = ["baseline", "restricted"];

let binary: string;
beforeAll(async () => {
  binary = await buildPodSecurity();
}, 600_000);

function config(spec: Partial<DevicePluginConfigSpecInput>): DevicePluginConfig {
  return DevicePluginConfigSchema.parse({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: "psa", uid: "uid-1", generation: 1 },
    spec: { resourceName: "hardware-vendor.example/foo", ...spec },
  });
}

function renderContext(registrationMode: RegistrationMode): RenderContext {
  return {
    namespace: "dpo-system",
    operatorImage: "registry.example/dpo:1.2.3",
    pluginServiceAccount: "dpo-plugin",
    registrationMode,
  };
}

function podOf(name: string, template: V1PodTemplateSpec | undefined): PodSecurityInput {
  if (template?.spec === undefined) throw new Error(`${name}: no pod template`);
  return { name, metadata: template.metadata, spec: template.spec };
}

function pluginPod(name: string, spec: Partial<DevicePluginConfigSpecInput>, mode: RegistrationMode) {
  const ds: V1DaemonSet = renderPluginDaemonSet(config(spec), renderContext(mode));
  return podOf(name, ds.spec?.template);
}

/** Failing check IDs per level and version, in the harness's order, e.g. `restricted@latest`. */
function failingChecks(result: PodSecurityResult): Record<string, string[]> {
  return Object.fromEntries(
    result.verdicts.map((v) => [`${v.level}@${v.version}`, v.failures.map((f) => f.check).sort()]),
  );
}

function expectAtEveryVersion(perLevel: Record<PodSecurityLevel, string[]>): Record<string, string[]> {
  return Object.fromEntries(
    LEVELS.flatMap((level) => VERSIONS.map((v) => [`${level}@${v}`, [...perLevel[level]].sort()])),
  );
}

/**
 * The exceptions every plugin pod has, and why (docs/deploy.md, "Pod Security"): the kubelet's
 * device-plugins directory (and plugins_registry, pod-resources) are host directories, so hostPath volumes;
 * they are root-owned 0750, so uid 0. At `restricted` the policy reports hostPath under restrictedVolumes
 * (which overrides baseline's hostPathVolumes there) and root under runAsNonRoot and runAsUser.
 */
const KUBELET_DIRECTORIES = {
  baseline: ["hostPathVolumes"],
  restricted: ["restrictedVolumes", "runAsNonRoot", "runAsUser"],
};
/** NVIDIA with `dmesgPath`: CAP_SYSLOG to read XID events from the kernel log, a non-default capability. */
const WITH_SYSLOG = {
  baseline: [...KUBELET_DIRECTORIES.baseline, "capabilities_baseline"],
  restricted: [...KUBELET_DIRECTORIES.restricted, "capabilities_restricted"],
};

const PLUGIN_CASES: {
  name: string;
  spec: Partial<DevicePluginConfigSpecInput>;
  expected: Record<PodSecurityLevel, string[]>;
}[] = [
  { name: "Mock", spec: { backend: { type: "Mock", mock: { devices: 4 } } }, expected: KUBELET_DIRECTORIES },
  {
    name: "Mock with a health file",
    spec: { backend: { type: "Mock", mock: { devices: 2, healthFile: "/run/dpo/health.json" } } },
    expected: KUBELET_DIRECTORIES,
  },
  {
    name: "DevFS",
    spec: { backend: { type: "DevFS", devFS: { paths: [{ glob: "/dev/ttyUSB*" }] } } },
    expected: KUBELET_DIRECTORIES,
  },
  {
    name: "DevFS under another root",
    spec: { backend: { type: "DevFS", devFS: { root: "/host", paths: [{ glob: "/dev/ttyUSB*" }] } } },
    expected: KUBELET_DIRECTORIES,
  },
  { name: "PCI", spec: { backend: { type: "PCI", pci: { vendor: "10de" } } }, expected: KUBELET_DIRECTORIES },
  {
    name: "PCI with CDI",
    spec: { backend: { type: "PCI", pci: { vendor: "10de" } }, cdi: { enabled: true } },
    expected: KUBELET_DIRECTORIES,
  },
  { name: "NVIDIA", spec: { backend: { type: "NVIDIA", nvidia: {} } }, expected: KUBELET_DIRECTORIES },
  {
    name: "NVIDIA with XID events",
    spec: { backend: { type: "NVIDIA", nvidia: { dmesgPath: "/usr/bin/dmesg" } } },
    expected: WITH_SYSLOG,
  },
  {
    name: "NVIDIA reading XIDs from /dev/kmsg",
    spec: { backend: { type: "NVIDIA", nvidia: { kmsgPath: "/dev/kmsg" } } },
    expected: WITH_SYSLOG,
  },
  {
    name: "NVIDIA with XID events and CDI",
    spec: { backend: { type: "NVIDIA", nvidia: { dmesgPath: "/usr/bin/dmesg" } }, cdi: { enabled: true } },
    expected: WITH_SYSLOG,
  },
];
const MODES: RegistrationMode[] = ["kubelet", "watcher"];
const PLUGIN_MATRIX = PLUGIN_CASES.flatMap((c) => MODES.map((mode) => ({ ...c, mode })));

describe("Pod Security of the plugin pods, per backend and registration mode", () => {
  it.each(PLUGIN_MATRIX)(
    "$name, $mode registration: fails only the expected checks at baseline and restricted",
    async ({ name, spec, mode, expected }) => {
      const pod = pluginPod(name, spec, mode);
      const [result] = await podSecurity(binary, [pod], { levels: LEVELS, versions: VERSIONS });
      expect(result!.verdicts.every((v) => v.checks > 0 && !v.allowed)).toBe(true);
      expect(failingChecks(result!)).toEqual(expectAtEveryVersion(expected));

      // The volume failures name exactly the pod's hostPath volumes (quoted in the detail), none other.
      const hostPathVolumes = (pod.spec.volumes ?? []).filter((v) => v.hostPath).map((v) => v.name);
      expect(hostPathVolumes).toContain("device-plugins");
      if (mode === "watcher") expect(hostPathVolumes).toContain("plugins-registry");
      for (const verdict of result!.verdicts) {
        const failure = verdict.failures.find((f) => /^(hostPathVolumes|restrictedVolumes)$/.test(f.check));
        const quoted = [...(failure?.detail ?? "").matchAll(/"([^"]+)"/g)].map((m) => m[1]);
        expect(
          quoted.filter((q) => q !== "hostPath").sort(),
          `${verdict.level}@${verdict.version}: ${failure?.detail}`,
        ).toEqual([...hostPathVolumes].sort());
      }
    },
  );
});

/** DRA mode: the same exceptions, from other kubelet directories (plugins, plugins_registry, CDI). */
const DRA_CASES: { name: string; spec: Partial<DevicePluginConfigSpecInput> }[] = [
  { name: "Mock", spec: { backend: { type: "Mock", mock: { devices: 4 } } } },
  { name: "DevFS", spec: { backend: { type: "DevFS", devFS: { paths: [{ glob: "/dev/ttyUSB*" }] } } } },
  { name: "PCI", spec: { backend: { type: "PCI", pci: { vendor: "10de" } } } },
];

describe("Pod Security of the plugin pods in DRA mode", () => {
  it.each(DRA_CASES.flatMap((c) => MODES.map((mode) => ({ ...c, mode }))))(
    "$name, $mode registration: fails only what the kubelet's directories force",
    async ({ name, spec, mode }) => {
      const pod = pluginPod(name, { ...spec, publish: "DRA", dra: { driverName: "foo.example.com" } }, mode);
      const [result] = await podSecurity(binary, [pod], { levels: LEVELS, versions: VERSIONS });
      expect(failingChecks(result!)).toEqual(expectAtEveryVersion(KUBELET_DIRECTORIES));
      const hostPathVolumes = (pod.spec.volumes ?? []).filter((v) => v.hostPath).map((v) => v.name);
      expect(hostPathVolumes).toEqual(
        expect.arrayContaining(["dra-plugins", "plugins-registry", "cdi-specs"]),
      );
      expect(hostPathVolumes).not.toContain("device-plugins");
    },
  );
});

describe("the harness sees what it should (a template made worse is flagged)", () => {
  const base = pluginPod("Mock", { backend: { type: "Mock", mock: { devices: 4 } } }, "kubelet");
  const worse = (name: string, change: (pod: PodSecurityInput) => void): PodSecurityInput => {
    const pod = structuredClone({ ...base, name });
    change(pod);
    return pod;
  };
  const container = (pod: PodSecurityInput) => pod.spec.containers[0]!;

  it.each([
    {
      change: "an added capability",
      pod: worse("cap", (p) => {
        container(p).securityContext!.capabilities!.add = ["NET_ADMIN"];
      }),
      baseline: ["capabilities_baseline"],
      restricted: ["capabilities_restricted"],
    },
    {
      change: "hostNetwork",
      pod: worse("hostnet", (p) => {
        p.spec.hostNetwork = true;
      }),
      baseline: ["hostNamespaces"],
      restricted: ["hostNamespaces"],
    },
    {
      change: "a hostPort",
      pod: worse("hostport", (p) => {
        container(p).ports![0]!.hostPort = 8080;
      }),
      baseline: ["hostPorts"],
      restricted: ["hostPorts"],
    },
    {
      change: "privileged",
      pod: worse("privileged", (p) => {
        container(p).securityContext!.privileged = true;
        container(p).securityContext!.allowPrivilegeEscalation = true;
      }),
      baseline: ["privileged"],
      restricted: ["privileged", "allowPrivilegeEscalation"],
    },
    {
      change: "no seccomp profile",
      pod: worse("seccomp", (p) => {
        delete container(p).securityContext!.seccompProfile;
      }),
      baseline: [],
      restricted: ["seccompProfile_restricted"],
    },
  ])("$change", async ({ pod, baseline, restricted }) => {
    const [result] = await podSecurity(binary, [pod], { versions: VERSIONS });
    expect(failingChecks(result!)).toEqual(
      expectAtEveryVersion({
        baseline: [...KUBELET_DIRECTORIES.baseline, ...baseline],
        restricted: [...KUBELET_DIRECTORIES.restricted, ...restricted],
      }),
    );
  });

  it("refuses input it would otherwise misread: an unknown field is an error, not a pass", async () => {
    const misspelt = { ...base, spec: { ...base.spec, hostNetwrok: true } } as unknown as PodSecurityInput;
    await expect(podSecurity(binary, [misspelt])).rejects.toThrow(/unknown field "hostNetwrok"/);
  });
});

/**
 * The operator Deployment as config/manager lists it; config/default's kustomization only sets the
 * namespace, labels and images, none of which Pod Security reads. (test/integration/manifests.test.ts
 * puts the kustomize-rendered pod through the API server's own PodSecurity admission.)
 */
function operatorDeployment(): V1Deployment {
  const dir = join(import.meta.dirname, "..", "..", "..", "..", "config", "manager");
  const { resources } = parse(readFileSync(join(dir, "kustomization.yaml"), "utf8")) as {
    resources: string[];
  };
  const deployments = resources.flatMap((file) =>
    parseAllDocuments(readFileSync(join(dir, file), "utf8"))
      .map((doc) => doc.toJS() as { kind?: string } | null)
      .filter((obj): obj is V1Deployment => obj?.kind === "Deployment"),
  );
  expect(deployments.map((d) => d.metadata?.name)).toEqual(["dpo-operator"]);
  return deployments[0]!;
}

describe("Pod Security of the operator pod", () => {
  it("passes restricted (and so baseline) with no failure, at every version", async () => {
    const [result] = await podSecurity(binary, [podOf("operator", operatorDeployment().spec?.template)], {
      versions: VERSIONS,
    });
    expect(result!.verdicts).toHaveLength(LEVELS.length * VERSIONS.length);
    for (const verdict of result!.verdicts) {
      expect(verdict.checks).toBeGreaterThan(0);
      expect(verdict, `${verdict.level}@${verdict.version}`).toMatchObject({ allowed: true, failures: [] });
    }
  });
});
