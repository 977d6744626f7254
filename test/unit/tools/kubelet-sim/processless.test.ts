// The kubelet simulator's processless plugin mode without a cluster: what a plugin pod's plugin would
// register, advertise, answer and report, and how it meets the simulated device manager of each kubelet
// version (registration, the stop, the cut-off of kubernetes #121994 and the registration after it).
import type { V1Pod } from "@kubernetes/client-node";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { PluginMetrics } from "../../../../src/plugin-runtime/metrics.js";
import type { ApiRequest } from "../../../../src/plugin-runtime/report/index.js";
import { buildDeviceNodeState } from "../../../../src/plugin-runtime/report/index.js";
import { nodeKeys, serializeNodeRecord } from "../../../../src/contract/node-upgrade.js";
import { waitFor } from "../../../../tools/cluster/wait.js";
import { SimulatedDeviceManager } from "../../../../tools/kubelet-sim/device-manager.js";
import { desiredPluginPods } from "../../../../tools/kubelet-sim/plugin-pod.js";
import { ProcesslessPlugin } from "../../../../tools/kubelet-sim/processless-plugin.js";
import {
  listAndWatchDevices,
  processlessAllocation,
  processlessPluginSpec,
  type ProcesslessPluginSpec,
} from "../../../../tools/kubelet-sim/processless-rules.js";

const RESOURCE = "example.com/gpu";

function configText(backend: string, extra = ""): string {
  return [
    "apiVersion: dpo.dev/v1beta1",
    "kind: DevicePluginConfig",
    "metadata: { name: gpus, uid: u-1 }",
    "spec:",
    `  resourceName: ${RESOURCE}`,
    `  backend: ${backend}`,
    extra,
  ].join("\n");
}

function pod(env: Record<string, string>, uid = "pod-uid-1"): V1Pod {
  return {
    metadata: { name: "dpo-gpus-abc", namespace: "dpo-system", uid, creationTimestamp: new Date() },
    spec: {
      nodeName: "node-1",
      containers: [
        {
          name: "plugin",
          image: "dpo:test",
          env: [
            ...Object.entries(env).map(([name, value]) => ({ name, value })),
            { name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
            { name: "POD_UID", valueFrom: { fieldRef: { fieldPath: "metadata.uid" } } },
          ],
        },
      ],
    },
  };
}

const MOCK = "{ type: Mock, mock: { devices: 2, idPrefix: g } }";
const ENV = { POD_NAMESPACE: "dpo-system", DPO_REVISION: "r1" };

describe("processlessPluginSpec", () => {
  it.each([
    {
      name: "a Mock plugin: identity from the pod's env, devices from the config",
      pod: pod(ENV),
      text: configText(MOCK),
      want: {
        namespace: "dpo-system",
        nodeName: "node-1",
        config: { name: "gpus", uid: "u-1" },
        resourceName: RESOURCE,
        revision: "r1",
        podUID: "pod-uid-1",
        advertised: ["g-0", "g-1"],
      },
    },
    {
      name: "time slicing: every physical device advertised once per replica",
      pod: pod(ENV),
      text: configText(MOCK, "  sharing: { strategy: TimeSlicing, replicas: 2 }"),
      want: { advertised: ["g-0::0", "g-0::1", "g-1::0", "g-1::1"] },
    },
    {
      name: "no revision in the env: none reported, as the plugin run outside the operator",
      pod: pod({ POD_NAMESPACE: "dpo-system" }),
      text: configText(MOCK),
      want: { revision: undefined },
    },
  ])("$name", ({ pod: p, text, want }) => {
    const result = processlessPluginSpec(p, text);
    if (!result.ok) throw new Error(result.problem);
    const { advertised, ...rest } = want;
    expect(result.spec).toMatchObject(rest);
    if ("revision" in want) expect(result.spec.revision).toBe(want.revision);
    expect(result.spec.advertised.map((d) => d.id)).toEqual(advertised ?? expect.anything());
  });

  it.each([
    {
      name: "a backend with hardware",
      text: configText("{ type: DevFS, devFS: { root: /, paths: [{ glob: '/dev/ttyUSB*' }] } }"),
      field: "spec.backend.type",
    },
    {
      name: "a health file nobody would watch",
      text: configText("{ type: Mock, mock: { devices: 2, idPrefix: g, healthFile: /run/h.json } }"),
      field: "spec.backend.mock.healthFile",
    },
    {
      name: "CDI, whose spec nobody writes",
      text: configText(MOCK, "  cdi: { enabled: true }"),
      field: "spec.cdi",
    },
    { name: "a config the plugin would refuse", text: "kind: Nothing", field: "config" },
  ])("refuses $name, naming $field", ({ text, field }) => {
    const result = processlessPluginSpec(pod(ENV), text);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.problem).toContain(field);
  });

  it("refuses a pod without POD_NAMESPACE, which the report needs", () => {
    const result = processlessPluginSpec(pod({}), configText(MOCK));
    expect(result).toEqual({ ok: false, problem: expect.stringContaining("POD_NAMESPACE") });
  });
});

describe("processlessAllocation", () => {
  const spec = specOf(configText(MOCK, "  sharing: { strategy: TimeSlicing, replicas: 2 }"));
  it("sets the Mock backend's variable (physical ids) and the resource's (advertised ids)", () => {
    expect(processlessAllocation(RESOURCE, spec.advertised, ["g-0::1", "g-1::0"]).envs).toEqual({
      MOCK_DEVICE_IDS: "g-0,g-1",
      DPO_EXAMPLE_COM_GPU: "g-0::1,g-1::0",
    });
  });
  it("refuses an id the plugin does not advertise", () => {
    expect(() => processlessAllocation(RESOURCE, spec.advertised, ["g-9"])).toThrow(
      `unknown device ids for ${RESOURCE}: g-9`,
    );
  });
  it("lists the devices as ListAndWatch does, NUMA node as topology", () => {
    const numa = specOf(configText("{ type: Mock, mock: { devices: 2, idPrefix: g, numaNodes: 2 } }"));
    expect(listAndWatchDevices(numa.advertised)).toEqual([
      { ID: "g-0", health: "Healthy", topology: { nodes: [{ ID: 0 }] } },
      { ID: "g-1", health: "Healthy", topology: { nodes: [{ ID: 1 }] } },
    ]);
  });
});

function specOf(text: string, p = pod(ENV)): ProcesslessPluginSpec {
  const result = processlessPluginSpec(p, text);
  if (!result.ok) throw new Error(result.problem);
  return result.spec;
}

/** A device manager of `kubeletVersion`'s kind (not serving: in-process plugins need no socket). */
function deviceManager(oneEndpointPerResource: boolean): SimulatedDeviceManager {
  return new SimulatedDeviceManager({ dir: "/nonexistent/device-plugins", oneEndpointPerResource });
}

/** The API requests of the plugins (report writes, Node reads); a GET of the Node answers `node`. */
function recordingApi(
  node: () => Promise<unknown> = () => Promise.resolve({ metadata: { name: "node-1" } }),
): { requests: ApiRequest[]; request(req: ApiRequest): Promise<unknown> } {
  const requests: ApiRequest[] = [];
  return {
    requests,
    request: (req) => {
      requests.push(req);
      return req.method === "GET" && req.path === "/api/v1/nodes/node-1" ? node() : Promise.resolve({});
    },
  };
}

function plugin(
  dm: SimulatedDeviceManager,
  api: ReturnType<typeof recordingApi>,
  uid: string,
  others: () => ProcesslessPlugin[] = () => [],
  env: Record<string, string> = ENV,
): ProcesslessPlugin {
  const p = pod(env, uid);
  return new ProcesslessPlugin({
    spec: specOf(configText(MOCK), p),
    pod: p,
    slot: "dpo-system/gpus/r1",
    deviceManager: dm,
    devicePluginDir: "/var/lib/kubelet/device-plugins",
    api,
    metrics: new PluginMetrics(),
    pluginVersion: "1.2.3",
    timing: { startToRegisteredMs: 0, stopMs: 0 },
    log: pino({ level: "silent" }),
    allocatedDevices: () => 0,
    newerInstanceServes: (self) =>
      others().some((o) => o !== self && o.running && o.startedAtMs >= self.startedAtMs),
    olderInstanceServing: (self) =>
      others().find((o) => o !== self && o.serving && o.startedAtMs < self.startedAtMs),
  });
}

type StatusBody = {
  status: { registration: { state: string; lastError?: string }; podUID?: string; kubeletAPIVersion: string };
};
function lastStatus(api: ReturnType<typeof recordingApi>): StatusBody["status"] | undefined {
  const writes = api.requests.filter((r) => r.path.includes("/status?"));
  return (writes.at(-1)?.body as StatusBody | undefined)?.status;
}

describe("ProcesslessPlugin", () => {
  it("registers, advertises, answers Allocate and reports as the plugin does; its stop turns the devices unhealthy", async () => {
    const dm = deviceManager(false);
    const api = recordingApi();
    const p = plugin(dm, api, "pod-a");
    await waitFor("registered, devices listed", () => dm.capacity(RESOURCE)?.allocatable === 2);
    await waitFor(
      "the Registered report written",
      () => lastStatus(api)?.registration.state === "Registered",
    );
    const [object, status] = api.requests;
    const want = buildDeviceNodeState({
      namespace: "dpo-system",
      config: { name: "gpus", uid: "u-1" },
      nodeName: "node-1",
      resourceName: RESOURCE,
      revision: "r1",
      podUID: "pod-a",
      pluginVersion: "1.2.3",
      kubeletAPIVersion: "v1beta1",
      registration: { registered: true, since: "" },
      physical: [],
      advertised: [],
      since: new Map(),
      now: "",
    });
    expect(object?.path).toMatch(
      /^\/apis\/dpo\.dev\/v1beta1\/namespaces\/dpo-system\/devicenodestates\/[^/?]+\?fieldManager=dpo-plugin&force=true$/,
    );
    expect(object?.body).toEqual(want.object);
    expect(status?.body).toMatchObject({
      metadata: { name: want.object.metadata.name },
      status: { podUID: "pod-a", advertised: 2, healthy: 2, kubeletAPIVersion: "v1beta1", allocated: 0 },
    });

    const allocated = await dm.allocate(RESOURCE, 1);
    expect(allocated.response.containerResponses[0]?.envs).toMatchObject({
      MOCK_DEVICE_IDS: allocated.deviceIds[0],
    });

    await p.stop();
    expect(dm.capacity(RESOURCE)).toEqual({ capacity: 2, allocatable: 0 });
    // The final report is built while the runtime still knows the version it negotiated, as the plugin's.
    expect(lastStatus(api)).toMatchObject({
      registration: { state: "NotRegistered", lastError: "the plugin stopped (SIGTERM)" },
      kubeletAPIVersion: "v1beta1",
    });
    await dm.stop();
  });

  it("before v1.37 the old plugin's end cuts the new one off, which registers again; from v1.37 it does not", async () => {
    for (const oneEndpointPerResource of [true, false]) {
      const dm = deviceManager(oneEndpointPerResource);
      const api = recordingApi();
      const plugins: ProcesslessPlugin[] = [];
      const old = plugin(dm, api, "pod-old", () => plugins);
      plugins.push(old);
      await waitFor("the old plugin registered", () => old.isRegistered);
      const next = plugin(dm, api, "pod-new", () => plugins);
      plugins.push(next);
      await waitFor("the new plugin registered", () => next.isRegistered && dm.registrations.length === 2);
      let sawZero = false;
      dm.on("disconnected", () => (sawZero = true));
      await old.stop();
      await waitFor(
        `${oneEndpointPerResource ? "before" : "from"} v1.37: the new plugin serves the resource`,
        () => next.isRegistered && dm.capacity(RESOURCE)?.allocatable === 2,
        { timeoutMs: 5_000 },
      );
      expect({ oneEndpointPerResource, sawZero, registrations: dm.registrations.length }).toEqual({
        oneEndpointPerResource,
        sawZero: oneEndpointPerResource,
        registrations: oneEndpointPerResource ? 3 : 2,
      });
      await next.stop();
      await dm.stop();
    }
  });
});

describe("ProcesslessPlugin during a Replace with the new plugin started ahead", () => {
  const STANDBY = {
    metadata: {
      annotations: {
        [nodeKeys("gpus").upgrade]: serializeNodeRecord({ from: "r1", to: "r2", standby: true }),
      },
    },
  };
  const reads = (api: ReturnType<typeof recordingApi>): number =>
    api.requests.filter((r) => r.method === "GET").length;

  it.each([
    {
      case: "no older instance: registers, the Node not read",
      older: false,
      node: STANDBY,
      standsBy: false,
      reads: 0,
    },
    {
      case: "an older instance and a standby record for its revision: stands by",
      older: true,
      node: STANDBY,
      standsBy: true,
      reads: 1,
    },
    {
      case: "a record of another revision: registers beside it",
      older: true,
      node: {
        metadata: {
          annotations: {
            [nodeKeys("gpus").upgrade]: serializeNodeRecord({ from: "r1", to: "r9", standby: true }),
          },
        },
      },
      standsBy: false,
      reads: 1,
    },
    {
      case: "the Node cannot be read: registers beside it",
      older: true,
      node: new Error("forbidden"),
      standsBy: false,
      reads: 1,
    },
  ])("$case", async ({ older, node, standsBy, reads: wantReads }) => {
    const dm = deviceManager(true);
    const api = recordingApi(() => (node instanceof Error ? Promise.reject(node) : Promise.resolve(node)));
    const plugins: ProcesslessPlugin[] = [];
    if (older) {
      const old = plugin(dm, api, "pod-old", () => plugins, { ...ENV, DPO_REVISION: "r1" });
      plugins.push(old);
      await waitFor("the old plugin registered", () => old.isRegistered);
    }
    const next = plugin(dm, api, "pod-new", () => plugins, { ...ENV, DPO_REVISION: "r2" });
    plugins.push(next);
    await waitFor(
      standsBy ? "the new plugin standing by, its report saying so" : "the new plugin registered",
      (observe) => {
        observe({ status: next.status(), report: lastStatus(api)?.registration });
        return standsBy
          ? next.status().standingBy !== undefined && lastStatus(api)?.registration.state === "StandingBy"
          : next.isRegistered;
      },
      { timeoutMs: 5_000 },
    );
    expect(reads(api)).toBe(wantReads);
    expect(dm.registrations.length).toBe(standsBy ? 1 : older ? 2 : 1);
    for (const p of plugins) await p.stop();
    await dm.stop();
  });

  it("registers once the older instance has stopped, never cut off", async () => {
    const dm = deviceManager(true);
    const api = recordingApi(() => Promise.resolve(STANDBY));
    const plugins: ProcesslessPlugin[] = [];
    const old = plugin(dm, api, "pod-old", () => plugins, { ...ENV, DPO_REVISION: "r1" });
    plugins.push(old);
    await waitFor("the old plugin registered", () => old.isRegistered);
    const next = plugin(dm, api, "pod-new", () => plugins, { ...ENV, DPO_REVISION: "r2" });
    plugins.push(next);
    await waitFor("the new plugin standing by", () => next.status().standingBy !== undefined);
    // As ProcesslessPlugins does when a pod's plugin has stopped.
    await old.stop();
    next.olderInstanceStopped();
    await waitFor(
      "the new plugin serving the resource",
      () => next.isRegistered && dm.capacity(RESOURCE)?.allocatable === 2,
      {
        timeoutMs: 2_000,
      },
    );
    expect(next.status().standingBy).toBeUndefined();
    expect(dm.registrations).toHaveLength(2);
    expect(reads(api)).toBe(1);
    await next.stop();
    await dm.stop();
  });
});

describe("which plugin pods a simulated node runs", () => {
  // The operator's placement format changes (node names in the DaemonSet's affinity, or node labels):
  // the simulator follows the DaemonSet controller's binding, as the kubelet does, never the affinity.
  const placed = (
    name: string,
    nodeName: string,
    affinityNode: string,
    labels: Record<string, string>,
  ): V1Pod => ({
    metadata: { name, namespace: "dpo-system", uid: name, labels, creationTimestamp: new Date(0) },
    spec: {
      nodeName,
      containers: [{ name: "plugin" }],
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [
              { matchFields: [{ key: "metadata.name", operator: "In", values: [affinityNode] }] },
              { matchExpressions: [{ key: "dpo.dev/revision-gpus", operator: "In", values: ["r9"] }] },
            ],
          },
        },
      },
    },
  });
  it.each([
    {
      name: "bound here, affinity naming another node",
      pod: placed("a", "node-1", "node-2", {}),
      runs: true,
    },
    {
      name: "bound elsewhere, affinity naming this node",
      pod: placed("b", "node-2", "node-1", {}),
      runs: false,
    },
  ])("$name: runs here = $runs", ({ pod: p, runs }) => {
    expect(desiredPluginPods([p], "node-1").size).toBe(runs ? 1 : 0);
  });
});
