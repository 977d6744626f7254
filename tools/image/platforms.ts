// The platforms an image is built for, and what each one is called by the tools the build asks: the OCI
// platform (the index's `platform`, the config's `architecture` and `variant`), Node's `process.arch` and npm
// package, Debian's architecture and multiarch directory, and QEMU's user-mode emulator that runs its
// binaries on a machine of another architecture.

export interface ImagePlatform {
  os: "linux";
  /** GOARCH, as OCI spells it. */
  architecture: "amd64" | "arm64";
  /** The OCI variant: `v8` for arm64, as Docker's official images and `docker buildx` write it. */
  variant?: string;
  /** process.arch, and the suffix of the npm package that holds this platform's node (`node-linux-<arch>`). */
  nodeArch: "x64" | "arm64";
  /** dpkg's architecture (`apt-get download` of a package for it). */
  debianArch: "amd64" | "arm64";
  /** Debian's multiarch directory (lib/<triplet>), where its shared libraries are. */
  triplet: string;
  /** Debian's qemu-user-static binary that runs this platform's programs elsewhere. */
  qemu: string;
}

export const AMD64: ImagePlatform = {
  os: "linux",
  architecture: "amd64",
  nodeArch: "x64",
  debianArch: "amd64",
  triplet: "x86_64-linux-gnu",
  qemu: "qemu-x86_64-static",
};

export const ARM64: ImagePlatform = {
  os: "linux",
  architecture: "arm64",
  variant: "v8",
  nodeArch: "arm64",
  debianArch: "arm64",
  triplet: "aarch64-linux-gnu",
  qemu: "qemu-aarch64-static",
};

export const PLATFORMS: readonly ImagePlatform[] = [AMD64, ARM64];

/** `linux/amd64`, `linux/arm64/v8`: the platform as `docker buildx --platform` and containerd write it. */
export function platformName(platform: ImagePlatform): string {
  return [platform.os, platform.architecture, platform.variant].filter((part) => part).join("/");
}

/** The platform of this machine, which is the one whose programs run here without QEMU. */
export function hostPlatform(arch: string = process.arch): ImagePlatform {
  const platform = PLATFORMS.find((p) => p.nodeArch === arch);
  if (platform === undefined) throw new Error(`no image build on ${arch} (amd64 and arm64 only)`);
  return platform;
}

export function isHost(platform: ImagePlatform): boolean {
  return platform.nodeArch === process.arch;
}

/** The Debian package that holds every qemu-*-static emulator. */
export const QEMU_PACKAGE = "qemu-user-static";
