// A plugin upgrade while the operator's leader is killed again and again: two replicas with leader
// election, the leader SIGKILLed as soon as it has led for a moment, a new replica started each time.
// The rollout must finish; from a watch of the DaemonSets (not from anything the operator says about
// itself): at most maxUnavailable nodes between revisions at any time, no node moved twice, and a
// node's recorded start never rewritten (which a second acting leader, or a leader acting on a stale
// cache, would do). The full-size run (50 nodes, a kill every 10 s) is `make chaos-upgrade`.
import { CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { injectedCluster, kubeConfigFromInjected, uniqueName, waitFor } from "../cluster/helpers.js";
import { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import { installDpo, NAMESPACE, leaderElectionArgs, startOperator, type OperatorProcess } from "./support.js";
import { configStatus, RolloutWatch } from "./upgrade-support.js";

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const NAME = uniqueName("e2e-chaos");
const RESOURCE = `chaos.example/${NAME}`;
const KILLS = Number(process.env["DPO_CHAOS_KILLS"] ?? "4");
/** How long a leader leads before it is killed. */
const LEAD_MS = Number(process.env["DPO_CHAOS_LEAD_MS"] ?? "1500");

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const leaseName = uniqueName("dpo-chaos-leader");
const leaderArgs = [...leaderElectionArgs(leaseName), "--status-write-interval", "250"];

let nodes: string[] = [];
let sim: KubeletSimulator;
const replicas: OperatorProcess[] = [];

const status = (): Promise<DevicePluginConfigStatus | undefined> => configStatus(custom, NAME);

async function leader(): Promise<OperatorProcess | undefined> {
  for (const r of replicas) {
    if ((await r.metric("dpo_operator_leader").catch(() => 0)) === 1) return r;
  }
  return undefined;
}

beforeAll(async () => {
  nodes = injectedCluster().nodeNames;
  await installDpo();
  sim = await KubeletSimulator.start({
    kubeconfig: kc,
    nodes,
    gracePeriodMs: 60_000,
    kubeletVersions: Object.fromEntries(nodes.map((n, i) => [n, i % 3 === 2 ? "v1.34.4" : "v1.37.0"])),
  });
  replicas.push(await startOperator(leaderArgs), await startOperator(leaderArgs));
  await custom.createClusterCustomObject({
    ...GROUP,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: NAME },
      spec: {
        resourceName: RESOURCE,
        backend: { type: "Mock", mock: { devices: 2 } },
        upgrade: { maxUnavailable: 1, progressDeadlineSeconds: 180 },
      },
    },
  });
}, 180_000);

afterAll(async () => {
  await custom.deleteClusterCustomObject({ ...GROUP, name: NAME }).catch(() => undefined);
  for (const r of replicas) await r.stop().catch(() => undefined);
  await sim?.stop();
}, 120_000);

describe("a plugin upgrade while the leader is killed", () => {
  it(`finishes within maxUnavailable, moving each node once, through ${KILLS} leader kills`, async () => {
    const first = await waitFor(
      `${NAME}: Ready, upgrade Complete`,
      async (observe) => {
        const s = await status();
        observe(s);
        return s?.upgrade?.phase === "Complete" &&
          s.conditions?.some((c) => c.type === "Ready" && c.status === "True")
          ? s
          : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 250 },
    );
    const from = first.upgrade!.updateRevision;

    const observer = new RolloutWatch(1);
    await observer.start(kc, NAMESPACE, NAME);
    let kills = 0;
    try {
      await custom.patchClusterCustomObject({
        ...GROUP,
        name: NAME,
        body: [{ op: "add", path: "/spec/plugin", value: { logLevel: "debug" } }],
      });
      const done = (s: DevicePluginConfigStatus | undefined): boolean =>
        s?.upgrade?.phase === "Complete" &&
        s.upgrade.updateRevision !== from &&
        s.upgrade.updated === nodes.length;
      while (kills < KILLS && !done(await status())) {
        const current = await waitFor("a leader", () => leader(), { timeoutMs: 30_000, intervalMs: 100 });
        const ledFrom = Date.now();
        await waitFor(`the leader to lead for ${LEAD_MS} ms`, () => Date.now() - ledFrom >= LEAD_MS, {
          timeoutMs: LEAD_MS + 5_000,
          intervalMs: 50,
        });
        await current.stop("SIGKILL");
        replicas.splice(replicas.indexOf(current), 1);
        kills++;
        replicas.push(await startOperator(leaderArgs));
      }
      const final = await waitFor(
        `${NAME}: the new revision Complete on every node`,
        async (observe) => {
          const s = await status();
          observe({ upgrade: s?.upgrade, kills, violations: observer.violations });
          return done(s) ? s : undefined;
        },
        { timeoutMs: 240_000, intervalMs: 250 },
      );
      expect(final.upgrade?.summary).toBe(`${nodes.length}/${nodes.length}`);
    } finally {
      observer.stop();
    }
    expect(kills, "leaders killed during the rollout").toBeGreaterThan(0);
    console.log(`rollout watches under chaos: ${JSON.stringify(observer.health())}`);
    expect(observer.liveness(nodes), "the rollout's watches were alive").toEqual([]);
    expect(observer.violations).toEqual([]);
    expect(observer.maxBetween, "nodes between revisions at once").toBeLessThanOrEqual(1);
    expect(observer.maxBetween, "the watch saw the rollout move").toBe(1);
  }, 360_000);
});
