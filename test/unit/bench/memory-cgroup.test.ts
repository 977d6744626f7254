// The benchmarks' memory limit: quantities and the Deployment's limit, read the way the bench reads them.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  deploymentMemoryLimit,
  deploymentNodeFlags,
  deploymentRuntimeEnv,
  memoryBytes,
} from "../../../bench/memory-cgroup.js";

describe("memoryBytes", () => {
  it.each([
    ["256Mi", 256 * 2 ** 20],
    ["1Gi", 2 ** 30],
    ["512Ki", 512 * 1024],
    ["1048576", 1048576],
  ])("%s is %d bytes", (quantity, bytes) => {
    expect(memoryBytes(quantity)).toBe(bytes);
  });

  it.each(["", "256M", "1.5Gi", "-1Mi", "256 Mi"])("refuses %j, naming it", (quantity) => {
    expect(() => memoryBytes(quantity)).toThrow(JSON.stringify(quantity));
  });
});

describe("deploymentMemoryLimit", () => {
  it("reads the operator Deployment's own limit, so the benchmark runs the operator as its pod runs", () => {
    const manifest = readFileSync(
      join(import.meta.dirname, "..", "..", "..", "config", "manager", "deployment.yaml"),
      "utf8",
    );
    expect(deploymentMemoryLimit(manifest)).toBe("256Mi");
  });

  it("is undefined for a Deployment without a limit", () => {
    expect(
      deploymentMemoryLimit("kind: Deployment\nspec: {template: {spec: {containers: [{name: a}]}}}"),
    ).toBe(undefined);
  });
});

describe("deploymentNodeFlags", () => {
  it("reads the Node flags the operator Deployment starts dpo with, so the benchmark starts it the same way", () => {
    const manifest = readFileSync(
      join(import.meta.dirname, "..", "..", "..", "config", "manager", "deployment.yaml"),
      "utf8",
    );
    const flags = deploymentNodeFlags(manifest);
    expect(flags.length).toBeGreaterThan(0);
    expect(flags.every((flag) => flag.startsWith("--"))).toBe(true);
  });

  it.each([
    ["node --max-semi-space-size=2 /app/dist/dpo.js", ["--max-semi-space-size=2"]],
    ["node --a=1 --b /app/dist/dpo.js", ["--a=1", "--b"]],
    ["node /app/dist/dpo.js", []],
    ["/app/dpo --flag", []],
  ])("%s", (command, want) => {
    const manifest = `kind: Deployment\nspec: {template: {spec: {containers: [{name: a, command: ${JSON.stringify(command.split(" "))}}]}}}`;
    expect(deploymentNodeFlags(manifest)).toEqual(want);
  });
});

describe("deploymentRuntimeEnv", () => {
  it("takes the literal runtime variables of the operator Deployment, not dpo's own or field references", () => {
    const manifest = readFileSync(
      join(import.meta.dirname, "..", "..", "..", "config", "manager", "deployment.yaml"),
      "utf8",
    );
    expect(deploymentRuntimeEnv(manifest)).toEqual({
      MALLOC_ARENA_MAX: "2",
      MALLOC_MMAP_THRESHOLD_: "131072",
    });
  });
});
