// Leadership is a fence: two operator replicas; the leader's API traffic goes through a fault proxy that
// partitions it from the API server (open connections cut, new ones held with their bytes unsent) for
// longer than the lease, while a config keeps changing so the leader has writes in hand when the
// partition starts. The other replica takes over. From the API server's own audit log (every write of the
// operator's ServiceAccount, told apart per replica by its token's id): no write of the old leader
// arrives after the new leader's first write, even once the partition heals. The old leader is alive when
// the partition heals (it lost the lease during the partition, and its shutdown waits for the reconciles
// whose requests the partition holds), so the fence is what stops its writes, not its death; then it
// exits with code 1, as it always did on a lost lease.
//
// `make test` runs one 8 s partition; DPO_FENCE_PARTITION_MS sets another length (it must exceed the
// lease, 4 s in leaderElectionArgs), and DPO_FENCE_SEED the proxy's seed.
import { CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import { readFileSync } from "node:fs";
import { setTimeout as pace } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { auditLogPath } from "../../tools/cluster/cluster.js";
import { parseAuditLog, WRITE_VERBS, type AuditedRequest } from "../../tools/cluster/audit.js";
import { startFaultProxy, type FaultProxy } from "../cluster/fault-proxy.js";
import { injectedCluster, kubeConfigFromInjected, uniqueName, waitFor } from "../cluster/helpers.js";
import {
  installDpo,
  leaderElectionArgs,
  NAMESPACE,
  OPERATOR_SA,
  startOperator,
  type OperatorProcess,
} from "./support.js";

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const NAME = uniqueName("e2e-fence");
const LEASE_MS = 4_000;
const PARTITION_MS = Number(process.env["DPO_FENCE_PARTITION_MS"] ?? "8000");
const SEED = Number(process.env["DPO_FENCE_SEED"] ?? "20261127");
const OPERATOR_USER = `system:serviceaccount:${NAMESPACE}:${OPERATOR_SA}`;

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const leaseName = uniqueName("dpo-fence-leader");
const args = [...leaderElectionArgs(leaseName), "--status-write-interval", "100"];

let proxy: FaultProxy | undefined;
const replicas: OperatorProcess[] = [];

/** The audit log's credential id of a replica: "JTI=" and the id of the token in its kubeconfig. */
function credentialIdOf(replica: OperatorProcess): string {
  const config = new KubeConfig();
  config.loadFromFile(replica.kubeconfig);
  const token = config.getCurrentUser()?.token;
  if (token === undefined) throw new Error(`${replica.kubeconfig}: no token`);
  const claims = JSON.parse(Buffer.from(token.split(".")[1] ?? "", "base64url").toString("utf8")) as {
    jti?: string;
  };
  if (claims.jti === undefined) throw new Error(`${replica.kubeconfig}: the token has no jti`);
  return `JTI=${claims.jti}`;
}

function operatorWrites(): AuditedRequest[] {
  const { stateDir } = injectedCluster();
  return parseAuditLog(readFileSync(auditLogPath(stateDir), "utf8")).filter(
    // A dry run stores nothing (the operator's start-up probe of what the API server keeps is one).
    (r) => r.user === OPERATOR_USER && WRITE_VERBS.has(r.verb) && !r.dryRun,
  );
}

function describeWrite(r: AuditedRequest): string {
  const object = [r.namespace, r.name].filter(Boolean).join("/");
  const sub = r.subresource ? `/${r.subresource}` : "";
  return `${new Date(r.receivedMs).toISOString()} ${r.verb} ${r.resource}${sub} ${object} -> ${r.code ?? "?"}`;
}

const isLeader = async (r: OperatorProcess): Promise<boolean> =>
  (await r.metric("dpo_operator_leader").catch(() => 0)) === 1;

beforeAll(async () => {
  expect(injectedCluster().stateDir, "the test reads the audit log of a cluster this run started").not.toBe(
    "",
  );
  expect(PARTITION_MS, "the partition must outlast the lease").toBeGreaterThan(LEASE_MS);
  await installDpo();
  const server = new URL(kc.getCurrentCluster()!.server);
  proxy = await startFaultProxy({ host: server.hostname, port: Number(server.port) }, SEED);
}, 120_000);

afterAll(async () => {
  await custom.deleteClusterCustomObject({ ...GROUP, name: NAME }).catch(() => undefined);
  for (const r of replicas) await r.stop().catch(() => undefined);
  await proxy?.close();
}, 60_000);

describe("leadership as a fence", () => {
  it(`the old leader writes nothing after the new leader's first write, across a ${PARTITION_MS} ms partition`, async () => {
    // The first replica, through the proxy, leads; the second, direct, campaigns.
    const old = await startOperator(args, {}, { apiServer: proxy!.url });
    replicas.push(old);
    await waitFor("the first replica to lead", () => isLeader(old), { timeoutMs: 60_000, intervalMs: 100 });
    const next = await startOperator(args);
    replicas.push(next);
    await waitFor(
      "the second replica to campaign",
      () => next.logs.join("").includes("campaigning for leadership"),
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    const oldId = credentialIdOf(old);
    const nextId = credentialIdOf(next);

    // A config that selects no node: every change is a few writes (ConfigMap, DaemonSet, status) and no
    // rollout to wait for.
    await custom.createClusterCustomObject({
      ...GROUP,
      body: {
        apiVersion: "dpo.dev/v1beta1",
        kind: "DevicePluginConfig",
        metadata: { name: NAME },
        spec: {
          resourceName: `fence.example/${NAME}`,
          nodeSelector: { "e2e.dpo.dev/no-such-node": "true" },
          backend: { type: "Mock", mock: { devices: 1 } },
          plugin: { logLevel: "info" },
        },
      },
    });
    // Changes every 150 ms, from the admin (not through the proxy), until the old leader has exited.
    let churning = true;
    let changes = 0;
    const churn = (async () => {
      while (churning) {
        await custom
          .patchClusterCustomObject({
            ...GROUP,
            name: NAME,
            body: [{ op: "replace", path: "/spec/plugin/logLevel", value: changes % 2 ? "info" : "debug" }],
          })
          .then(() => changes++)
          .catch(() => undefined);
        await pace(150);
      }
    })();

    try {
      const churnFrom = Date.now();
      await waitFor(
        "the leader's writes for the changing config in the audit log",
        (observe) => {
          const mine = operatorWrites().filter(
            (r) => r.credentialId === oldId && r.receivedMs >= churnFrom && r.resource !== "leases",
          );
          observe({ writes: mine.length, changes });
          return mine.length >= 5;
        },
        { timeoutMs: 30_000, intervalMs: 100 },
      );

      const partitionedAt = Date.now();
      proxy!.setHolding(true);
      await waitFor("the second replica to lead", () => isLeader(next), {
        timeoutMs: 30_000,
        intervalMs: 100,
      });
      const tookOverMs = Date.now() - partitionedAt;
      await waitFor(
        `the partition to last ${PARTITION_MS} ms`,
        () => Date.now() - partitionedAt >= PARTITION_MS,
        {
          timeoutMs: PARTITION_MS + 5_000,
          intervalMs: 50,
        },
      );
      // What the old leader was when the partition healed: a live process. A leader that had died by
      // then would pass everything below with no fence at all.
      const atHeal = {
        exitCode: old.child.exitCode,
        signal: old.child.signalCode,
        leadershipLost: old.logs.join("").includes("leadership lost"),
        heldConnections: proxy!.counts().held,
      };
      proxy!.setHolding(false);
      expect(
        { exitCode: atHeal.exitCode, signal: atHeal.signal },
        `the old leader's process when the partition healed (${JSON.stringify(atHeal)}); its last logs: ${old.logs.join("").slice(-1500)}`,
      ).toEqual({ exitCode: null, signal: null });
      const oldExit = await waitFor(
        "the old leader to exit",
        (observe) => {
          observe(old.logs.join("").slice(-1500));
          return old.child.exitCode ?? (old.child.signalCode !== null ? -1 : undefined);
        },
        { timeoutMs: 30_000, intervalMs: 100 },
      );
      const exitedAt = Date.now();
      // Everything the old leader sent has been answered once the server logs a write received later.
      await waitFor(
        "a write of the new leader received after the old leader exited",
        () => operatorWrites().some((r) => r.credentialId === nextId && r.receivedMs > exitedAt),
        { timeoutMs: 30_000, intervalMs: 200 },
      );

      const writes = operatorWrites();
      const oldWrites = writes.filter((r) => r.credentialId === oldId);
      const nextWrites = writes.filter((r) => r.credentialId === nextId);
      expect(oldWrites.length, "the old leader's writes are found in the audit log").toBeGreaterThan(0);
      const firstOfNext = Math.min(...nextWrites.map((r) => r.receivedMs));
      expect(Number.isFinite(firstOfNext), "the new leader wrote").toBe(true);
      const late = oldWrites.filter((r) => r.receivedMs >= firstOfNext).map(describeWrite);
      expect(
        late,
        `writes of the old leader after the new leader's first write (${new Date(firstOfNext).toISOString()}; ` +
          `partitioned at ${new Date(partitionedAt).toISOString()}, taken over after ${tookOverMs} ms)`,
      ).toEqual([]);
      expect(oldExit, "the old leader exits with 1 on a lost lease").toBe(1);
      expect(old.logs.join(""), "the old leader says why it stopped").toContain("leadership lost");
    } finally {
      churning = false;
      await churn;
    }
  }, 180_000);
});
