// The container runtime's part for a plugin container: a build of dpo run on this host as its image would
// run it (the image's Node.js flags, a V8 compile cache), and stopped as the kubelet stops a container.
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { mkdir, readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { imageNodeFlags } from "./plugin-pod.js";

const COMPILE_CACHE_WARMUP_TIMEOUT_MS = 20_000;

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** How to start a pod's process again without asking the API (restartPlugin). */
export interface Launch {
  args: string[];
  env: Record<string, string>;
  logFile: string;
}

/**
 * How a build of dpo runs as its image would run it: the Node.js flags of the Dockerfile's ENTRYPOINT
 * next to the build (none if it has no Dockerfile) and a V8 compile cache made once before the first
 * start, as the image build does (`NODE_COMPILE_CACHE`).
 */
export interface ImageRuntime {
  entrypoint: string;
  nodeFlags: string[];
  compileCache: string;
}

export async function prepareImageRuntime(entrypoint: string): Promise<ImageRuntime> {
  const buildRoot = join(dirname(entrypoint), "..");
  let nodeFlags: string[] = [];
  try {
    nodeFlags = imageNodeFlags(await readFile(join(buildRoot, "Dockerfile"), "utf8"));
  } catch {
    // A build without a Dockerfile runs without flags.
  }
  const compileCache = join(buildRoot, ".local", "compile-cache");
  await mkdir(compileCache, { recursive: true });
  // What the image's `RUN node <flags> dist/dpo.js plugin --help` does: every later start reads the cache.
  // A build that does not answer --help in time (a test's hung stand-in) starts without the cache.
  await new Promise<void>((resolve) => {
    const child = spawn(process.execPath, [...nodeFlags, entrypoint, "plugin", "--help"], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", NODE_COMPILE_CACHE: compileCache },
      stdio: "ignore",
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), COMPILE_CACHE_WARMUP_TIMEOUT_MS);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.once("error", () => {
      clearTimeout(timer);
      resolve();
    });
  });
  return { entrypoint, nodeFlags, compileCache };
}

/**
 * Which build of dpo runs for a container image: one given for the image (an older dpo built from git
 * history, a broken build), or the default. Each build's runtime is prepared once, in the background from
 * the moment the build is known.
 */
export class ImageBuilds {
  private readonly images: Map<string, string>;
  private readonly runtimes = new Map<string, Promise<ImageRuntime>>();

  constructor(
    private readonly defaultEntrypoint: string,
    images: Readonly<Record<string, string>>,
  ) {
    this.images = new Map(Object.entries(images));
  }

  /** Starts preparing every build known so far. */
  prepareAll(): void {
    for (const entrypoint of [this.defaultEntrypoint, ...this.images.values()])
      void this.runtimeOf(entrypoint);
  }

  /** Pods with this image run `entrypoint` from now on. */
  add(image: string, entrypoint: string): void {
    this.images.set(image, entrypoint);
    void this.runtimeOf(entrypoint);
  }

  runtimeFor(image: string): Promise<ImageRuntime> {
    return this.runtimeOf(this.images.get(image) ?? this.defaultEntrypoint);
  }

  private runtimeOf(entrypoint: string): Promise<ImageRuntime> {
    let runtime = this.runtimes.get(entrypoint);
    if (runtime === undefined) {
      runtime = prepareImageRuntime(entrypoint);
      this.runtimes.set(entrypoint, runtime);
    }
    return runtime;
  }
}

/** One start of a plugin container: the process, its log file, and how it ended. */
export class PluginProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<ExitStatus>;
  exit: ExitStatus | undefined;

  constructor(
    image: ImageRuntime,
    readonly launch: Launch,
    onExit: (status: ExitStatus) => void,
  ) {
    const log = openSync(launch.logFile, "a");
    try {
      this.child = spawn(process.execPath, [...image.nodeFlags, image.entrypoint, ...launch.args], {
        env: { ...launch.env, NODE_COMPILE_CACHE: image.compileCache },
        stdio: ["ignore", log, log],
      });
    } finally {
      closeSync(log);
    }
    this.exited = new Promise<ExitStatus>((resolve) => {
      const done = (status: ExitStatus): void => {
        if (this.exit !== undefined) return;
        this.exit = status;
        onExit(status);
        resolve(status);
      };
      this.child.once("exit", (code, signal) => done({ code, signal }));
      this.child.once("error", () => done({ code: null, signal: null }));
    });
  }

  get running(): boolean {
    return this.exit === undefined;
  }

  /** What the kubelet does to a container that goes: SIGTERM, then SIGKILL after the grace period. */
  async stop(graceMs: number): Promise<ExitStatus> {
    if (this.exit !== undefined) return this.exit;
    this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), graceMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}
