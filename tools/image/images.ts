// What each image tools/image/build.ts makes says, in one place: the name, the config and where its files
// come from. The dpo image mirrors the Dockerfile's final stage, and test/unit/tools/image/dockerfile.test.ts
// holds the two in step; the pause and busybox images serve the real-node test tier.
import { readFileSync } from "node:fs";
import { join } from "node:path";

const repo = join(import.meta.dirname, "..", "..");

/** The release in .node-version: the Dockerfile's NODE_IMAGE and the node binary of the dpo image. */
export const NODE_VERSION = readFileSync(join(repo, ".node-version"), "utf8").trim();
const packageJson = JSON.parse(readFileSync(join(repo, "package.json"), "utf8")) as { version: string };
export const PACKAGE_VERSION = packageJson.version;

/** The image config's fields that these images set, spelled as in an OCI image config. */
export interface ImageConfig {
  Entrypoint?: string[];
  Cmd?: string[];
  Env: string[];
  WorkingDir?: string;
  User?: string;
  Labels: Record<string, string>;
}

/**
 * A Debian package (`apt-get download`, `dpkg-deb -x`) and what of it goes into an image: `"libraries"`
 * for the shared libraries `ldd` says the image's binary needs (the build fails when one is found in no
 * listed package, or a package gives none), or paths inside the package. Each package also gets its
 * copyright file and a record in /var/lib/dpkg/status.d/, where image scanners look for the versions.
 */
export interface DebianPackage {
  name: string;
  files: "libraries" | string[];
}

export interface ImageDefinition {
  /** The archive is .local/image/<name>-<tag>.oci.tar. */
  name: string;
  repository: string;
  /** Never `latest`: the kubelet would then pull on every start instead of using the imported image. */
  tag: string;
  config: ImageConfig;
  debian: DebianPackage[];
}

/** Debian's /etc/os-release (where scanners read the distribution the package records belong to). */
const osRelease: DebianPackage = {
  name: "base-files",
  files: ["etc/os-release", "usr/lib/os-release", "etc/debian_version"],
};

/** What node:*-slim and Debian images set; `node` and the busybox applets are found through it. */
const PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** The dpo image: what it has beyond a config and Debian packages. */
export interface DpoImageDefinition extends ImageDefinition {
  /** Where node:*-slim has the binary; the image's comes from the npm `node` package of that release. */
  node: { version: string; path: string };
  app: { dir: string; dist: string; nodeModules: string; packageJson: string };
  /** The Dockerfile's runtime-deps stage: how node_modules is installed from package-lock.json. */
  installDependencies: string[];
  /**
   * The Dockerfile's last RUN, after the ENTRYPOINT's flags: V8's code cache for the modules `dpo plugin`
   * loads, written into NODE_COMPILE_CACHE once at build time.
   */
  compileCacheRun: string[];
}

/** The dpo image: the Dockerfile's final stage, without a container engine. */
export const dpoImage: DpoImageDefinition = {
  name: "dpo",
  repository: "ghcr.io/dpo-dev/dpo",
  tag: PACKAGE_VERSION,
  node: { version: NODE_VERSION, path: "/usr/local/bin/node" },
  app: { dir: "/app", dist: "/app/dist", nodeModules: "/app/node_modules", packageJson: "/app/package.json" },
  installDependencies: ["npm", "ci", "--omit=dev", "--ignore-scripts"],
  compileCacheRun: ["plugin", "--help"],
  config: {
    Entrypoint: [
      "node",
      "--max-semi-space-size=1",
      "--min-semi-space-size=1",
      "--lite-mode",
      "--no-icu-timezone-data",
      "/app/dist/dpo.js",
    ],
    Cmd: ["--help"],
    // PATH and NODE_VERSION are what the Dockerfile's base image sets (there is no yarn, so no YARN_VERSION).
    Env: [
      PATH,
      `NODE_VERSION=${NODE_VERSION}`,
      "NODE_ENV=production",
      "NODE_COMPILE_CACHE=/app/.compile-cache",
    ],
    WorkingDir: "/app",
    // No User, as in the Dockerfile: the manifests set one per workload.
    Labels: {
      "org.opencontainers.image.source": "https://github.com/dpo-dev/dpo",
      "org.opencontainers.image.description":
        "Kubernetes operator and bundled runtime for kubelet device plugins",
      "org.opencontainers.image.licenses": "Apache-2.0",
    },
  },
  debian: [
    { name: "libc6", files: "libraries" },
    { name: "libgcc-s1", files: "libraries" },
    { name: "libstdc++6", files: "libraries" },
    osRelease,
  ],
};

/**
 * The sandbox image of the real-node tier's pods (containerd's `pinned_images.sandbox`): the static
 * program in tools/image/pause/ as /pause, run as 65535 as the upstream pause image is.
 */
export const pauseImage: ImageDefinition = {
  name: "pause",
  repository: "dpo.dev/pause",
  tag: "1.0",
  config: {
    Entrypoint: ["/pause"],
    Env: [PATH],
    User: "65535:65535",
    Labels: {
      "org.opencontainers.image.description": "dpo's test sandbox: sleeps, reaps orphans, exits 0 on SIGTERM",
    },
  },
  debian: [],
};

/** A workload image for the real-node tier's pods: Debian's static busybox with its applets (sh, env, ...). */
export const busyboxImage: ImageDefinition = {
  name: "busybox",
  repository: "dpo.dev/busybox",
  tag: "1.0",
  config: {
    Cmd: ["sh"],
    Env: [PATH],
    Labels: { "org.opencontainers.image.description": "dpo's test workload: Debian's busybox-static" },
  },
  debian: [{ name: "busybox-static", files: ["bin/busybox"] }, osRelease],
};

/**
 * The upstream sample device plugin (k8s.io/kubernetes/test/images/sample-device-plugin at the pinned
 * Kubernetes release, the binary tools/cluster/build-sample-device-plugin.sh builds): the incumbent the
 * real-node tier's takeover test hands a node over from. Static, so the binary alone.
 */
export const samplePluginImage: ImageDefinition = {
  name: "sample-device-plugin",
  repository: "dpo.dev/sample-device-plugin",
  tag: "1.0",
  config: {
    Entrypoint: ["/sampledeviceplugin"],
    Env: [PATH],
    Labels: {
      "org.opencontainers.image.description":
        "The upstream sample device plugin of k8s.io/kubernetes/test/images, for dpo's takeover test",
    },
  },
  debian: [],
};

export const IMAGES: Record<string, ImageDefinition> = {
  dpo: dpoImage,
  pause: pauseImage,
  busybox: busyboxImage,
  "sample-device-plugin": samplePluginImage,
};

/** The reference an archive's index names its image by, and `ctr images import` names it by. */
export function imageReference(image: ImageDefinition): string {
  return `${image.repository}:${image.tag}`;
}

/** The archive's path relative to the repository root. */
export function imageArchive(image: ImageDefinition): string {
  return join(".local", "image", `${image.name}-${image.tag}.oci.tar`);
}

/** The label that lists the Debian packages an image was built from, `name=version` separated by spaces. */
export const DEBIAN_PACKAGES_LABEL = "dev.dpo.image.debian-packages";
