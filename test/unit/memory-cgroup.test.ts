// The benchmarks' memory limit: quantities and the Deployment's limit, read the way the bench reads them.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { deploymentMemoryLimit, memoryBytes } from "../../bench/memory-cgroup.js";

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
      join(import.meta.dirname, "..", "..", "config", "manager", "deployment.yaml"),
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
