// Builders for the render tests: the operator's render context, a DevicePluginConfig (a Mock backend of 4
// devices unless the spec says otherwise), and a rendered DaemonSet's pod, container and host mounts.
import type { V1DaemonSet, V1Volume, V1VolumeMount } from "@kubernetes/client-node";
import {
  DevicePluginConfigSchema,
  type DevicePluginConfig,
  type DevicePluginConfigInput,
} from "../../../../src/api/v1beta1/config.js";
import type { DevicePluginConfigSpecInput } from "../../../../src/api/v1beta1/spec.js";
import type { RenderContext } from "../../../../src/operator/render/context.js";

export const ctx: RenderContext = {
  namespace: "dpo-system",
  operatorImage: "registry.example/dpo:1.2.3",
  pluginServiceAccount: "dpo-plugin",
  registrationMode: "kubelet",
};

/** A DevicePluginConfig as a user writes it: a Mock backend of 4 devices, with `spec` laid over it. */
export function configInput(
  spec: Partial<DevicePluginConfigSpecInput> = {},
  name = "example-foo",
): DevicePluginConfigInput {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name, uid: "uid-1", generation: 1 },
    spec: {
      resourceName: "hardware-vendor.example/foo",
      backend: { type: "Mock", mock: { devices: 4 } },
      ...spec,
    },
  };
}

/** The same config as the operator reads it, defaults applied. */
export function config(
  spec: Partial<DevicePluginConfigSpecInput> = {},
  name = "example-foo",
): DevicePluginConfig {
  return DevicePluginConfigSchema.parse(configInput(spec, name));
}

export function podSpec(ds: V1DaemonSet) {
  return ds.spec!.template.spec!;
}
export function container(ds: V1DaemonSet) {
  return podSpec(ds).containers[0]!;
}
/** hostPath volumes joined with their mounts, the way a reviewer reads them. */
export function hostMounts(ds: V1DaemonSet) {
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

export const devicePluginsDir = {
  host: "/var/lib/kubelet/device-plugins",
  type: "Directory",
  at: "/var/lib/kubelet/device-plugins",
  readOnly: false,
};
/** Read-only: the plugin only connects to the kubelet's PodResources socket. */
export const podResourcesDir = {
  host: "/var/lib/kubelet/pod-resources",
  type: "DirectoryOrCreate",
  at: "/var/lib/kubelet/pod-resources",
  readOnly: true,
};
