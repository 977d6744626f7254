// `dpo version`: the build's version, git commit and the kubelet API versions the runtime serves.
import { SUPPORTED_KUBELET_API_VERSIONS } from "../plugin-runtime/proto/wire.js";
import { buildInfo } from "../version.js";

export function formatVersion(json: boolean): string {
  const info = buildInfo();
  const data = {
    version: info.version,
    gitCommit: info.gitCommit,
    kubeletDevicePluginAPIVersions: [...SUPPORTED_KUBELET_API_VERSIONS],
    node: process.version,
  };
  if (json) return JSON.stringify(data, null, 2) + "\n";
  return (
    `dpo ${data.version}\n` +
    `git commit: ${data.gitCommit}\n` +
    `kubelet device plugin API: ${data.kubeletDevicePluginAPIVersions.join(", ")}\n` +
    `node: ${data.node}\n`
  );
}
