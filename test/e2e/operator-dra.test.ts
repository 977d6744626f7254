// End to end, the operator's side of DRA (no kubelet DRA side needed): a config with publish DRA gets its
// DeviceClass (driver selector and the spec's own, owned by the config); a class of the wanted name that it
// does not own is left untouched and the config says why; ResourceSlices published for its nodes (written
// here by hand, as the plugins would) make its device counts; switching to DevicePlugin removes the class
// and the slices.
import { resourceSliceName } from "../../src/plugin-runtime/dra/slices.js";
import { CoreV1Api, CustomObjectsApi, type V1NodeSystemInfo } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kubeRequest } from "../../src/kube/request.js";
import { apiStatusCode, kubeConfigFromInjected, kubectl, uniqueName, waitFor } from "../cluster/helpers.js";
import { installDpo, startOperator, type OperatorProcess } from "./support.js";

const CONFIGS = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const CLASSES = "/apis/resource.k8s.io/v1/deviceclasses";
const SLICES = "/apis/resource.k8s.io/v1/resourceslices";

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const core = kc.makeApiClient(CoreV1Api);

const configName = uniqueName("e2e-dra");
const rivalName = uniqueName("e2e-dra-rival");
const label = `dra.example/${configName}`;
const driver = `${configName}.dra.example.com`;
const foreignClass = uniqueName("foreign-class");
const extraSelector = 'device.attributes["dra.example.com"].model == "X100"';
const nodes = [uniqueName("dra-n1"), uniqueName("dra-n2")];

let operator: OperatorProcess;

interface DeviceClass {
  metadata: {
    name: string;
    resourceVersion: string;
    labels?: Record<string, string>;
    ownerReferences?: { kind: string; name: string; uid: string; controller?: boolean }[];
  };
  spec: { selectors: { cel: { expression: string } }[] };
}
interface Status {
  conditions?: { type: string; status: string; reason: string; message: string }[];
  devices?: { capacity: number; allocatable: number };
}

/** The name the plugin's publisher gives a node's slice. */
function sliceName(node: string, index: number): string {
  return resourceSliceName(driver, node, index);
}

async function getOrUndefined<T>(path: string): Promise<T | undefined> {
  try {
    return await kubeRequest<T>(kc, { method: "GET", path });
  } catch (err) {
    if (apiStatusCode(err) === 404 || (err as { code?: number }).code === 404) return undefined;
    throw err;
  }
}

async function status(name: string): Promise<Status | undefined> {
  const c = (await custom.getClusterCustomObject({ ...CONFIGS, name })) as { status?: Status };
  return c.status;
}

function draConfig(name: string, resourceName: string, dra: Record<string, unknown>) {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name },
    spec: {
      resourceName,
      backend: { type: "Mock", mock: { devices: 2 } },
      nodeSelector: { [label]: "true" },
      publish: "DRA",
      dra,
    },
  };
}

beforeAll(async () => {
  await installDpo();
  operator = await startOperator(["--status-write-interval", "500"]);
  for (const node of nodes) {
    await core.createNode({
      body: {
        metadata: { name: node, labels: { [label]: "true" } },
        status: { nodeInfo: { kubeletVersion: "v1.34.4" } as V1NodeSystemInfo },
      },
    });
  }
  // Someone else's class, under the name the rival config will ask for.
  await kubeRequest(kc, {
    method: "POST",
    path: CLASSES,
    body: {
      apiVersion: "resource.k8s.io/v1",
      kind: "DeviceClass",
      metadata: { name: foreignClass },
      spec: { selectors: [{ cel: { expression: 'device.driver == "someone.else.example.com"' } }] },
    },
  });
  await custom.createClusterCustomObject({
    ...CONFIGS,
    body: draConfig(configName, `dra.example.com/${configName}`, {
      driverName: driver,
      deviceClass: { selectors: [{ cel: { expression: extraSelector } }] },
    }),
  });
}, 120_000);

afterAll(async () => {
  for (const name of [configName, rivalName]) {
    await custom.deleteClusterCustomObject({ ...CONFIGS, name }).catch(() => undefined);
  }
  for (const node of nodes) {
    for (const i of [0, 1]) {
      await kubeRequest(kc, { method: "DELETE", path: `${SLICES}/${sliceName(node, i)}` }).catch(
        () => undefined,
      );
    }
    await core.deleteNode({ name: node }).catch(() => undefined);
  }
  await kubeRequest(kc, { method: "DELETE", path: `${CLASSES}/${foreignClass}` }).catch(() => undefined);
  await kubeRequest(kc, { method: "DELETE", path: `${CLASSES}/${driver}` }).catch(() => undefined);
  await operator?.stop();
}, 60_000);

describe("the operator in DRA mode", () => {
  it("creates the DeviceClass: the driver's selector, then the spec's, owned by the config", async () => {
    const cls = await waitFor(
      `DeviceClass ${driver}`,
      async (observe) => {
        const c = await getOrUndefined<DeviceClass>(`${CLASSES}/${driver}`);
        observe(c);
        return c;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    const config = (await custom.getClusterCustomObject({ ...CONFIGS, name: configName })) as {
      metadata: { uid: string };
    };
    expect(cls.spec.selectors.map((s) => s.cel.expression)).toEqual([
      `device.driver == "${driver}"`,
      extraSelector,
    ]);
    expect(cls.metadata.ownerReferences).toEqual([
      expect.objectContaining({
        kind: "DevicePluginConfig",
        name: configName,
        uid: config.metadata.uid,
        controller: true,
      }),
    ]);
    expect(cls.metadata.labels).toMatchObject({
      "app.kubernetes.io/managed-by": "dpo",
      "dpo.dev/config": configName,
    });
  });

  it("puts an edited class back", async () => {
    const cls = (await getOrUndefined<DeviceClass>(`${CLASSES}/${driver}`))!;
    cls.spec.selectors = [{ cel: { expression: "true" } }];
    await kubeRequest(kc, { method: "PUT", path: `${CLASSES}/${driver}`, body: cls });
    await waitFor(
      "the class's selectors restored",
      async (observe) => {
        const c = await getOrUndefined<DeviceClass>(`${CLASSES}/${driver}`);
        observe(c?.spec);
        return c?.spec.selectors.length === 2;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
  });

  it("leaves a class of the wanted name it does not own untouched, and the config says so", async () => {
    const before = (await getOrUndefined<DeviceClass>(`${CLASSES}/${foreignClass}`))!;
    await custom.createClusterCustomObject({
      ...CONFIGS,
      body: draConfig(rivalName, `dra.example.com/${rivalName}`, { deviceClass: { name: foreignClass } }),
    });
    const stalled = await waitFor(
      `${rivalName}: Stalled DeviceClassConflict`,
      async (observe) => {
        const s = await status(rivalName);
        const c = s?.conditions?.find((x) => x.type === "Stalled");
        observe(s?.conditions);
        return c?.reason === "DeviceClassConflict" ? c : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(stalled.status).toBe("True");
    expect(stalled.message).toContain(
      `DeviceClass ${foreignClass} already exists and is not owned by this config`,
    );
    const after = (await getOrUndefined<DeviceClass>(`${CLASSES}/${foreignClass}`))!;
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    expect(after.metadata.ownerReferences).toBeUndefined();
  });

  it("counts the devices its nodes' ResourceSlices publish", async () => {
    const published: [string, number, number][] = [
      [nodes[0]!, 0, 3],
      [nodes[1]!, 0, 2],
    ];
    for (const [node, index, devices] of published) {
      await kubeRequest(kc, {
        method: "POST",
        path: SLICES,
        body: {
          apiVersion: "resource.k8s.io/v1",
          kind: "ResourceSlice",
          metadata: {
            name: sliceName(node, index),
            labels: { "dpo.dev/config": configName, "app.kubernetes.io/managed-by": "dpo" },
          },
          spec: {
            driver,
            nodeName: node,
            pool: { name: node, generation: 1, resourceSliceCount: 1 },
            devices: Array.from({ length: devices }, (_, i) => ({ name: `dev-${i}` })),
          },
        },
      });
    }
    const devices = await waitFor(
      `${configName}: 5 devices from the slices`,
      async (observe) => {
        const s = await status(configName);
        observe(s?.devices);
        return s?.devices?.capacity === 5 ? s.devices : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(devices.allocatable).toBe(5);
  });

  it("switched to DevicePlugin: its class and its slices are gone, the foreign class stays", async () => {
    await kubectl([
      "patch",
      "devicepluginconfigs.dpo.dev",
      configName,
      "--type=merge",
      "-p",
      '{"spec":{"publish":"DevicePlugin"}}',
    ]);
    await waitFor(
      "the class and the slices deleted",
      async (observe) => {
        const cls = await getOrUndefined(`${CLASSES}/${driver}`);
        const slices = await Promise.all(nodes.map((n) => getOrUndefined(`${SLICES}/${sliceName(n, 0)}`)));
        observe({ cls: cls !== undefined, slices: slices.map((s) => s !== undefined) });
        return cls === undefined && slices.every((s) => s === undefined);
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(await getOrUndefined(`${CLASSES}/${foreignClass}`)).toBeDefined();
  });
});
