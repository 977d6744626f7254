// Finds the kubelet's own .proto files (the contract ours must match) in the Go module cache.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";

export const KUBELET_MODULE = "k8s.io/kubelet";
/** The kubelet release whose wire contract src/plugin-runtime/proto reproduces. */
export const KUBELET_MODULE_VERSION = "v0.34.4";

export interface UpstreamProtoFiles {
  readonly moduleDir: string;
  readonly devicePlugin: string;
  readonly pluginRegistration: string;
}

/** Paths of our copies, relative to the repository root. */
export const OUR_PROTO_FILES = {
  devicePlugin: "src/plugin-runtime/proto/deviceplugin/v1beta1/api.proto",
  pluginRegistration: "src/plugin-runtime/proto/pluginregistration/v1/api.proto",
} as const;

// `go` is often installed outside the default PATH (the official tarball unpacks to /usr/local/go).
function goSearchPath(): string {
  const extra = [process.env.GOROOT ? path.join(process.env.GOROOT, "bin") : undefined, "/usr/local/go/bin"];
  return [process.env.PATH ?? "", ...extra.filter((dir): dir is string => dir !== undefined)]
    .filter((dir) => dir !== "")
    .join(path.delimiter);
}

/** Downloads (or reuses from the module cache) k8s.io/kubelet and returns where its .proto files are. */
export function locateUpstreamProtoFiles(version: string = KUBELET_MODULE_VERSION): UpstreamProtoFiles {
  let output: string;
  try {
    output = execFileSync("go", ["mod", "download", "-json", `${KUBELET_MODULE}@${version}`], {
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
    throw new Error(
      `go mod download ${KUBELET_MODULE}@${version} failed: ${stderr || (error as Error).message}`,
      { cause: error },
    );
  }
  const info = JSON.parse(output) as { Dir?: unknown; Error?: unknown };
  if (typeof info.Dir !== "string") {
    throw new Error(`go mod download ${KUBELET_MODULE}@${version} gave no Dir: ${output}`);
  }
  const files: UpstreamProtoFiles = {
    moduleDir: info.Dir,
    devicePlugin: path.join(info.Dir, "pkg/apis/deviceplugin/v1beta1/api.proto"),
    pluginRegistration: path.join(info.Dir, "pkg/apis/pluginregistration/v1/api.proto"),
  };
  for (const file of [files.devicePlugin, files.pluginRegistration]) {
    if (!existsSync(file)) throw new Error(`${KUBELET_MODULE}@${version} has no ${file}`);
  }
  return files;
}
