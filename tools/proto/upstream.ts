// Finds the kubelet's own .proto files (the contract ours must match) in the Go module cache.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

export const KUBELET_MODULE = "k8s.io/kubelet";
/** The kubelet release whose wire contract src/plugin-runtime/proto reproduces. */
export const KUBELET_MODULE_VERSION = "v0.37.2";

export interface UpstreamProtoFiles {
  readonly moduleDir: string;
  readonly devicePlugin: string;
  readonly pluginRegistration: string;
  readonly podResources: string;
  readonly draV1: string;
  readonly draV1beta1: string;
  readonly draHealthV1: string;
  readonly draHealthV1alpha1: string;
}

/** Paths of our copies, relative to the repository root. */
export const OUR_PROTO_FILES = {
  devicePlugin: "src/plugin-runtime/proto/deviceplugin/v1beta1/api.proto",
  pluginRegistration: "src/plugin-runtime/proto/pluginregistration/v1/api.proto",
  podResources: "src/plugin-runtime/proto/podresources/v1/api.proto",
  draV1: "src/plugin-runtime/proto/dra/v1/api.proto",
  draV1beta1: "src/plugin-runtime/proto/dra/v1beta1/api.proto",
  draHealthV1: "src/plugin-runtime/proto/dra-health/v1/api.proto",
  draHealthV1alpha1: "src/plugin-runtime/proto/dra-health/v1alpha1/api.proto",
} as const;

// `go` is often installed outside the default PATH (the official tarball unpacks to /usr/local/go).
function goSearchPath(): string {
  const extra = [process.env.GOROOT ? path.join(process.env.GOROOT, "bin") : undefined, "/usr/local/go/bin"];
  return [process.env.PATH ?? "", ...extra.filter((dir): dir is string => dir !== undefined)]
    .filter((dir) => dir !== "")
    .join(path.delimiter);
}

/** `go mod download` of one module version (or the module cache's copy): the directory it is in. */
function moduleDir(module: string, version: string): string {
  let output: string;
  try {
    output = execFileSync("go", ["mod", "download", "-json", `${module}@${version}`], {
      encoding: "utf8",
      // Outside any go.mod, so no module of this repository decides what gets resolved.
      cwd: os.tmpdir(),
      env: { ...process.env, PATH: goSearchPath() },
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 300_000,
    });
  } catch (error) {
    // With encoding "utf8" the captured stderr is a string.
    const stderr = (error as { stderr?: string }).stderr;
    throw new Error(`go mod download ${module}@${version} failed: ${stderr || (error as Error).message}`, {
      cause: error,
    });
  }
  const info = JSON.parse(output) as { Dir?: unknown; Error?: unknown };
  if (typeof info.Dir !== "string") {
    throw new Error(`go mod download ${module}@${version} gave no Dir: ${output}`);
  }
  return info.Dir;
}

/** Downloads (or reuses from the module cache) k8s.io/kubelet and returns where its .proto files are. */
export function locateUpstreamProtoFiles(version: string = KUBELET_MODULE_VERSION): UpstreamProtoFiles {
  const dir = moduleDir(KUBELET_MODULE, version);
  const files: UpstreamProtoFiles = {
    moduleDir: dir,
    devicePlugin: path.join(dir, "pkg/apis/deviceplugin/v1beta1/api.proto"),
    pluginRegistration: path.join(dir, "pkg/apis/pluginregistration/v1/api.proto"),
    podResources: path.join(dir, "pkg/apis/podresources/v1/api.proto"),
    draV1: path.join(dir, "pkg/apis/dra/v1/api.proto"),
    draV1beta1: path.join(dir, "pkg/apis/dra/v1beta1/api.proto"),
    draHealthV1: path.join(dir, "pkg/apis/dra-health/v1/api.proto"),
    draHealthV1alpha1: path.join(dir, "pkg/apis/dra-health/v1alpha1/api.proto"),
  };
  for (const file of [
    files.devicePlugin,
    files.pluginRegistration,
    files.podResources,
    files.draV1,
    files.draV1beta1,
    files.draHealthV1,
    files.draHealthV1alpha1,
  ]) {
    if (!existsSync(file)) throw new Error(`${KUBELET_MODULE}@${version} has no ${file}`);
  }
  return files;
}

/**
 * The kubelet's own source (k8s.io/kubernetes of the same release as k8s.io/kubelet): where it puts the
 * PodResources socket is not part of the API module, only of the kubelet.
 */
export const KUBERNETES_MODULE = "k8s.io/kubernetes";

export interface KubeletPodResourcesSources {
  /** pkg/kubelet/apis/podresources/constants.go: the socket's name without ".sock". */
  constants: string;
  /** pkg/kubelet/kubeletconfig/defaults.go (pkg/kubelet/config/ before 1.37): the directory's name under the kubelet's root directory. */
  defaults: string;
}

/** k8s.io/kubelet v0.X.Y is cut from k8s.io/kubernetes v1.X.Y. */
export function kubernetesVersionOf(kubeletModuleVersion: string): string {
  return kubeletModuleVersion.replace(/^v0\./, "v1.");
}

export function locateKubeletPodResourcesSources(
  version: string = kubernetesVersionOf(KUBELET_MODULE_VERSION),
): KubeletPodResourcesSources {
  const dir = moduleDir(KUBERNETES_MODULE, version);
  const files = {
    constants: path.join(dir, "pkg/kubelet/apis/podresources/constants.go"),
    defaults: path.join(dir, "pkg/kubelet/kubeletconfig/defaults.go"),
  };
  for (const file of Object.values(files)) {
    if (!existsSync(file)) throw new Error(`${KUBERNETES_MODULE}@${version} has no ${file}`);
  }
  return files;
}

/**
 * The upstream DRA files still import gogo.proto for Go code-generation options; the import is not in the
 * kubelet module, and the options do not change the wire. The text without that one import, so a
 * schema parser can read the file; every other line stays.
 */
export const GOGO_PROTO_IMPORT = 'import "github.com/gogo/protobuf/gogoproto/gogo.proto";';

export function readProtoWithoutGogoImport(file: string): string {
  return readFileSync(file, "utf8")
    .split("\n")
    .map((line) => (line.trim() === GOGO_PROTO_IMPORT ? "" : line))
    .join("\n");
}

/** True for an option that only shapes gogo's Go output (`(gogoproto.customname)` and the like). */
export function isGogoOption(name: string): boolean {
  return name.startsWith("(gogoproto.");
}

export interface KubeletDraSources {
  /** pkg/kubelet/cm/dra/plugin/dra_plugin.go: servicesSupportedByKubelet. */
  plugin: string;
  /** pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go: how the kubelet picks from supported_versions. */
  manager: string;
}

export function locateKubeletDraSources(
  version: string = kubernetesVersionOf(KUBELET_MODULE_VERSION),
): KubeletDraSources {
  const dir = moduleDir(KUBERNETES_MODULE, version);
  const files = {
    plugin: path.join(dir, "pkg/kubelet/cm/dra/plugin/dra_plugin.go"),
    manager: path.join(dir, "pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go"),
  };
  for (const file of Object.values(files)) {
    if (!existsSync(file)) throw new Error(`${KUBERNETES_MODULE}@${version} has no ${file}`);
  }
  return files;
}
