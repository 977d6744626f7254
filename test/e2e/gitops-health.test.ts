// What GitOps tools make of a DevicePluginConfig, phase by phase, computed by the real engines: kstatus
// (sigs.k8s.io/cli-utils, what Flux's health checks read) and config/argocd/health.lua run the way Argo CD
// runs a custom health check (tools/gitops-health). Each phase is a version of the config the API server
// actually served, taken from a watch (or from the API's answer to a write), never a hand-made object.
//
// DPO_GITOPS_HEALTH_FIXTURES=<dir> writes the captured objects there (test/fixtures/gitops-health holds
// the ones test/unit/tools/gitops-health/health.test.ts reads; run prettier on them), and DPO_GITOPS_HEALTH_TABLE=1
// prints the table that docs/deploy.md shows.
import { CustomObjectsApi, Watch } from "@kubernetes/client-node";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { buildGitopsHealth, gitopsHealth, type GitopsHealth } from "../../tools/gitops-health/harness.js";
import { injectedCluster, kubeConfigFromInjected, uniqueName, waitFor } from "../cluster/helpers.js";
import { oldestKubernetesVersion } from "../../tools/real-node/artifacts.js";
import { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import { installDpo, NAMESPACE, startOperator, type OperatorProcess } from "./support.js";

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const NAME = uniqueName("e2e-gitops");
const OTHER = `${NAME}-second`;
const RESOURCE = `gitops.example/${NAME}`;
const DEVICES = 2;
const HEALTH_FILE = "/run/dpo/e2e-gitops-health.json";
/** In fixtures the random names become these, so the unit test's expectations stay put. */
const FIXTURE_NAMES: [string, string][] = [
  [OTHER, "example-second"],
  [NAME, "example"],
];

interface Config {
  apiVersion: string;
  kind: string;
  metadata: { name: string; generation?: number; resourceVersion?: string; managedFields?: unknown };
  spec: Record<string, unknown>;
  status?: DevicePluginConfigStatus;
}

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);

let nodes: string[] = [];
let sim: KubeletSimulator;
let operator: OperatorProcess;
let harness: string;

/**
 * Every version of a config the API server sent on a watch, in order. client-node ends a watch after 30 s
 * without events; it is resumed from the last resourceVersion seen (from the current object if that is
 * too old), so no version in between is missed.
 */
class History {
  readonly seen: Config[] = [];
  private abort: (() => void) | undefined;
  private stopped = false;
  private resume = true;
  error: unknown;

  constructor(private readonly name: string) {}

  async start(): Promise<void> {
    const rv = this.resume ? this.seen.at(-1)?.metadata.resourceVersion : undefined;
    this.resume = true;
    const request = await new Watch(kc).watch(
      "/apis/dpo.dev/v1beta1/devicepluginconfigs",
      { fieldSelector: `metadata.name=${this.name}`, ...(rv ? { resourceVersion: rv } : {}) },
      (type, obj: Config) => {
        if (type === "ADDED" || type === "MODIFIED") this.seen.push(obj);
        else if (type === "ERROR") this.resume = false; // 410 Gone: start again from the current object
      },
      (err) => {
        if (err) this.error = err;
        if (!this.stopped) this.start().catch((e: unknown) => (this.error = e));
      },
    );
    this.abort = () => request.abort();
    if (this.stopped) request.abort();
  }

  stop(): void {
    this.stopped = true;
    this.abort?.();
  }

  /** The first version from index `from` on that `pred` holds for. */
  async first(
    what: string,
    from: number,
    pred: (c: Config) => boolean,
    timeoutMs = 120_000,
  ): Promise<Config> {
    return waitFor(
      `${what} (watch of ${this.name})`,
      (observe) => {
        const last = this.seen.at(-1);
        observe({
          lastWatchError: this.error,
          versions: this.seen.length - from,
          last: last && { generation: last.metadata.generation, status: last.status },
        });
        return this.seen.slice(from).find(pred);
      },
      { timeoutMs, intervalMs: 100 },
    );
  }
}

const history = new History(NAME);

function condition(c: Config, type: string) {
  return c.status?.conditions?.find((x) => x.type === type);
}

const observed = (c: Config): boolean =>
  c.status?.observedGeneration !== undefined && c.status.observedGeneration === c.metadata.generation;

/** A phase as the table in docs/deploy.md shows it. */
interface Measured {
  phase: string;
  fixture: string;
  ready: string;
  health: GitopsHealth;
  object: Config;
}
const measured: Measured[] = [];

/**
 * The Ready condition as `kubectl wait --for=condition=Ready` weighs it: a condition written for an older
 * generation (its observedGeneration) does not count, so the table says which generation it is for.
 */
function readyCell(object: Config): string {
  const ready = condition(object, "Ready");
  if (!ready) return "—";
  const stale =
    ready.observedGeneration !== undefined && ready.observedGeneration < object.metadata.generation!;
  return stale ? `${ready.status} (generation ${ready.observedGeneration})` : ready.status;
}

/**
 * Runs both engines on `object` and checks the statuses exactly, and that each message is there and
 * says what is going on (every string in `mentions` for that engine).
 */
async function expectPhase(
  phase: string,
  fixture: string,
  object: Config,
  want: {
    kstatus: string;
    argocd: string;
    kstatusMentions: string[];
    argocdMentions: string[];
  },
): Promise<void> {
  const [health] = await gitopsHealth(harness, [object]);
  const context = `${phase}: ${JSON.stringify(health)} for status ${JSON.stringify(object.status)}`;
  expect(health!.kstatus.error, context).toBeUndefined();
  expect(health!.argocd.error, context).toBeUndefined();
  expect(health!.kstatus.status, context).toBe(want.kstatus);
  expect(health!.argocd.status, context).toBe(want.argocd);
  expect(health!.kstatus.message, context).not.toBe("");
  expect(health!.argocd.message, context).not.toBe("");
  for (const m of want.kstatusMentions) expect(health!.kstatus.message, context).toContain(m);
  for (const m of want.argocdMentions) expect(health!.argocd.message, context).toContain(m);
  measured.push({
    phase,
    fixture,
    ready: readyCell(object),
    health: health!,
    object,
  });
}

function writeHealth(node: string, content: Record<string, unknown>): void {
  sim.writeHostFile(node, HEALTH_FILE, JSON.stringify(content));
}

function manifest(name: string) {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name },
    spec: {
      resourceName: RESOURCE,
      backend: { type: "Mock", mock: { devices: DEVICES, idPrefix: "g", healthFile: HEALTH_FILE } },
      upgrade: { maxUnavailable: 1, progressDeadlineSeconds: 60 },
    },
  };
}

async function patch(name: string, ops: object[]): Promise<Config> {
  return (await custom.patchClusterCustomObject({ ...GROUP, name, body: ops })) as Config;
}

const allReady = (c: Config): boolean =>
  observed(c) &&
  condition(c, "Ready")?.status === "True" &&
  condition(c, "Reconciling")?.status === "False" &&
  condition(c, "Degraded")?.status === "False" &&
  c.status?.upgrade?.phase === "Complete" &&
  c.status.nodes?.summary === "3/3" &&
  c.status.devices?.summary === `${3 * DEVICES}/${3 * DEVICES}`;

beforeAll(async () => {
  nodes = injectedCluster().nodeNames.slice(0, 3);
  expect(nodes).toHaveLength(3);
  [harness] = await Promise.all([buildGitopsHealth(), installDpo()]);
  // Kubelets of the oldest supported release, so upgrades replace: a rollback then restarts the previous
  // plugin and is RollingBack for a while. On 1.37 kubelets the old plugin never stopped, the rollback ends at
  // once, and its RollingBack status can fall within one status-write interval and never be written.
  const oldest = await oldestKubernetesVersion();
  sim = await KubeletSimulator.start({
    kubeconfig: kc,
    nodes,
    gracePeriodMs: 60_000,
    kubeletVersions: Object.fromEntries(nodes.map((n) => [n, oldest])),
  });
  operator = await startOperator(["--status-write-interval", "250"]);
  await history.start();
}, 300_000);

afterAll(async () => {
  history.stop();
  for (const name of [OTHER, NAME]) {
    await custom.deleteClusterCustomObject({ ...GROUP, name }).catch(() => undefined);
  }
  await operator?.stop();
  await sim?.stop();
  const dir = process.env.DPO_GITOPS_HEALTH_FIXTURES;
  if (dir) {
    mkdirSync(dir, { recursive: true });
    for (const m of measured) {
      const { managedFields: _, ...metadata } = m.object.metadata;
      let text = `${JSON.stringify({ ...m.object, metadata }, null, 2)}\n`;
      for (const [from, to] of FIXTURE_NAMES) text = text.replaceAll(from, to);
      writeFileSync(join(dir, `${m.fixture}.json`), text);
    }
  }
  if (process.env.DPO_GITOPS_HEALTH_TABLE) {
    const cell = (s: string): string => s.replaceAll("|", "\\|");
    const rows = measured.map(
      (m) =>
        `| ${m.phase} | ${m.ready} | ${m.health.kstatus.status}: ${cell(m.health.kstatus.message)} | ${m.health.argocd.status}: ${cell(m.health.argocd.message)} |`,
    );
    let table = ["| Phase | Ready | kstatus | Argo CD |", "| --- | --- | --- | --- |", ...rows].join("\n");
    for (const [from, to] of FIXTURE_NAMES) table = table.replaceAll(from, to);
    console.log(table);
  }
}, 120_000);

describe("GitOps health of a DevicePluginConfig through its life, from the real engines", () => {
  it("is progressing before the operator has seen a new config", async () => {
    const created = (await custom.createClusterCustomObject({ ...GROUP, body: manifest(NAME) })) as Config;
    await expectPhase("Just applied, not yet seen by the operator", "created", created, {
      kstatus: "InProgress",
      argocd: "Progressing",
      kstatusMentions: ["generation"],
      argocdMentions: ["operator"],
    });
  });

  it("is Current and Healthy once every node advertises the devices", async () => {
    const ready = await history.first("Ready on 3/3 nodes", 0, allReady);
    await expectPhase("Ready", "ready", ready, {
      kstatus: "Current",
      argocd: "Healthy",
      kstatusMentions: ["Ready"],
      argocdMentions: ["3/3 nodes ready"],
    });
  });

  it("stays Current and Healthy with an unhealthy device, and Argo CD shows it", async () => {
    const node = nodes[1]!;
    const from = history.seen.length;
    writeHealth(node, { "g-1": { health: "Unhealthy", reason: "Overheated" } });
    const degraded = await history.first(
      "Ready and Degraded by UnhealthyDevices, allocatable one less",
      from,
      // Settled: the kubelet took the device out of allocatable, as the plugin reports it (before that the
      // node is briefly NotReady with CapacityMismatch).
      (c) =>
        observed(c) &&
        condition(c, "Ready")?.status === "True" &&
        condition(c, "Degraded")?.reason === "UnhealthyDevices" &&
        c.status?.devices?.summary === `${3 * DEVICES - 1}/${3 * DEVICES}`,
    );
    await expectPhase("Ready, one device unhealthy (Degraded=True)", "ready-unhealthy-device", degraded, {
      kstatus: "Current",
      argocd: "Healthy",
      kstatusMentions: ["Ready"],
      argocdMentions: ["3/3 nodes ready", "UnhealthyDevices", "1 of 3 nodes"],
    });
    const healed = history.seen.length;
    writeHealth(node, {});
    await history.first("healthy again", healed, allReady);
  });

  it("is in progress while a node's plugin is down", async () => {
    const node = nodes[2]!;
    const from = history.seen.length;
    // This config's plugin: the tier's files share the nodes, and another config's may run there too.
    const slot = `${NAMESPACE}/${NAME}`;
    await sim.killPlugin(node, "SIGKILL", slot);
    const down = await history.first(
      "Ready=False NodesNotReady",
      from,
      (c) => observed(c) && condition(c, "Ready")?.reason === "NodesNotReady",
    );
    await expectPhase("A node's plugin down", "plugin-down", down, {
      kstatus: "InProgress",
      argocd: "Progressing",
      kstatusMentions: [node],
      argocdMentions: ["NodesNotReady", node],
    });
    const back = history.seen.length;
    sim.restartPlugin(node, slot);
    await history.first("Ready again after the plugin restarted", back, allReady);
  });

  it("is Failed and Degraded when it yields its resource name to another config", async () => {
    const other = new History(OTHER);
    await other.start();
    try {
      await custom.createClusterCustomObject({ ...GROUP, body: manifest(OTHER) });
      const stalled = await other.first(
        "the second config Stalled by ResourceNameConflict",
        0,
        (c) => observed(c) && condition(c, "Stalled")?.status === "True",
      );
      expect(condition(stalled, "Stalled")?.reason).toBe("ResourceNameConflict");
      await expectPhase("Stalled: resource name served by another config", "stalled-conflict", stalled, {
        kstatus: "Failed",
        argocd: "Degraded",
        kstatusMentions: [NAME, RESOURCE],
        argocdMentions: ["ResourceNameConflict", NAME],
      });
    } finally {
      other.stop();
      await custom.deleteClusterCustomObject({ ...GROUP, name: OTHER });
    }
  });

  it("is in progress from the moment the spec changes until an upgrade completes, paused or not", async () => {
    const from = history.seen.length;
    const changed = await patch(NAME, [
      { op: "add", path: "/spec/plugin", value: { logLevel: "debug" } },
      { op: "add", path: "/spec/upgrade/paused", value: true },
    ]);
    await expectPhase("Spec changed, not yet seen by the operator", "spec-changed", changed, {
      kstatus: "InProgress",
      argocd: "Progressing",
      kstatusMentions: [`generation is ${changed.metadata.generation}`],
      argocdMentions: [`generation ${changed.metadata.generation}`],
    });
    const paused = await history.first(
      "the upgrade Paused for the new generation",
      from,
      (c) => observed(c) && c.status?.upgrade?.phase === "Paused",
    );
    await expectPhase("Plugin upgrade paused (spec.upgrade.paused)", "upgrade-paused", paused, {
      kstatus: "InProgress",
      argocd: "Progressing",
      kstatusMentions: [paused.status!.upgrade!.updateRevision],
      argocdMentions: ["UpgradePaused", paused.status!.upgrade!.updateRevision],
    });

    const resumed = history.seen.length;
    await patch(NAME, [{ op: "replace", path: "/spec/upgrade/paused", value: false }]);
    const rolling = await history.first(
      "the upgrade Progressing once resumed",
      resumed,
      (c) => observed(c) && c.status?.upgrade?.phase === "Progressing",
    );
    await expectPhase("Plugin upgrade rolling out", "upgrade-progressing", rolling, {
      kstatus: "InProgress",
      argocd: "Progressing",
      kstatusMentions: [rolling.status!.upgrade!.updateRevision],
      argocdMentions: ["UpgradeProgressing", rolling.status!.upgrade!.updateRevision],
    });
    const done = await history.first("the upgrade Complete and Ready", resumed, allReady, 240_000);
    expect(done.status?.upgrade?.updateRevision).toBe(rolling.status!.upgrade!.updateRevision);
  });

  it("is Failed and Degraded when an upgrade stops on a build that never registers, and once rolled back", async () => {
    const broken = "registry.example/dpo:never-registers";
    const dir = mkdtempSync(join(tmpdir(), "dpo-broken-"));
    const entrypoint = join(dir, "never-registers.mjs");
    writeFileSync(entrypoint, "setInterval(() => undefined, 1 << 30);\n");
    sim.addImage(broken, entrypoint);
    const from = history.seen.length;
    // strategy Replace: the old plugin leaves before the broken one starts, so taking the node back is a
    // rollback with a phase of its own (RollingBack while the old pod comes back). Under Auto these kubelets
    // (v1.35) start the new plugin beside the old one, standing by, and a rollback ends within one pass.
    await patch(NAME, [
      { op: "add", path: "/spec/plugin/image", value: broken },
      { op: "add", path: "/spec/upgrade/strategy", value: "Replace" },
      { op: "add", path: "/spec/upgrade/progressDeadlineSeconds", value: 10 },
      { op: "add", path: "/spec/upgrade/autoRollback", value: false },
    ]);
    const failed = await history.first(
      "Stalled by UpgradeFailed",
      from,
      (c) => observed(c) && condition(c, "Stalled")?.status === "True",
    );
    expect(condition(failed, "Stalled")?.reason).toBe("UpgradeFailed");
    const node = failed.status!.upgrade!.failed![0]!;
    await expectPhase("Stalled: upgrade failed (autoRollback: false)", "stalled-upgrade-failed", failed, {
      kstatus: "Failed",
      argocd: "Degraded",
      kstatusMentions: [node, "10s"],
      argocdMentions: ["UpgradeFailed", node],
    });

    // autoRollback turned on: the failed node goes back to the previous revision, then it is stalled again.
    const back = history.seen.length;
    await patch(NAME, [{ op: "replace", path: "/spec/upgrade/autoRollback", value: true }]);
    const rollingBack = await history.first(
      "the upgrade RollingBack",
      back,
      (c) => observed(c) && c.status?.upgrade?.phase === "RollingBack",
    );
    await expectPhase("Upgrade rolling back", "upgrade-rolling-back", rollingBack, {
      kstatus: "InProgress",
      argocd: "Progressing",
      kstatusMentions: ["rolling back", rollingBack.status!.upgrade!.currentRevision],
      argocdMentions: ["UpgradeRollingBack", rollingBack.status!.upgrade!.currentRevision],
    });
    const rolledBack = await history.first(
      "Stalled by UpgradeRolledBack",
      back,
      (c) => observed(c) && condition(c, "Stalled")?.reason === "UpgradeRolledBack",
    );
    await expectPhase("Stalled: upgrade rolled back", "stalled-upgrade-rolled-back", rolledBack, {
      kstatus: "Failed",
      argocd: "Degraded",
      kstatusMentions: [node, "previous revision"],
      argocdMentions: ["UpgradeRolledBack", node],
    });
  });
});
