// What kstatus and config/argocd/health.lua (run as Argo CD runs it) say about DevicePluginConfigs captured
// from a live cluster at each phase (test/e2e/gitops-health.test.ts and test/e2e/feature-conditions.test.ts
// write them), so that a change of health.lua or of the kstatus rules shows here without a cluster. The
// table in docs/deploy.md is this one.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import {
  buildGitopsHealth,
  gitopsHealth,
  type EngineVerdict,
} from "../../../../tools/gitops-health/harness.js";

const FIXTURES = join(import.meta.dirname, "..", "..", "..", "fixtures", "gitops-health");

function fixture(name: string): Record<string, unknown> {
  return JSON.parse(readFileSync(join(FIXTURES, `${name}.json`), "utf8")) as Record<string, unknown>;
}

let harness: string;

beforeAll(async () => {
  harness = await buildGitopsHealth();
}, 600_000);

const PHASES: [string, EngineVerdict, EngineVerdict][] = [
  [
    "created",
    {
      status: "InProgress",
      message: "DevicePluginConfig generation is 1, but latest observed generation is 0",
    },
    { status: "Progressing", message: "Waiting for the operator to observe generation 1" },
  ],
  [
    "ready",
    { status: "Current", message: "Resource is Ready" },
    { status: "Healthy", message: "3/3 nodes ready" },
  ],
  [
    "ready-unhealthy-device",
    { status: "Current", message: "Resource is Ready" },
    {
      status: "Healthy",
      message: "3/3 nodes ready; UnhealthyDevices: 1 of 3 nodes have problems: UnhealthyDevices 1",
    },
  ],
  [
    // SurgeUpgrades=False says why an upgrade will replace on old kubelets; it is no problem of the config.
    "ready-kubelets-without-surge",
    { status: "Current", message: "Resource is Ready" },
    { status: "Healthy", message: "3/3 nodes ready" },
  ],
  [
    "plugin-down",
    { status: "InProgress", message: "2/3 nodes ready; not ready: dpo-node-2 (NoCapacity)" },
    { status: "Progressing", message: "NodesNotReady: 2/3 nodes ready; not ready: dpo-node-2 (NoCapacity)" },
  ],
  [
    "stalled-conflict",
    {
      status: "Failed",
      message:
        "DevicePluginConfig example already serves gitops.example/example on overlapping nodes; this config gets no DaemonSet while it does",
    },
    {
      status: "Degraded",
      message:
        "ResourceNameConflict: DevicePluginConfig example already serves gitops.example/example on overlapping nodes; this config gets no DaemonSet while it does",
    },
  ],
  [
    "stalled-resource-api-unavailable",
    {
      status: "Failed",
      message:
        "the API server does not serve resource.k8s.io/v1, which ResourceSlices and DeviceClasses need: enable it (kube-apiserver --runtime-config=resource.k8s.io/v1=true; on by default from Kubernetes 1.34) or set spec.publish to DevicePlugin",
    },
    {
      status: "Degraded",
      message:
        "ResourceAPIUnavailable: the API server does not serve resource.k8s.io/v1, which ResourceSlices and DeviceClasses need: enable it (kube-apiserver --runtime-config=resource.k8s.io/v1=true; on by default from Kubernetes 1.34) or set spec.publish to DevicePlugin",
    },
  ],
  [
    "spec-changed",
    {
      status: "InProgress",
      message: "DevicePluginConfig generation is 2, but latest observed generation is 1",
    },
    { status: "Progressing", message: "Waiting for the operator to observe generation 2" },
  ],
  [
    "upgrade-paused",
    { status: "InProgress", message: "0/3 nodes run plugin revision 819f7c4486" },
    { status: "Progressing", message: "UpgradePaused: 0/3 nodes run plugin revision 819f7c4486" },
  ],
  [
    "upgrade-progressing",
    { status: "InProgress", message: "0/3 nodes run plugin revision 819f7c4486" },
    { status: "Progressing", message: "UpgradeProgressing: 0/3 nodes run plugin revision 819f7c4486" },
  ],
  [
    "stalled-upgrade-failed",
    {
      status: "Failed",
      message:
        "node(s) dpo-node-0 did not get the new plugin advertised within 10s; the upgrade stopped: fix the spec to start a new one",
    },
    {
      status: "Degraded",
      message:
        "UpgradeFailed: node(s) dpo-node-0 did not get the new plugin advertised within 10s; the upgrade stopped: fix the spec to start a new one",
    },
  ],
  [
    "upgrade-rolling-back",
    {
      status: "InProgress",
      message: "0/3 nodes run plugin revision 1298aa486a; rolling back to 819f7c4486",
    },
    {
      status: "Progressing",
      message: "UpgradeRollingBack: 0/3 nodes run plugin revision 1298aa486a; rolling back to 819f7c4486",
    },
  ],
  [
    "stalled-upgrade-rolled-back",
    {
      status: "Failed",
      message:
        "node(s) dpo-node-0 did not get the new plugin advertised within 10s; every node is back on the previous revision: fix the spec to start a new one",
    },
    {
      status: "Degraded",
      message:
        "UpgradeRolledBack: node(s) dpo-node-0 did not get the new plugin advertised within 10s; every node is back on the previous revision: fix the spec to start a new one",
    },
  ],
];

describe("GitOps health of captured DevicePluginConfigs", () => {
  it("gives every phase the kstatus and Argo CD health it had on the cluster", async () => {
    const results = await gitopsHealth(
      harness,
      PHASES.map(([name]) => fixture(name)),
    );
    expect(results.map((r, i) => [PHASES[i]![0], r.kstatus, r.argocd])).toEqual(PHASES);
  });

  it("shows Argo CD's Progressing while a config is being deleted, before the check runs", async () => {
    const deleting = fixture("ready");
    deleting.metadata = {
      ...(deleting.metadata as object),
      deletionTimestamp: "2026-01-01T00:00:00Z",
      finalizers: ["example.com/hold"],
    };
    const [result] = await gitopsHealth(harness, [deleting]);
    expect(result).toMatchObject({
      kstatus: { status: "Terminating" },
      argocd: { status: "Progressing", message: "Pending deletion" },
    });
  });
});

describe("the harness runs a health check as Argo CD does", () => {
  const write = (lua: string): string => {
    const file = join(mkdtempSync(join(tmpdir(), "dpo-gitops-health-")), "health.lua");
    writeFileSync(file, lua);
    return file;
  };
  const argocd = async (lua: string, useOpenLibs = false): Promise<EngineVerdict> =>
    (await gitopsHealth(harness, [fixture("ready")], { healthLua: write(lua), useOpenLibs }))[0]!.argocd;

  it("without the open libraries: base, table and package only, obj and actionParams set", async () => {
    const probe = `return { status = "Healthy", message = table.concat({ type(string), type(os), type(math),
      type(require("os").time), type(require("os").exit), type(actionParams), type(obj.metadata.generation),
      tostring(obj.metadata.generation) }, " ") }`;
    expect(await argocd(probe)).toEqual({
      status: "Healthy",
      message: "nil nil nil function nil table number 1",
    });
    expect((await argocd(probe, true)).message).toBe("table table table function nil table number 1");
  });

  it("turns a Lua error into Unknown with the error, and an unknown status into Unknown", async () => {
    expect(await argocd(`return { status = string.upper("healthy") }`)).toMatchObject({
      status: "Unknown",
      message: expect.stringContaining("attempt to index a non-table object(nil) with key 'upper'"),
    });
    expect(await argocd(`return { status = "Fine" }`)).toEqual({
      status: "Unknown",
      message: "Lua returned an invalid health status",
    });
  });
});
