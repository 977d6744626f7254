// The release's chart file (helm package, as make release makes it) on the local control plane: helm install
// into a namespace that does not exist yet (--create-namespace), every namespaced object of the release in
// that namespace, helm uninstall, and the namespace still there and Active. The image need not run.
// test/integration/helm-chart.test.ts does the same from charts/dpo with the operator running.
import { mkdtemp, rm } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { objectKey, type KubeObject } from "../../tools/manifests/compare.js";
import { kubectl, waitFor } from "../cluster/helpers.js";
import {
  chartDir,
  configDir,
  CONFIG_NAMESPACE,
  helm,
  onCluster,
  parseObjects,
  renderKustomize,
  repoRoot,
  useHelmHome,
} from "./helm-support.js";

/** A namespace no other file uses, absent before the install. */
const NAMESPACE = "dpo-release-check";
const RELEASE = "dpo-release";
const version = (JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version: string })
  .version;

useHelmHome();

let workDir = "";
let chartFile = "";
let installed = false;
let released: KubeObject[] = [];

const manifest = (objects: KubeObject[]): string => objects.map((o) => stringify(o)).join("---\n");

/** Those of `objects` the API server still has, as `kind/name`. */
async function stillThere(objects: KubeObject[]): Promise<string[]> {
  const { stdout } = await kubectl(["get", "--ignore-not-found", "-o", "name", "-f", "-"], {
    input: manifest(objects),
  });
  return stdout.split("\n").filter((line) => line !== "");
}

async function waitUntilGone(objects: KubeObject[], what: string): Promise<void> {
  await waitFor(
    what,
    async (observe) => {
      const left = await stillThere(objects);
      observe(left);
      return left.length === 0;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
}

async function namespaceState(): Promise<{ exists: boolean; phase?: string; deleting: boolean }> {
  const result = await kubectl(["get", "namespace", NAMESPACE, "--ignore-not-found", "-o", "json"]);
  if (result.stdout.trim() === "") return { exists: false, deleting: false };
  const namespace = JSON.parse(result.stdout) as {
    metadata: { deletionTimestamp?: string };
    status?: { phase?: string };
  };
  return {
    exists: true,
    deleting: namespace.metadata.deletionTimestamp !== undefined,
    ...(namespace.status?.phase ? { phase: namespace.status.phase } : {}),
  };
}

beforeAll(async () => {
  workDir = await mkdtemp(join(tmpdir(), "dpo-release-chart-"));
  await helm(["package", chartDir, "--destination", workDir]);
  chartFile = join(workDir, `dpo-${version}.tgz`);
  // Earlier files install config/default with kubectl; Helm adopts nothing it did not create, so start
  // from a cluster without dpo's objects (the CRDs, which Helm skips when present, stay).
  const earlier = (await renderKustomize(join(configDir, "default"))).filter(
    (o) => o.kind !== "CustomResourceDefinition",
  );
  await kubectl(["delete", "--ignore-not-found", "--wait=false", "-f", "-"], { input: manifest(earlier) });
  await kubectl(["delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false"]);
  await waitUntilGone(earlier, "objects of an earlier dpo install to go before helm install");
  await waitFor(
    `namespace ${NAMESPACE} to be absent before the install`,
    async (observe) => {
      const state = await namespaceState();
      observe(state);
      return !state.exists;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
}, 300_000);

afterAll(async () => {
  if (installed) {
    await helm(["uninstall", RELEASE, "--namespace", NAMESPACE, "--ignore-not-found", ...onCluster()], {
      allowFailure: true,
    });
  }
  await kubectl(["delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false"], {
    allowFailure: true,
  });
  if (workDir !== "") await rm(workDir, { recursive: true, force: true });
});

describe("the release's chart package", () => {
  it("is the package's version, chart and image alike", async () => {
    const { stdout } = await helm(["show", "chart", chartFile]);
    expect(stdout).toMatch(new RegExp(`^version: ${version.replace(/\./g, "\\.")}$`, "m"));
    expect(stdout).toMatch(new RegExp(`^appVersion: "?${version.replace(/\./g, "\\.")}"?$`, "m"));
  });

  it("installs into a namespace helm creates, with every namespaced object there", async () => {
    expect(await namespaceState()).toEqual({ exists: false, deleting: false });
    installed = true;
    const install = await helm(
      ["install", RELEASE, chartFile, "--namespace", NAMESPACE, "--create-namespace", ...onCluster()],
      { allowFailure: true },
    );
    expect(install.exitCode, install.stderr).toBe(0);
    const namespace = await namespaceState();
    expect(namespace).toEqual({ exists: true, deleting: false, phase: "Active" });

    const { stdout } = await helm(["get", "manifest", RELEASE, "--namespace", NAMESPACE, ...onCluster()]);
    released = parseObjects(stdout);
    const keys = released.map(objectKey);
    expect(keys).toContain(`Deployment ${NAMESPACE}/dpo-operator`);
    expect(keys).toContain(`ServiceAccount ${NAMESPACE}/dpo-operator`);
    expect(keys).toContain(`Service ${NAMESPACE}/dpo-webhook`);
    // The chart brings no Namespace of its own: the namespace is the user's, which uninstall must leave.
    expect(released.filter((o) => o.kind === "Namespace")).toEqual([]);
    // What Helm wrote is on the API server, each namespaced object in the chosen namespace.
    const live = JSON.parse(
      (await kubectl(["get", "-f", "-", "-o", "json"], { input: manifest(released) })).stdout,
    ) as { items: KubeObject[] };
    expect(live.items.map(objectKey).sort()).toEqual([...keys].sort());
    const namespaced = live.items.filter((o) => o.metadata.namespace !== undefined);
    expect(namespaced.length).toBeGreaterThan(0);
    for (const object of namespaced) expect(object.metadata.namespace, objectKey(object)).toBe(NAMESPACE);
    const dpoSystem = await kubectl([
      "get",
      "namespace",
      CONFIG_NAMESPACE,
      "--ignore-not-found",
      "-o",
      "name",
    ]);
    expect(dpoSystem.stdout.trim()).toBe("");
  });

  it("uninstalls without deleting that namespace", async () => {
    expect(installed).toBe(true);
    await helm(["uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "3m", ...onCluster()]);
    installed = false;
    await waitUntilGone(released, "every object of the release to be deleted");
    expect(await namespaceState()).toEqual({ exists: true, deleting: false, phase: "Active" });
  });
});
