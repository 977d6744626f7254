// A plugin upgrade while the operator's leader is killed again and again: two replicas with leader
// election, the leader SIGKILLed as soon as it has led for a moment, a new replica started each time.
// The rollout must finish; from a watch of the DaemonSets (not from anything the operator says about
// itself): at most maxUnavailable nodes between revisions at any time, no node moved twice, and a
// node's recorded start never rewritten (which a second acting leader, or a leader acting on a stale
// cache, would do). The full-size run (50 nodes, a kill every 10 s) is `make chaos-upgrade`.
import { CustomObjectsApi, Watch, type V1DaemonSet } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import {
  ANNOTATION_UPGRADE_STATE,
  placementOfDaemonSet,
  type UpgradeState,
} from "../../src/operator/upgrade/rollout.js";
import { injectedCluster, kubeConfigFromInjected, uniqueName, waitFor } from "../cluster/helpers.js";
import { KubeletSimulator } from "../kubelet-sim/node-simulator.js";
import { installDpo, NAMESPACE, startOperator, type OperatorProcess } from "./support.js";

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const NAME = uniqueName("e2e-chaos");
const RESOURCE = `chaos.example/${NAME}`;
const KILLS = Number(process.env["DPO_CHAOS_KILLS"] ?? "4");
/** How long a leader leads before it is killed. */
const LEAD_MS = Number(process.env["DPO_CHAOS_LEAD_MS"] ?? "1500");

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const leaseName = uniqueName("dpo-chaos-leader");
const leaderArgs = [
  "--leader-elect",
  "true",
  "--leader-election-id",
  leaseName,
  "--lease-duration",
  "4",
  "--renew-deadline",
  "3",
  "--retry-period",
  "1",
  "--status-write-interval",
  "250",
];

let nodes: string[] = [];
let sim: KubeletSimulator;
const replicas: OperatorProcess[] = [];

async function status(): Promise<DevicePluginConfigStatus | undefined> {
  const c = (await custom.getClusterCustomObject({ ...GROUP, name: NAME })) as {
    status?: DevicePluginConfigStatus;
  };
  return c.status;
}

async function leader(): Promise<OperatorProcess | undefined> {
  for (const r of replicas) {
    if ((await r.metric("dpo_operator_leader").catch(() => 0)) === 1) return r;
  }
  return undefined;
}

/** What a DaemonSet watch shows of one rollout, checked as it goes. */
class RolloutObserver {
  readonly daemonSets = new Map<string, V1DaemonSet>();
  maxBetween = 0;
  readonly violations: string[] = [];
  /** Nodes that joined the new revision, and nodes that left the base, each at most once. */
  private readonly joined = new Set<string>();
  private readonly left = new Set<string>();
  private readonly startedAt = new Map<string, number>();
  /** The DaemonSet every node ran when the watch began; once another one is the base, the rollout is over. */
  private baseName: string | undefined;

  constructor(private readonly limit: number) {}

  onEvent(type: string, ds: V1DaemonSet): void {
    const name = ds.metadata!.name!;
    if (type === "DELETED") this.daemonSets.delete(name);
    else this.daemonSets.set(name, ds);
    let except: Set<string> | undefined;
    let exceptFrom: string | undefined;
    let only = new Set<string>();
    for (const d of this.daemonSets.values()) {
      const p = placementOfDaemonSet(d);
      if ("except" in p) {
        except = new Set(p.except);
        exceptFrom = d.metadata?.name;
      } else only = new Set([...only, ...p.only]);
      const raw = d.metadata?.annotations?.[ANNOTATION_UPGRADE_STATE];
      if (raw === undefined) continue;
      const state = JSON.parse(raw) as UpgradeState;
      for (const [node, rec] of Object.entries(state.nodes)) {
        if (rec.startedAt === undefined) continue;
        const before = this.startedAt.get(node);
        if (before !== undefined && before !== rec.startedAt) {
          this.violations.push(`${node}: start rewritten ${before} → ${rec.startedAt}`);
        }
        this.startedAt.set(node, rec.startedAt);
      }
    }
    this.baseName ??= exceptFrom;
    // The base is gone, or the new revision became the base: the rollout is over.
    if (except === undefined || exceptFrom !== this.baseName) return;
    for (const n of only) {
      if (!this.joined.has(n)) this.joined.add(n);
    }
    for (const n of this.joined) {
      if (!only.has(n)) this.violations.push(`${n}: left the new revision during a forward rollout`);
    }
    for (const n of except) this.left.add(n);
    for (const n of this.left) {
      if (!except.has(n)) this.violations.push(`${n}: rejoined the base during a forward rollout`);
    }
    const between = [...new Set([...except, ...only])].filter((n) => except.has(n) !== only.has(n));
    this.maxBetween = Math.max(this.maxBetween, between.length);
    if (between.length > this.limit)
      this.violations.push(`${between.length} nodes between revisions: ${between.join(", ")}`);
  }
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

    const observer = new RolloutObserver(1);
    const watch = await new Watch(kc).watch(
      `/apis/apps/v1/namespaces/${NAMESPACE}/daemonsets`,
      { labelSelector: `dpo.dev/config=${NAME}` },
      (type, ds: V1DaemonSet) => observer.onEvent(type, ds),
      () => undefined,
    );
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
      watch.abort();
    }
    expect(kills, "leaders killed during the rollout").toBeGreaterThan(0);
    expect(observer.violations).toEqual([]);
    expect(observer.maxBetween, "nodes between revisions at once").toBeLessThanOrEqual(1);
    expect(observer.maxBetween, "the watch saw the rollout move").toBe(1);
  });
});
