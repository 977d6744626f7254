// The image `make image` builds (tools/image/images.ts) and the Dockerfile, the release build, say the same:
// entrypoint, command, environment, working directory, user, labels, Node release and file layout.
import { readFileSync } from "node:fs";
import { join, posix } from "node:path";
import { describe, expect, it } from "vitest";
import {
  dpoImage,
  imageArchive,
  imageReference,
  NODE_VERSION,
  PACKAGE_VERSION,
} from "../../../../tools/image/images.js";

const repo = join(import.meta.dirname, "..", "..", "..", "..");

interface Instruction {
  keyword: string;
  args: string;
}

/** A Dockerfile's instructions by stage (what comes before the first FROM is stage 0), comments dropped. */
function dockerfileStages(text: string): Instruction[][] {
  const stages: Instruction[][] = [[]];
  let pending = "";
  for (const line of text.split("\n")) {
    // Docker drops comment lines, also in the middle of a continued instruction.
    if (/^\s*#/.test(line)) continue;
    if (line.endsWith("\\")) {
      pending += `${line.slice(0, -1)} `;
      continue;
    }
    const whole = (pending + line).trim();
    pending = "";
    if (whole === "") continue;
    const match = /^(\w+)\s+(.*)$/s.exec(whole);
    if (!match) throw new Error(`Dockerfile: cannot read "${whole}"`);
    const instruction = { keyword: match[1]!.toUpperCase(), args: match[2]!.trim() };
    if (instruction.keyword === "FROM") stages.push([]);
    stages.at(-1)!.push(instruction);
  }
  return stages;
}

/** `KEY=value KEY2="a b"` as ENV and LABEL write them. */
function keyValues(args: string): Record<string, string> {
  const pairs: Record<string, string> = {};
  for (const match of args.matchAll(/([\w.-]+)=("(?:[^"\\]|\\.)*"|\S+)/g)) {
    const value = match[2]!;
    pairs[match[1]!] = value.startsWith('"') ? (JSON.parse(value) as string) : value;
  }
  return pairs;
}

describe("Dockerfile parsing", () => {
  it("joins continued lines, drops comments and splits stages", () => {
    const stages = dockerfileStages(
      'ARG A=1\nFROM x AS b\n# c\nRUN a \\\n# inside\n && b\nFROM y\nLABEL k="v w" \\\n      l=m\n',
    );
    expect(stages).toEqual([
      [{ keyword: "ARG", args: "A=1" }],
      [
        { keyword: "FROM", args: "x AS b" },
        { keyword: "RUN", args: "a   && b" },
      ],
      [
        { keyword: "FROM", args: "y" },
        { keyword: "LABEL", args: 'k="v w"        l=m' },
      ],
    ]);
    expect(keyValues('k="v w"        l=m')).toEqual({ k: "v w", l: "m" });
  });
});

describe("the dpo image and the Dockerfile", () => {
  const stages = dockerfileStages(readFileSync(join(repo, "Dockerfile"), "utf8"));
  const final = stages.at(-1)!;
  const all = (keyword: string) => final.filter((i) => i.keyword === keyword);
  const one = (keyword: string) => {
    const found = all(keyword);
    expect(found, `the final stage's ${keyword}`).toHaveLength(1);
    return found[0]!.args;
  };
  const { config } = dpoImage;

  it("run the same entrypoint with the same command", () => {
    expect(JSON.parse(one("ENTRYPOINT"))).toEqual(config.Entrypoint);
    expect(JSON.parse(one("CMD"))).toEqual(config.Cmd);
  });

  it("set the same environment, plus what the Dockerfile's base image sets", () => {
    const env = Object.fromEntries(
      config.Env.map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]),
    );
    const fromDockerfile = Object.assign({}, ...all("ENV").map((i) => keyValues(i.args))) as Record<
      string,
      string
    >;
    expect(Object.keys(fromDockerfile).sort()).toEqual(["NODE_COMPILE_CACHE", "NODE_ENV"]);
    for (const [key, value] of Object.entries(fromDockerfile)) expect(env[key], key).toBe(value);
    // node:<version>-slim sets PATH and NODE_VERSION (and YARN_VERSION, for a yarn this image has no copy of).
    const inherited = Object.keys(env).filter((key) => !(key in fromDockerfile));
    expect(inherited.sort()).toEqual(["NODE_VERSION", "PATH"]);
    expect(env.NODE_VERSION).toBe(NODE_VERSION);
    expect(env.PATH!.split(":")).toContain(posix.dirname(dpoImage.node.path));
    expect(posix.basename(dpoImage.node.path)).toBe(config.Entrypoint![0]);
  });

  it("work in the same directory, as no particular user", () => {
    expect(one("WORKDIR")).toBe(config.WorkingDir);
    expect(all("USER"), "the manifests set the user per workload").toEqual([]);
    expect(config.User).toBeUndefined();
  });

  it("carry the same labels", () => {
    const labels = Object.assign({}, ...all("LABEL").map((i) => keyValues(i.args))) as Record<string, string>;
    expect(labels).toEqual(config.Labels);
  });

  it("run the pinned Node.js release", () => {
    const arg = stages[0]!.find((i) => i.keyword === "ARG" && i.args.startsWith("NODE_IMAGE="));
    expect(arg?.args).toBe(`NODE_IMAGE=node:${dpoImage.node.version}-slim`);
    expect(dpoImage.node.version).toBe(readFileSync(join(repo, ".node-version"), "utf8").trim());
  });

  it("hold the same files under /app", () => {
    const workdir = one("WORKDIR");
    const copied = all("COPY").map((i) => {
      const words = i.args.split(/\s+/).filter((w) => !w.startsWith("--"));
      const [destination] = words.slice(-1);
      const sources = words.slice(0, -1);
      const target = posix.resolve(workdir, destination!);
      // `COPY package.json ./`: a directory destination keeps the source's name.
      return destination!.endsWith("/")
        ? sources.map((s) => posix.join(target, posix.basename(s)))
        : [target];
    });
    const { app } = dpoImage;
    expect(copied.flat().sort()).toEqual([app.dist, app.nodeModules, app.packageJson].sort());
    expect([app.dist, app.nodeModules, app.packageJson].every((p) => posix.dirname(p) === app.dir)).toBe(
      true,
    );
  });

  it("install the production dependencies the same way", () => {
    const deps = stages.find((stage) => /\bAS runtime-deps$/.test(stage[0]?.args ?? ""));
    const install = deps?.find((i) => i.keyword === "RUN")?.args ?? "";
    // --no-audit and --no-fund only keep npm quiet.
    const words = install.split("&&")[0]!.trim().split(/\s+/);
    expect(words.filter((w) => w !== "--no-audit" && w !== "--no-fund")).toEqual(
      dpoImage.installDependencies,
    );
  });

  it("fill the compile cache the same way, after NODE_COMPILE_CACHE is set", () => {
    const runs = all("RUN");
    const last = runs.at(-1)!;
    const command = last.args.split(">")[0]!.trim().split(/\s+/);
    expect(command).toEqual([...config.Entrypoint!, ...dpoImage.compileCacheRun]);
    const envIndex = final.findIndex((i) => i.keyword === "ENV" && i.args.includes("NODE_COMPILE_CACHE="));
    expect(envIndex).toBeGreaterThanOrEqual(0);
    expect(envIndex).toBeLessThan(final.indexOf(last));
  });

  it("are named after package.json's version", () => {
    expect(imageReference(dpoImage)).toBe(`ghcr.io/dpo-dev/dpo:${PACKAGE_VERSION}`);
    expect(imageArchive(dpoImage)).toBe(join(".local", "image", `dpo-${PACKAGE_VERSION}.oci.tar`));
  });
});
