// Real old code to real new code: dpo as it was before plugin revisions (built from this repository's
// history into .local/builds/) runs a config with its CRDs, operator and plugins; then the current CRDs
// and operator take over. The operator adopts the old DaemonSet (no pod restarted by the adoption) and
// moves every node to the current plugin node by node: Surge on the v1.37 kubelets, where a workload
// keeps asking for devices and not one request may fail, and Replace on the older one.
import { CustomObjectsApi } from "@kubernetes/client-node";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { buildAt, type OldBuild } from "../../tools/cluster/old-build.js";
import {
  injectedCluster,
  kubeConfigFromInjected,
  kubectl,
  pluginDaemonSet,
  uniqueName,
  waitFor,
} from "../cluster/helpers.js";
import { KubeletSimulator } from "../kubelet-sim/node-simulator.js";
import { installDpo, NAMESPACE, startOperator, type OperatorProcess } from "./support.js";
import { allocateWorkload, configStatus, RolloutWatch } from "./upgrade-support.js";

/** The last commit before plugin revisions: one DaemonSet per config, RollingUpdate, no revision label. */
const OLD_COMMIT = "a69fb52";
const OLD_IMAGE = "dpo:before-revisions";

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const NAME = uniqueName("e2e-old");
const RESOURCE = `old.example/${NAME}`;
const DEVICES = 2;

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const run = promisify(execFile);

let nodes: string[] = [];
let old: OldBuild;
let sim: KubeletSimulator;
let operator: OperatorProcess | undefined;

const status = (): Promise<DevicePluginConfigStatus | undefined> => configStatus(custom, NAME);

/**
 * The CRDs the old build prints (`dpo crds`), applied over the current ones, and waited for: the API
 * server takes a moment to serve a changed CRD schema, and an object created meanwhile would get the
 * current schema's defaults (spec.upgrade), which the old code refuses.
 */
async function applyOldCrds(): Promise<void> {
  const { stdout } = await run(process.execPath, [old.entrypoint, "crds"], { maxBuffer: 16 * 1024 * 1024 });
  await kubectl(["apply", "--server-side", "--force-conflicts", "--field-manager=dpo-e2e-old", "-f", "-"], {
    input: stdout,
  });
  const probe = JSON.stringify({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: `${NAME}-probe` },
    spec: { resourceName: RESOURCE, backend: { type: "Mock", mock: { devices: 1 } } },
  });
  await waitFor("the API server to serve the old CRD schema", async (observe) => {
    const dry = await kubectl(["create", "--dry-run=server", "-o", "json", "-f", "-"], { input: probe });
    const spec = (JSON.parse(dry.stdout) as { spec: Record<string, unknown> }).spec;
    observe(Object.keys(spec));
    return !("upgrade" in spec);
  });
}

beforeAll(async () => {
  nodes = injectedCluster().nodeNames;
  old = await buildAt(OLD_COMMIT);
  await installDpo();
  await applyOldCrds();
  sim = await KubeletSimulator.start({
    kubeconfig: kc,
    nodes,
    gracePeriodMs: 60_000,
    kubeletVersions: { [nodes[0]!]: "v1.37.0", [nodes[1]!]: "v1.37.0", [nodes[2]!]: "v1.34.4" },
    images: { [OLD_IMAGE]: old.entrypoint },
  });
  operator = await startOperator([], {}, { entrypoint: old.entrypoint, pluginImage: OLD_IMAGE });
  await custom.createClusterCustomObject({
    ...GROUP,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: NAME },
      spec: { resourceName: RESOURCE, backend: { type: "Mock", mock: { devices: DEVICES } } },
    },
  });
}, 900_000);

afterAll(async () => {
  await operator?.stop();
  // Whatever happened, the next file finds the current CRDs.
  await installDpo().catch(() => undefined);
  await custom.deleteClusterCustomObject({ ...GROUP, name: NAME }).catch(() => undefined);
  await sim?.stop();
}, 120_000);

describe(`upgrading from dpo ${OLD_COMMIT} (before plugin revisions)`, () => {
  it("adopts the old DaemonSet and moves every node to the current plugin, no failed admission on Surge nodes", async () => {
    await waitFor(
      `${NAME}: Ready under the old operator`,
      async (observe) => {
        const s = await status();
        observe({ status: s?.problems, plugins: sim.plugins(), log: sim.pluginLogs(nodes[0]!).slice(-3000) });
        return (
          s?.conditions?.some((c) => c.type === "Ready" && c.status === "True") && s.nodes?.desired === 3
        );
      },
      { timeoutMs: 120_000, intervalMs: 250 },
    );
    const legacy = await pluginDaemonSet(kc, NAMESPACE, NAME);
    expect(legacy?.metadata?.name).toBe(`dpo-${NAME}`);
    expect(legacy?.metadata?.labels?.["dpo.dev/revision"]).toBeUndefined();
    await operator!.stop();
    operator = undefined;

    // What a user does: the current CRDs and RBAC, then the current operator.
    await installDpo();
    const watch = new RolloutWatch(1);
    await watch.start(kc, NAMESPACE, NAME);
    const surgeNodes = [nodes[0]!, nodes[1]!];
    const workload = allocateWorkload(sim, surgeNodes, RESOURCE);
    let result: { admissions: number; failures: string[] } | undefined;
    try {
      operator = await startOperator();
      const done = await waitFor(
        `${NAME}: the current revision on every node`,
        async (observe) => {
          const s = await status();
          observe(s?.upgrade);
          return s?.upgrade?.phase === "Complete" &&
            s.upgrade.currentRevision === s.upgrade.updateRevision &&
            s.upgrade.updated === 3
            ? s
            : undefined;
        },
        { timeoutMs: 240_000, intervalMs: 250 },
      );
      expect(done.upgrade?.currentRevision).not.toBe("legacy");
      await waitFor("the old DaemonSet to be gone", () =>
        watch.daemonSets.has(`dpo-${NAME}`) ? undefined : true,
      );
    } finally {
      result = await workload.stop();
      watch.stop();
    }
    expect(watch.violations).toEqual([]);
    expect(watch.maxBetween, "nodes between the old and the new plugin at once").toBeLessThanOrEqual(1);
    expect([...watch.surged].sort()).toEqual([...surgeNodes].sort());
    expect([...watch.replaced]).toEqual([nodes[2]!]);
    expect(result?.admissions).toBeGreaterThan(0);
    expect(result?.failures).toEqual([]);
    // Every node's kubelet advertises the devices of the current plugin.
    for (const node of nodes) {
      await waitFor(
        `${node} to advertise ${DEVICES}`,
        () => sim.capacity(node, RESOURCE)?.allocatable === DEVICES,
      );
    }
  });
});
