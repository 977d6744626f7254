// The SecurityContextConstraints of config/components/openshift against the plugin pods the operator renders
// (render/daemonset.ts), for every backend, registration mode and publish mode: the SCC allows what some
// rendered pod asks for and nothing else, field by field, so a change to either side that the other does not
// follow fails here. A pod made worse than any rendered one is refused by the SCC's fields.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { V1PodSpec } from "@kubernetes/client-node";
import { parse, parseAllDocuments } from "yaml";
import { describe, expect, it } from "vitest";
import { DevicePluginConfigSchema } from "../../../../src/api/v1beta1/config.js";
import type { DevicePluginConfigSpecInput } from "../../../../src/api/v1beta1/spec.js";
import type { RegistrationMode } from "../../../../src/contract/registration.js";
import { BACKEND_POD_PROFILES } from "../../../../src/operator/render/backends.js";
import { renderPluginDaemonSet } from "../../../../src/operator/render/daemonset.js";

const repoRoot = resolve(import.meta.dirname, "..", "..", "..", "..");
const COMPONENT = join(repoRoot, "config/components/openshift");

interface Scc {
  metadata: { name: string };
  users: string[];
  groups: string[];
  allowHostDirVolumePlugin: boolean;
  volumes: string[];
  allowHostNetwork: boolean;
  allowHostPID: boolean;
  allowHostIPC: boolean;
  allowHostPorts: boolean;
  allowPrivilegedContainer: boolean;
  allowPrivilegeEscalation: boolean;
  defaultAllowPrivilegeEscalation: boolean;
  requiredDropCapabilities: string[];
  allowedCapabilities: string[];
  defaultAddCapabilities: string[] | null;
  readOnlyRootFilesystem: boolean;
  runAsUser: { type: string; uid?: number };
  seLinuxContext: { type: string; seLinuxOptions?: { type?: string } };
  seccompProfiles: string[];
}

const scc = parse(readFileSync(join(COMPONENT, "security_context_constraints.yaml"), "utf8")) as Scc;

/** The pod spec of the plugin DaemonSet the operator renders for `spec`. */
function pluginPod(
  spec: Partial<DevicePluginConfigSpecInput>,
  registrationMode: RegistrationMode,
): V1PodSpec {
  const config = DevicePluginConfigSchema.parse({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: "scc", uid: "uid-1", generation: 1 },
    spec: { resourceName: "hardware-vendor.example/foo", ...spec },
  });
  const ds = renderPluginDaemonSet(config, {
    namespace: "dpo-system",
    operatorImage: "registry.example/dpo:1.2.3",
    pluginServiceAccount: "dpo-plugin",
    registrationMode,
  });
  return ds.spec!.template.spec!;
}

/** Every backend with and without its options that change the pod, in both publish modes. */
const BACKENDS: { name: string; spec: Partial<DevicePluginConfigSpecInput> }[] = [
  { name: "Mock", spec: { backend: { type: "Mock", mock: { devices: 4 } } } },
  {
    name: "Mock with a health file",
    spec: { backend: { type: "Mock", mock: { devices: 2, healthFile: "/run/dpo/health.json" } } },
  },
  { name: "DevFS", spec: { backend: { type: "DevFS", devFS: { paths: [{ glob: "/dev/ttyUSB*" }] } } } },
  {
    name: "DevFS under another root",
    spec: { backend: { type: "DevFS", devFS: { root: "/host", paths: [{ glob: "/dev/ttyUSB*" }] } } },
  },
  {
    name: "PCI with CDI",
    spec: { backend: { type: "PCI", pci: { vendor: "10de" } }, cdi: { enabled: true } },
  },
  { name: "NVIDIA", spec: { backend: { type: "NVIDIA", nvidia: {} } } },
  {
    name: "NVIDIA with XID events",
    spec: { backend: { type: "NVIDIA", nvidia: { dmesgPath: "/usr/bin/dmesg" } } },
  },
];
const MODES: RegistrationMode[] = ["kubelet", "watcher"];
const CASES = BACKENDS.flatMap((b) =>
  MODES.flatMap((mode) => [
    { name: `${b.name}, ${mode}`, pod: pluginPod(b.spec, mode) },
    {
      name: `${b.name}, ${mode}, DRA`,
      pod: pluginPod({ ...b.spec, publish: "DRA", dra: { driverName: "foo.example.com" } }, mode),
    },
  ]),
);

/** An SCC's name for a container's seccomp profile (`runtime/default`, `localhost/<file>`, `unconfined`). */
function seccompName(profile: { type: string; localhostProfile?: string } | undefined): string | undefined {
  if (profile === undefined) return undefined;
  if (profile.type === "RuntimeDefault") return "runtime/default";
  if (profile.type === "Localhost") return `localhost/${profile.localhostProfile}`;
  return "unconfined";
}

/** What one pod asks of the SCC that admits it, in the SCC's own terms. */
function asks(pod: V1PodSpec) {
  const containers = [...pod.containers, ...(pod.initContainers ?? [])];
  const contexts = containers.map((c) => c.securityContext ?? {});
  const volumes = new Set((pod.volumes ?? []).map((v) => Object.keys(v).find((k) => k !== "name")!));
  // The API server's ServiceAccount admission adds the token as a projected volume.
  if (pod.automountServiceAccountToken !== false) volumes.add("projected");
  return {
    volumes,
    hostDir: volumes.has("hostPath"),
    hostNetwork: pod.hostNetwork === true,
    hostPID: pod.hostPID === true,
    hostIPC: pod.hostIPC === true,
    hostPorts: containers.some((c) => (c.ports ?? []).some((p) => p.hostPort !== undefined)),
    privileged: contexts.some((s) => s.privileged === true),
    // Unset means allowed (Kubernetes' default), which the SCC would then have to allow.
    privilegeEscalation: contexts.some((s) => s.allowPrivilegeEscalation !== false),
    added: new Set(contexts.flatMap((s) => s.capabilities?.add ?? [])),
    dropsAll: contexts.every((s) => (s.capabilities?.drop ?? []).includes("ALL")),
    runAsUsers: new Set(contexts.map((s) => s.runAsUser ?? pod.securityContext?.runAsUser)),
    readOnlyRoot: contexts.every((s) => s.readOnlyRootFilesystem === true),
    seccomp: new Set(
      contexts.map((s) => seccompName(s.seccompProfile ?? pod.securityContext?.seccompProfile)),
    ),
    seLinuxTypes: new Set(
      contexts.flatMap((s) => s.seLinuxOptions?.type ?? pod.securityContext?.seLinuxOptions?.type ?? []),
    ),
  };
}

/** What any of the pods asks: the least an SCC admitting all of them must allow. */
function union(pods: readonly V1PodSpec[]) {
  const each = pods.map(asks);
  const all = <T>(f: (a: ReturnType<typeof asks>) => Iterable<T>) => new Set(each.flatMap((a) => [...f(a)]));
  return {
    volumes: all((a) => a.volumes),
    hostDir: each.some((a) => a.hostDir),
    hostNetwork: each.some((a) => a.hostNetwork),
    hostPID: each.some((a) => a.hostPID),
    hostIPC: each.some((a) => a.hostIPC),
    hostPorts: each.some((a) => a.hostPorts),
    privileged: each.some((a) => a.privileged),
    privilegeEscalation: each.some((a) => a.privilegeEscalation),
    added: all((a) => a.added),
    dropsAll: each.every((a) => a.dropsAll),
    runAsUsers: all((a) => a.runAsUsers),
    readOnlyRoot: each.every((a) => a.readOnlyRoot),
    seccomp: all((a) => a.seccomp),
    seLinuxTypes: all((a) => a.seLinuxTypes),
  };
}

const sorted = (values: Iterable<unknown>) => [...values].map(String).sort();

/**
 * The fields of an SCC that refuse `pod` (OpenShift's SCC admission, for the fields dpo's SCC sets): empty
 * when the SCC admits it. Not the whole admission: it does not default fields, only judges them.
 */
function refusals(s: Scc, pod: V1PodSpec): string[] {
  const a = asks(pod);
  const out: string[] = [];
  const volumes = new Set(s.volumes);
  for (const v of a.volumes) if (!volumes.has("*") && !volumes.has(v)) out.push(`volumes: ${v}`);
  if (a.hostDir && !s.allowHostDirVolumePlugin) out.push("allowHostDirVolumePlugin");
  if (a.hostNetwork && !s.allowHostNetwork) out.push("allowHostNetwork");
  if (a.hostPID && !s.allowHostPID) out.push("allowHostPID");
  if (a.hostIPC && !s.allowHostIPC) out.push("allowHostIPC");
  if (a.hostPorts && !s.allowHostPorts) out.push("allowHostPorts");
  if (a.privileged && !s.allowPrivilegedContainer) out.push("allowPrivilegedContainer");
  if (a.privilegeEscalation && !s.allowPrivilegeEscalation) out.push("allowPrivilegeEscalation");
  for (const c of a.added) if (!s.allowedCapabilities.includes(c)) out.push(`allowedCapabilities: ${c}`);
  if (s.requiredDropCapabilities.includes("ALL") && !a.dropsAll) out.push("requiredDropCapabilities: ALL");
  if (s.runAsUser.type === "MustRunAs" && sorted(a.runAsUsers).join() !== String(s.runAsUser.uid)) {
    out.push(`runAsUser: ${sorted(a.runAsUsers).join()}`);
  }
  if (s.readOnlyRootFilesystem && !a.readOnlyRoot) out.push("readOnlyRootFilesystem");
  for (const p of a.seccomp) if (!s.seccompProfiles.includes(String(p))) out.push(`seccompProfiles: ${p}`);
  return out;
}

describe("the dpo-plugin SCC and the rendered plugin pods", () => {
  const pods = CASES.map((c) => c.pod);
  const asked = union(pods);

  it("covers every backend the renderer knows", () => {
    const covered = new Set(BACKENDS.map((b) => (b.spec.backend as { type: string }).type));
    expect(sorted(covered)).toEqual(sorted(Object.keys(BACKEND_POD_PROFILES)));
  });

  it.each(CASES)("admits $name", ({ pod }) => {
    expect(refusals(scc, pod)).toEqual([]);
  });

  it("allows exactly what some rendered pod asks for: volumes, host namespaces, privilege", () => {
    expect(sorted(scc.volumes)).toEqual(sorted(asked.volumes));
    expect(scc.allowHostDirVolumePlugin).toBe(asked.hostDir);
    expect({
      allowHostNetwork: scc.allowHostNetwork,
      allowHostPID: scc.allowHostPID,
      allowHostIPC: scc.allowHostIPC,
      allowHostPorts: scc.allowHostPorts,
    }).toEqual({
      allowHostNetwork: asked.hostNetwork,
      allowHostPID: asked.hostPID,
      allowHostIPC: asked.hostIPC,
      allowHostPorts: asked.hostPorts,
    });
    expect(scc.allowPrivilegedContainer).toBe(asked.privileged);
    expect(scc.allowPrivilegeEscalation).toBe(asked.privilegeEscalation);
    expect(scc.defaultAllowPrivilegeEscalation).toBe(false);
  });

  it("allows exactly the capabilities some rendered pod adds, and requires every pod to drop ALL", () => {
    expect(sorted(scc.allowedCapabilities)).toEqual(sorted(asked.added));
    expect(asked.added.size).toBeGreaterThan(0); // NVIDIA's XID reader: SYSLOG
    expect(asked.dropsAll).toBe(true);
    expect(scc.requiredDropCapabilities).toEqual(["ALL"]);
    expect(scc.defaultAddCapabilities ?? []).toEqual([]);
  });

  it("runs as the uid, root filesystem and seccomp profile every rendered pod asks for", () => {
    expect(sorted(asked.runAsUsers)).toEqual(["0"]);
    expect(scc.runAsUser).toEqual({ type: "MustRunAs", uid: 0 });
    expect(scc.readOnlyRootFilesystem).toBe(asked.readOnlyRoot);
    expect(asked.readOnlyRoot).toBe(true);
    expect(sorted(scc.seccompProfiles)).toEqual(sorted(asked.seccomp));
  });

  it("gives the pods, which ask for no SELinux type, the device plugins' type", () => {
    expect(asked.seLinuxTypes.size).toBe(0);
    expect(scc.seLinuxContext).toEqual({
      type: "MustRunAs",
      seLinuxOptions: { type: "container_device_plugin_t" },
    });
  });

  it("is granted to nobody directly, only by RBAC `use` to the plugin's ServiceAccount", () => {
    expect(scc.users).toEqual([]);
    expect(scc.groups).toEqual([]);
    const docs = parseAllDocuments(readFileSync(join(COMPONENT, "scc_cluster_roles.yaml"), "utf8")).map(
      (d) =>
        d.toJS() as { metadata: { name: string }; rules: { resourceNames: string[]; verbs: string[] }[] },
    );
    const role = docs.find((d) => d.rules.some((r) => r.resourceNames.includes(scc.metadata.name)));
    expect(role?.rules).toEqual([
      {
        apiGroups: ["security.openshift.io"],
        resources: ["securitycontextconstraints"],
        resourceNames: [scc.metadata.name],
        verbs: ["use"],
      },
    ]);
    const bindings = parseAllDocuments(
      readFileSync(join(COMPONENT, "scc_cluster_role_bindings.yaml"), "utf8"),
    ).map((d) => d.toJS() as { roleRef: { name: string }; subjects: { kind: string; name: string }[] });
    expect(bindings.find((b) => b.roleRef.name === role?.metadata.name)?.subjects).toMatchObject([
      { kind: "ServiceAccount", name: "dpo-plugin" },
    ]);
  });
});

describe("a plugin pod made worse than any rendered one is refused", () => {
  const base = pluginPod({ backend: { type: "Mock", mock: { devices: 4 } } }, "kubelet");
  const worse = (change: (pod: V1PodSpec) => void): V1PodSpec => {
    const pod = structuredClone(base);
    change(pod);
    return pod;
  };
  const context = (pod: V1PodSpec) => pod.containers[0]!.securityContext!;

  it.each([
    {
      change: "privileged",
      pod: worse((p) => (context(p).privileged = true)),
      field: "allowPrivilegedContainer",
    },
    {
      change: "escalation allowed",
      pod: worse((p) => (context(p).allowPrivilegeEscalation = true)),
      field: "allowPrivilegeEscalation",
    },
    {
      change: "another capability",
      pod: worse((p) => (context(p).capabilities!.add = ["NET_ADMIN"])),
      field: "allowedCapabilities: NET_ADMIN",
    },
    {
      change: "an emptyDir volume",
      pod: worse((p) => p.volumes!.push({ name: "scratch", emptyDir: {} })),
      field: "volumes: emptyDir",
    },
    { change: "hostNetwork", pod: worse((p) => (p.hostNetwork = true)), field: "allowHostNetwork" },
    { change: "uid 1000", pod: worse((p) => (context(p).runAsUser = 1000)), field: "runAsUser: 1000" },
    {
      change: "a writable root filesystem",
      pod: worse((p) => (context(p).readOnlyRootFilesystem = false)),
      field: "readOnlyRootFilesystem",
    },
    {
      change: "no seccomp profile",
      pod: worse((p) => (context(p).seccompProfile = { type: "Unconfined" })),
      field: "seccompProfiles: unconfined",
    },
  ])("$change: $field", ({ pod, field }) => {
    expect(refusals(scc, pod)).toEqual([field]);
  });
});
