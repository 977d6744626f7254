// No orphaned fences or records after a failover (issue 32 item 3, ADR 0009): two operator replicas with
// leader election over simulated nodes; in each round a new config's plugin is upgraded (Replace or Surge),
// or a new config takes its resource over from an incumbent plugin DaemonSet (ADR 0012), the leader is
// SIGKILLed at a step of it as the Nodes (and the incumbent) show it, and the config is deleted at a point of the
// round (before the kill, while the standby waits out the lease, with every replica down and what the
// config owned collected, once one leads again, or not at all). Within a bound of the
// later of the kill and the delete: a deleted config has left no mark on any Node (and, once garbage
// collection has run, no DaemonSet and no plugin pod); a live one has finished its rollout with every node unfenced and served by exactly one
// plugin pod, and is then deleted and checked the same way. In a takeover, a deleted config has also given the
// incumbent back (its own fields, no record, one running pod of it on every node), and a live one has parked
// it (no pod of it left). The first round is the case the issue names (deleted while no operator runs, after
// the first step of a Replace), the second its takeover's (after the incumbent was readied); the others
// follow from the seed.
//
// `make test` runs DPO_FAILOVER_ROUNDS=3 (default) with a random seed; DPO_FAILOVER_SEED replays one, and
// DPO_FAILOVER_SCENARIOS (a comma-separated list of Replace, Surge, Takeover) keeps to some. The full run is
// `make chaos-failover` (every combination, twice over).
import { AppsV1Api, CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { injectedCluster, kubeConfigFromInjected, kubectl, uniqueName, waitFor } from "../cluster/helpers.js";
import { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import {
  deleteConfigsAndWait,
  installDpo,
  leaderElectionArgs,
  NAMESPACE,
  repo,
  startOperator,
  type OperatorProcess,
} from "./support.js";
import { configStatus } from "./upgrade-support.js";
import {
  describeCase,
  failoverCases,
  marksLeft,
  pluginObjectsLeft,
  SCENARIOS,
  servingProblems,
  type FailoverCase,
  type ScenarioName,
} from "./failover-chaos-support.js";
import {
  INCUMBENT_IDS,
  INCUMBENT_NAMESPACE,
  incumbentNotGivenBack,
  incumbentNotParked,
  incumbentObjects,
  ownFields,
  readIncumbent,
  takeoverSpec,
} from "./failover-chaos-takeover.js";

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const ROUNDS = Number(process.env["DPO_FAILOVER_ROUNDS"] ?? "3");
const ONLY = process.env["DPO_FAILOVER_SCENARIOS"]?.split(",") as ScenarioName[] | undefined;
const SEED = Number(process.env["DPO_FAILOVER_SEED"] ?? String(Date.now() % 2 ** 31));
/** From the later of the kill and the delete to the end state; the lease (4 s) has to run out within it. */
const BOUND_MS = Number(process.env["DPO_FAILOVER_BOUND_MS"] ?? "30000");
/** Garbage collection of a deleted config's DaemonSets and their pods (discovery of the CRD included). */
const GC_BOUND_MS = 90_000;

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);
const leaseName = uniqueName("dpo-failover-leader");
const leaderArgs = [
  ...leaderElectionArgs(leaseName),
  "--status-write-interval",
  "250",
  "--fence-settle",
  "1",
];

let nodes: string[] = [];
let sim: KubeletSimulator;
const replicas: OperatorProcess[] = [];
const created: string[] = [];
/** The incumbent DaemonSets (and their ConfigMaps, of the same name) the takeover rounds made. */
const incumbents: string[] = [];
/** Per round: the case and how long its end state took after the later of the kill and the delete. */
const results: { round: number; case: string; endStateMs: number; cleanedMs?: number }[] = [];

async function leader(): Promise<OperatorProcess | undefined> {
  for (const r of replicas) {
    if ((await r.metric("dpo_operator_leader").catch(() => 0)) === 1) return r;
  }
  return undefined;
}

const deleteConfig = (name: string): Promise<unknown> =>
  custom.deleteClusterCustomObject({ ...GROUP, name }).catch(() => undefined);

/**
 * Waits for a deleted config's marks to be off every Node within the bound from `since`, and for what
 * `alsoLeft` names to be gone too (a takeover's incumbent not given back), and returns how long it took;
 * then for its DaemonSets, plugin pods and reports to be gone, within GC_BOUND_MS: that is garbage
 * collection's work, which a control plane that started just now does only once it watches the CRD.
 */
async function gone(
  name: string,
  since: number,
  what: string,
  alsoLeft: () => Promise<string[]> = () => Promise.resolve([]),
): Promise<number> {
  await waitFor(
    `${what}: ${name}'s marks off every Node (a takeover's incumbent given back)`,
    async (observe) => {
      const left = [...(await marksLeft(core, name)), ...(await alsoLeft())];
      observe(left);
      return left.length === 0;
    },
    { timeoutMs: Math.max(1, since + BOUND_MS - Date.now()), intervalMs: 100 },
  );
  const took = Date.now() - since;
  await waitFor(
    `${what}: ${name}'s DaemonSets, plugin pods and reports gone`,
    async (observe) => {
      const left = await pluginObjectsLeft(core, apps, custom, NAMESPACE, name);
      observe(left);
      return left.length === 0;
    },
    { timeoutMs: GC_BOUND_MS, intervalMs: 250 },
  );
  return took;
}

beforeAll(async () => {
  nodes = injectedCluster().nodeNames;
  console.log(`failover chaos: seed ${SEED}, ${ROUNDS} rounds (replay with DPO_FAILOVER_SEED=${SEED})`);
  await installDpo();
  // The takeover's rights, as the opt-in component grants them.
  for (const file of ["cluster_role.yaml", "cluster_role_binding.yaml"])
    await kubectl(["apply", "--server-side", "-f", `${repo}/config/components/takeover/${file}`]);
  // v1.37.0 everywhere: Surge surges; Replace is asked for by its strategy.
  sim = await KubeletSimulator.start({
    kubeconfig: kc,
    nodes,
    gracePeriodMs: 60_000,
    kubeletVersions: Object.fromEntries(nodes.map((n) => [n, "v1.37.0"])),
  });
  replicas.push(await startOperator(leaderArgs), await startOperator(leaderArgs));
}, 180_000);

afterAll(async () => {
  await deleteConfigsAndWait(kc, created).catch(() => undefined);
  for (const name of incumbents) await deleteIncumbent(name);
  for (const r of replicas) await r.stop().catch(() => undefined);
  await sim?.stop();
  console.log(`failover chaos: seed ${SEED}: ${JSON.stringify(results)}`);
}, 120_000);

async function deleteIncumbent(name: string): Promise<void> {
  await apps.deleteNamespacedDaemonSet({ name, namespace: INCUMBENT_NAMESPACE }).catch(() => undefined);
  await core.deleteNamespacedConfigMap({ name, namespace: INCUMBENT_NAMESPACE }).catch(() => undefined);
}

/**
 * A takeover round's incumbent: its DaemonSet serving `resource` on every node. Returns its three fields as
 * created (ownFields), which the config must give back.
 */
async function startIncumbent(name: string, resource: string, what: string): Promise<string> {
  const { daemonSet, configMap } = incumbentObjects(name, resource);
  incumbents.push(name);
  await kubectl(["apply", "--server-side", "-f", "-"], { input: JSON.stringify(configMap) });
  const made = await apps.createNamespacedDaemonSet({ namespace: INCUMBENT_NAMESPACE, body: daemonSet });
  for (const node of nodes)
    await waitFor(
      `${what}: the incumbent advertising ${INCUMBENT_IDS.length} devices on ${node}`,
      () => (sim.capacity(node, resource)?.allocatable === INCUMBENT_IDS.length ? true : undefined),
      { timeoutMs: 60_000, intervalMs: 100 },
    );
  return ownFields(made);
}

const leaderNow = (what: string): Promise<OperatorProcess> =>
  waitFor(`${what}: a leader`, () => leader(), { timeoutMs: 30_000, intervalMs: 100 });

/**
 * An upgrade round's start: the config Ready, then its plugin changed. Returns the revision it left and the
 * replica that led when it was changed.
 */
async function upgradeStarted(
  name: string,
  what: string,
): Promise<{ from: string; current: OperatorProcess }> {
  const first = await waitFor(
    `${what}: ${name} Ready`,
    async (observe) => {
      const s: DevicePluginConfigStatus | undefined = await configStatus(custom, name);
      observe(s?.conditions);
      return s?.upgrade?.phase === "Complete" &&
        s.conditions?.some((cond) => cond.type === "Ready" && cond.status === "True")
        ? s
        : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 250 },
  );
  const current = await leaderNow(what);
  await custom.patchClusterCustomObject({
    ...GROUP,
    name,
    body: [{ op: "add", path: "/spec/plugin", value: { logLevel: "debug" } }],
  });
  return { from: first.upgrade!.updateRevision, current };
}

async function round(index: number, c: FailoverCase): Promise<void> {
  const scenario = SCENARIOS[c.scenario];
  const what = `seed ${SEED} round ${index} (${describeCase(c)})`;
  const name = uniqueName(`e2e-failover-${index}`);
  const resourceName = `failover.example/${name}`;
  const incumbent = scenario.takeover ? `legacy-${name}`.slice(0, 63) : undefined;
  const own = incumbent !== undefined ? await startIncumbent(incumbent, resourceName, what) : "";
  // A takeover is the config's first rollout (from the incumbent): the leader is known before it starts.
  const leading = incumbent !== undefined ? await leaderNow(what) : undefined;
  created.push(name);
  await custom.createClusterCustomObject({
    ...GROUP,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name },
      spec: {
        resourceName,
        backend: { type: "Mock", mock: { devices: 2, ...(incumbent ? { ids: INCUMBENT_IDS } : {}) } },
        upgrade: scenario.upgrade,
        ...(incumbent ? { takeover: takeoverSpec(incumbent) } : {}),
      },
    },
  });
  const { from, current } =
    leading !== undefined ? { from: "incumbent", current: leading } : await upgradeStarted(name, what);
  const target = scenario.steps.indexOf(c.step);
  const seen = await waitFor(
    `${what}: a node at ${c.step} or past it`,
    async (observe) => {
      const ds = incumbent !== undefined ? await readIncumbent(apps, incumbent) : undefined;
      const steps = (await core.listNode()).items
        .filter((n) => nodes.includes(n.metadata?.name ?? ""))
        .map((n) => scenario.stepOf(n, name, ds));
      observe(steps.map((s) => scenario.steps[s] ?? "untouched"));
      const furthest = Math.max(...steps);
      return furthest >= target ? scenario.steps[furthest] : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 20 },
  );
  // A deleted takeover's incumbent is given back within the bound as its config's marks come off.
  const notGivenBack = (): Promise<string[]> =>
    incumbent !== undefined ? incumbentNotGivenBack(core, apps, incumbent, own, nodes) : Promise.resolve([]);

  let deletedAt: number | undefined;
  if (c.deleteAt === "beforeKill") {
    await deleteConfig(name);
    deletedAt = Date.now();
  }
  await current.stop("SIGKILL");
  const killedAt = Date.now();
  replicas.splice(replicas.indexOf(current), 1);
  if (c.deleteAt === "leaderless") {
    // The standby cannot lead before the dead leader's lease (4 s) runs out.
    expect(await leader(), `${what}: no replica leads right after the kill`).toBeUndefined();
    await deleteConfig(name);
    deletedAt = Date.now();
  }
  if (c.deleteAt === "operatorDown") {
    // Every replica down; the config deleted and what it owned collected before any starts again.
    for (const r of replicas.splice(0)) await r.stop("SIGKILL");
    await deleteConfig(name);
    await waitFor(
      `${what}: garbage collection of ${name}'s DaemonSets, pods and reports with no operator running`,
      async (observe) => {
        const left = await pluginObjectsLeft(core, apps, custom, NAMESPACE, name);
        observe(left);
        return left.length === 0;
      },
      { timeoutMs: GC_BOUND_MS, intervalMs: 250 },
    );
    replicas.push(await startOperator(leaderArgs));
    deletedAt = Date.now();
  }
  replicas.push(await startOperator(leaderArgs));
  if (c.deleteAt === "afterRestart") {
    await waitFor(`${what}: a leader again`, () => leader(), { timeoutMs: 30_000, intervalMs: 100 });
    await deleteConfig(name);
    deletedAt = Date.now();
  }
  const since = Math.max(killedAt, deletedAt ?? 0);
  console.log(`${what}: killed at ${seen}`);

  if (deletedAt !== undefined) {
    const endStateMs = await gone(name, since, what, notGivenBack);
    results.push({ round: index, case: describeCase(c), endStateMs });
    if (incumbent !== undefined) await deleteIncumbent(incumbent);
    return;
  }
  await waitFor(
    `${what}: ${name} upgraded, every node unfenced and served by exactly one plugin`,
    async (observe) => {
      const s = await configStatus(custom, name);
      const problems = [
        ...(await servingProblems(core, NAMESPACE, name, nodes)),
        ...(incumbent !== undefined ? await incumbentNotParked(core, apps, incumbent, name, nodes) : []),
      ];
      observe({ upgrade: s?.upgrade, takeover: s?.takeover, problems });
      return (
        (incumbent === undefined || s?.takeover?.phase === "Complete") &&
        s?.upgrade?.phase === "Complete" &&
        s.upgrade.updateRevision !== from &&
        s.upgrade.updated === nodes.length &&
        problems.length === 0
      );
    },
    { timeoutMs: BOUND_MS, intervalMs: 100 },
  );
  const endStateMs = Date.now() - since;
  await deleteConfig(name);
  const cleanedMs = await gone(name, Date.now(), `${what}, deleted after its rollout`, notGivenBack);
  results.push({ round: index, case: describeCase(c), endStateMs, cleanedMs });
  if (incumbent !== undefined) await deleteIncumbent(incumbent);
}

describe("a leader killed at each step of a rollout, its config deleted at random points", () => {
  const cases = failoverCases(SEED, ROUNDS, ONLY);
  it(
    `leaves every node unfenced and unmarked, or served by one plugin, in ${ROUNDS} rounds`,
    async () => {
      for (const [i, c] of cases.entries()) await round(i, c);
      expect(results).toHaveLength(cases.length);
    },
    120_000 + ROUNDS * 120_000,
  );
});
