// End to end: the upgrade from a release whose CRD served and stored only v1alpha1. Configs created then
// stay, unchanged in meaning and readable in both versions; the leader rewrites them as v1beta1 and only
// then trims storedVersions to [v1beta1]; the plugin DaemonSet of a running config and its pods are not
// touched by the migration.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toV1beta1, type AlphaObject } from "../../src/api/conversion/convert.js";
import { devicePluginConfigCrd } from "../../src/api/crd.js";
import { validateDevicePluginConfig } from "../../src/api/validate.js";
import { LABEL_CONFIG } from "../../src/contract/names.js";
import { storageVersionHash } from "../../src/operator/migration/runner.js";
import { startTcpRelay, type TcpRelay } from "../../tools/cluster/tcp-relay.js";
import { TEST_FEATURE_LABEL } from "../../tools/cluster/nodes.js";
import { SERVICE_CLIENT_CONFIG, setClientConfig } from "../cluster/conversion-webhook.js";
import { injectedCluster, kubectl, uniqueName, waitFor } from "../cluster/helpers.js";
import { installDpo, NAMESPACE, startOperator, type OperatorProcess } from "./support.js";

const CRD = "devicepluginconfigs.dpo.dev";
const running = uniqueName("upg-run");
const idle = [uniqueName("upg-a"), uniqueName("upg-b"), uniqueName("upg-c")];
const all = [running, ...idle];

let relay: TcpRelay;
let operator: OperatorProcess | undefined;

interface Obj {
  metadata: {
    name: string;
    uid: string;
    resourceVersion: string;
    generation?: number;
    annotations?: Record<string, string>;
  };
  spec: Record<string, unknown>;
  status?: { storedVersions?: string[]; desiredNumberScheduled?: number };
}

/** What a config says, as the operator reads it: converted to v1beta1, with the schema's defaults. */
function meaning(obj: Obj): unknown {
  let beta: unknown = obj;
  if ((obj as { apiVersion?: string }).apiVersion === "dpo.dev/v1alpha1") {
    const converted = toV1beta1(obj as unknown as AlphaObject);
    if (!converted.ok) throw new Error(converted.error);
    beta = converted.value;
  }
  const parsed = validateDevicePluginConfig(beta);
  if (!parsed.ok) throw new Error(`${obj.metadata.name}: ${JSON.stringify(parsed.errors)}`);
  return parsed.value.spec;
}

async function getJson(args: string[]): Promise<Obj> {
  return JSON.parse((await kubectl(["get", ...args, "-o", "json"])).stdout) as Obj;
}

/** The config's plugin DaemonSet (its only one: no upgrade runs in this test). */
async function daemonSetOf(config: string): Promise<Obj> {
  const list = (await getJson([
    "daemonset",
    "-l",
    `${LABEL_CONFIG}=${config}`,
    "-n",
    NAMESPACE,
  ])) as unknown as {
    items: Obj[];
  };
  if (list.items.length !== 1)
    throw new Error(`expected one DaemonSet for ${config}, found ${list.items.length}`);
  return list.items[0]!;
}

async function storedVersions(): Promise<string[]> {
  return (await getJson(["crd", CRD])).status?.storedVersions ?? [];
}

/** Each config as v1alpha1 and v1beta1 would show it to a user: spec and resourceVersion. */
async function snapshot(): Promise<Record<string, { alpha: Obj; beta: Obj }>> {
  const out: Record<string, { alpha: Obj; beta: Obj }> = {};
  for (const name of all) {
    out[name] = {
      alpha: await getJson([`devicepluginconfigs.v1alpha1.dpo.dev`, name]),
      beta: await getJson([`devicepluginconfigs.v1beta1.dpo.dev`, name]),
    };
  }
  return out;
}

async function pluginPods(): Promise<string[]> {
  const out = await kubectl([
    "get",
    "pods",
    "-n",
    NAMESPACE,
    "-l",
    `${LABEL_CONFIG}=${running}`,
    "-o",
    "jsonpath={.items[*].metadata.uid}",
  ]);
  return out.stdout.split(" ").filter(Boolean).sort();
}

/**
 * The apiVersion each config is stored in, read from etcd itself (its JSON gateway): the truth the
 * migration changes. Undefined when the run reuses a cluster whose etcd it does not know.
 */
async function storedAs(): Promise<Record<string, string> | undefined> {
  const { stateDir } = injectedCluster();
  if (stateDir === "") return undefined;
  const record = JSON.parse(readFileSync(join(stateDir, "cluster.json"), "utf8")) as {
    ports: { etcdClient: number };
  };
  const out: Record<string, string> = {};
  for (const name of all) {
    const key = Buffer.from(`/registry/dpo.dev/devicepluginconfigs/${name}`).toString("base64");
    const response = await fetch(`http://127.0.0.1:${record.ports.etcdClient}/v3/kv/range`, {
      method: "POST",
      body: JSON.stringify({ key }),
    });
    const { kvs } = (await response.json()) as { kvs?: { value: string }[] };
    const value = kvs?.[0]?.value;
    out[name] = value
      ? (JSON.parse(Buffer.from(value, "base64").toString("utf8")) as { apiVersion: string }).apiVersion
      : "absent";
  }
  return out;
}

/** Applies a variant of the DevicePluginConfig CRD as the installer does (same field manager). */
async function applyCrd(crd: object): Promise<void> {
  await kubectl(["apply", "--server-side", "--force-conflicts", "--field-manager=dpo-install", "-f", "-"], {
    input: JSON.stringify(crd),
  });
  await kubectl(["wait", "--for=condition=Established", "--timeout=60s", `crd/${CRD}`]);
}

function operatorArgs(extra: string[]): string[] {
  return ["--webhook-addr=127.0.0.1:0", "--webhook-hosts=127.0.0.1", ...extra];
}

async function startBehindRelay(extra: string[]): Promise<OperatorProcess> {
  const started = await startOperator(operatorArgs(extra));
  relay.setBackends([{ host: "127.0.0.1", port: started.webhookPort! }]);
  return started;
}

beforeAll(async () => {
  relay = await startTcpRelay();
  const conversionUrl = `https://127.0.0.1:${relay.port}/convert`;
  // The old release: the CRD serves and stores v1alpha1 only, with no conversion. The CRD of earlier
  // tests goes first (with its objects), since storedVersions may not lose v1beta1 otherwise.
  await kubectl(["delete", "crd", CRD, "--ignore-not-found", "--timeout=120s"]);
  const current = devicePluginConfigCrd({ url: conversionUrl });
  const alpha = current.spec.versions.find((v) => v.name === "v1alpha1")!;
  const beta = current.spec.versions.find((v) => v.name === "v1beta1")!;
  await applyCrd({
    ...current,
    spec: { ...current.spec, versions: [{ ...alpha, storage: true }], conversion: undefined },
  });
  await waitFor("the v1alpha1-only endpoint to serve", async (observe) => {
    const r = await kubectl(["get", "devicepluginconfigs.v1alpha1.dpo.dev", "-o", "name"], {
      allowFailure: true,
    });
    observe(r.stderr.trim());
    return r.exitCode === 0;
  });
  for (const name of all) {
    await kubectl(["create", "-f", "-"], {
      input: JSON.stringify({
        apiVersion: "dpo.dev/v1alpha1",
        kind: "DevicePluginConfig",
        metadata: { name, labels: { suite: "upgrade" } },
        spec: {
          resourceName: `upgrade.example/${name}`,
          backend: "Mock",
          mock: { devices: 2, idPrefix: "u" },
          sharedDevNum: name === running ? 4 : 1,
          preferredAllocationPolicy: "numa",
          nodeSelector:
            name === running ? { [TEST_FEATURE_LABEL]: "true" } : { "upgrade.example/none": "true" },
        },
      }),
    });
  }
  expect(await storedVersions()).toEqual(["v1alpha1"]);
  // RBAC, namespace and the webhook's Service and empty Secret of the new release; then, for the plugin
  // DaemonSet of the running config to exist before the upgrade as it would, a CRD that serves both
  // versions but still stores v1alpha1, so the operator's status writes keep the objects in v1alpha1.
  await kubectl(["delete", "secret", "dpo-webhook-cert", "-n", NAMESPACE, "--ignore-not-found"]);
  await installDpo({ conversionUrl });
  await applyCrd({
    ...current,
    spec: {
      ...current.spec,
      versions: [
        { ...beta, storage: false },
        { ...alpha, storage: true },
      ],
    },
  });
});

afterAll(async () => {
  await operator?.stop();
  await kubectl(
    ["delete", "devicepluginconfigs.v1beta1.dpo.dev", ...all, "--ignore-not-found", "--wait=false"],
    {
      allowFailure: true,
    },
  );
  await setClientConfig(SERVICE_CLIENT_CONFIG).catch(() => undefined);
  relay?.close();
});

describe("upgrading from a CRD that stored v1alpha1", () => {
  it("keeps every config, rewrites it as v1beta1, then trims storedVersions, without restarting plugin pods", async () => {
    // The operator with the migration off (as kube-storage-version-migrator users run it) reconciles the
    // configs through the webhook, and the running one gets its pods.
    operator = await startBehindRelay(["--storage-migration=false"]);
    const desired = await waitFor(
      "the running config's DaemonSet to have its pods",
      async (observe) => {
        const ds = await kubectl(
          ["get", "daemonset", "-l", `${LABEL_CONFIG}=${running}`, "-n", NAMESPACE, "-o", "json"],
          {
            allowFailure: true,
          },
        );
        if (ds.exitCode !== 0) return observe(ds.stderr.trim());
        const items = (JSON.parse(ds.stdout) as { items: Obj[] }).items;
        const want = items.length === 1 ? (items[0]!.status?.desiredNumberScheduled ?? 0) : 0;
        const pods = await pluginPods();
        observe({ want, pods: pods.length });
        return want > 0 && pods.length === want ? want : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );
    expect(desired).toBeGreaterThan(0);
    const before = await snapshot();
    const daemonSetBefore = await daemonSetOf(running);
    const podsBefore = await pluginPods();
    expect(before[running]!.beta.spec).toMatchObject({
      backend: { type: "Mock", mock: { devices: 2, idPrefix: "u" } },
      sharing: { strategy: "TimeSlicing", replicas: 4 },
      topology: { allocationPolicy: "NUMAAligned" },
    });
    await operator.stop();

    // The upgrade: the CRDs of the new release store v1beta1; every object is still in etcd as v1alpha1.
    await installDpo({ conversionUrl: `https://127.0.0.1:${relay.port}/convert` });
    expect(await storedVersions()).toEqual(["v1alpha1", "v1beta1"]);
    const encodedBefore = await storedAs();
    if (encodedBefore) expect(Object.values(encodedBefore)).toEqual(all.map(() => "dpo.dev/v1alpha1"));

    // The operator as shipped: the leader migrates.
    operator = await startBehindRelay([]);
    await waitFor(
      "storedVersions to be trimmed to [v1beta1]",
      async (observe) => {
        const versions = await storedVersions();
        observe({
          versions,
          log: operator!.logs
            .join("")
            .split("\n")
            .filter((l) => l.includes("storage"))
            .slice(-3),
        });
        return versions.length === 1 && versions[0] === "v1beta1";
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );

    const after = await snapshot();
    const encodedAfter = await storedAs();
    if (encodedAfter) expect(Object.values(encodedAfter)).toEqual(all.map(() => "dpo.dev/v1beta1"));
    for (const name of all) {
      const [b, a] = [before[name]!, after[name]!];
      // Rewritten (a new resourceVersion), meaning unchanged in both versions.
      expect(a.beta.metadata.resourceVersion, name).not.toBe(b.beta.metadata.resourceVersion);
      // Read from v1beta1 storage, v1beta1's defaults are filled in where they were absent before: the
      // same config, as the plugin runtime and the operator read it (schema defaults applied).
      const before1 = meaning(b.beta);
      expect(meaning(a.beta), name).toEqual(before1);
      expect(meaning(a.alpha), name).toEqual(before1);
      expect(meaning(b.alpha), name).toEqual(before1);
      expect(a.beta.metadata.uid, name).toBe(b.beta.metadata.uid);
      expect(a.beta.metadata.generation, name).toBe(b.beta.metadata.generation);
    }
    const daemonSetAfter = await daemonSetOf(running);
    expect(daemonSetAfter.metadata.uid).toBe(daemonSetBefore.metadata.uid);
    expect(daemonSetAfter.metadata.generation).toBe(daemonSetBefore.metadata.generation);
    expect(await pluginPods()).toEqual(podsBefore);

    // After trimming storedVersions the operator removes its progress annotation, then records the Event:
    // wait for the last of them.
    const events = await waitFor("the StorageMigrated Event", async (observe) => {
      const listed = await kubectl([
        "get",
        "events",
        "-A",
        "--field-selector",
        `involvedObject.name=${CRD},reason=StorageMigrated`,
        "-o",
        "jsonpath={.items[*].message}",
      ]);
      observe(listed.stdout);
      return listed.stdout === "" ? undefined : listed.stdout;
    });
    expect(events).toContain("v1beta1");
    const crd = await getJson(["crd", CRD]);
    expect(crd.metadata.annotations?.["dpo.dev/storage-migration"]).toBeUndefined();
    const discovery = JSON.parse((await kubectl(["get", "--raw", "/apis/dpo.dev/v1beta1"])).stdout) as {
      resources: { name: string; storageVersionHash?: string }[];
    };
    expect(discovery.resources.find((r) => r.name === "devicepluginconfigs")?.storageVersionHash).toBe(
      storageVersionHash("dpo.dev", "v1beta1", "DevicePluginConfig"),
    );
  });
});
