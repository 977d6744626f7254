// Two operator replicas with Lease leader election: only the leader acts and a new one takes over when it
// dies; and a watch broken by an API-server restart loses no update.
import { CoordinationV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { restartApiServer } from "../../tools/cluster/cluster.js";
import {
  injectedCluster,
  kubeConfigFromInjected,
  pluginConfigMap,
  pluginDaemonSet,
  uniqueName,
  waitFor,
} from "../cluster/helpers.js";
import {
  installDpo,
  NAMESPACE,
  leaderElectionArgs,
  startOperator,
  type OperatorProcess,
} from "../e2e/support.js";

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const leases = kc.makeApiClient(CoordinationV1Api);

const running: OperatorProcess[] = [];
const created: string[] = [];

beforeAll(async () => {
  await installDpo();
}, 120_000);

afterEach(async () => {
  for (const name of created.splice(0)) {
    await custom.deleteClusterCustomObject({ ...GROUP, name }).catch(() => undefined);
  }
  await Promise.all(running.splice(0).map((op) => op.stop("SIGKILL")));
});

function config(name: string, devices: number) {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name },
    spec: {
      resourceName: `${name}.example/dev`,
      backend: { type: "Mock", mock: { devices } },
      nodeSelector: { "dpo.dev/never": "true" },
    },
  };
}

async function configHashOf(configName: string): Promise<string | undefined> {
  const ds = await pluginDaemonSet(kc, NAMESPACE, configName).catch(() => undefined);
  return ds?.spec?.template.metadata?.annotations?.["dpo.dev/config-hash"];
}

/** The plugin config rendered into the ConfigMap, which names the device count. */
async function renderedDevices(configName: string): Promise<number | undefined> {
  const cm = await pluginConfigMap(kc, NAMESPACE, configName).catch(() => undefined);
  const m = /devices: (\d+)/.exec(cm?.data?.["config.yaml"] ?? "");
  return m ? Number(m[1]) : undefined;
}

/**
 * Waits until the config's DaemonSet has a config hash (other than `before`) and `op` counted at least two
 * applies (the ConfigMap and the DaemonSet). The API server stores a write, and this test can read it, before
 * the operator has the answer and counts it: the count is waited for, not read once.
 */
async function writtenAndCounted(
  what: string,
  op: OperatorProcess,
  configName: string,
  before?: string,
): Promise<void> {
  await waitFor(`${what}, written and counted`, async (observe) => {
    const hash = await configHashOf(configName);
    const applies = await op.metric("dpo_operator_applies_total");
    observe({ before, hash, applies });
    return hash !== undefined && hash !== before && applies >= 2;
  });
}

describe("leader election", () => {
  it("lets only the leader reconcile, and a follower takes over within the lease duration when it dies", async () => {
    const leaseName = uniqueName("dpo-leader");
    const args = leaderElectionArgs(leaseName);
    const a = await startOperator(args);
    const b = await startOperator(args);
    running.push(a, b);
    const [leader, follower] = await waitFor("exactly one leader", async (observe) => {
      const la = await a.metric("dpo_operator_leader");
      const lb = await b.metric("dpo_operator_leader");
      observe({ a: la, b: lb });
      if (la + lb !== 1) return undefined;
      return la === 1 ? [a, b] : [b, a];
    });
    const lease = await leases.readNamespacedLease({ name: leaseName, namespace: NAMESPACE });
    expect(lease.spec?.holderIdentity).toBeTruthy();

    const name = uniqueName("leader-cfg");
    created.push(name);
    await custom.createClusterCustomObject({ ...GROUP, body: config(name, 2) });
    await writtenAndCounted("the leader's ConfigMap and DaemonSet", leader, name);
    expect(await follower.metric("dpo_operator_applies_total")).toBe(0);
    expect(await follower.metric("dpo_operator_status_writes_total")).toBe(0);

    const killedAt = Date.now();
    await leader.stop("SIGKILL");
    await waitFor("the follower to lead", async () => (await follower.metric("dpo_operator_leader")) === 1, {
      timeoutMs: 15_000,
      intervalMs: 100,
    });
    const takeoverMs = Date.now() - killedAt;
    // Lease duration (4 s) plus one retry period of observation and scheduling slack.
    expect(takeoverMs).toBeLessThan(4_000 + 1_000 + 2_000);

    const before = await configHashOf(name);
    await custom.patchClusterCustomObject({
      ...GROUP,
      name,
      body: [{ op: "replace", path: "/spec/backend/mock/devices", value: 3 }],
    });
    await writtenAndCounted("the new leader's ConfigMap and rolled DaemonSet", follower, name, before);
  });
});

describe("watches across an API-server restart", () => {
  it.skipIf(injectedCluster().stateDir === "")(
    "does not lose an update made right after the API server comes back",
    async () => {
      const op = await startOperator();
      running.push(op);
      const name = uniqueName("restart-cfg");
      created.push(name);
      await custom.createClusterCustomObject({ ...GROUP, body: config(name, 2) });
      await waitFor("the ConfigMap for 2 devices", async () => (await renderedDevices(name)) === 2);

      await restartApiServer(injectedCluster().stateDir, injectedCluster().kubeconfigPath);
      // The operator's watches broke with the restart; this change lands before they are re-established.
      await custom.patchClusterCustomObject({
        ...GROUP,
        name,
        body: [{ op: "replace", path: "/spec/backend/mock/devices", value: 5 }],
      });
      await waitFor(
        "the operator to render the change made during the broken watch",
        async (observe) => {
          const devices = await renderedDevices(name);
          observe({ devices, log: op.logs.join("").slice(-1500) });
          return devices === 5;
        },
        { timeoutMs: 60_000 },
      );
      expect(op.child.exitCode).toBeNull();
    },
  );
});
