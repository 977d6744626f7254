// The kubelet simulator's DRA side on the real control plane, with the project's DraPlugin run in-process
// in the simulated node's directories (the `dpo plugin` DRA mode is wired elsewhere): the plugin
// registers through the node's plugin watcher, the scheduler allocates a templated claim from a
// hand-written ResourceSlice, the simulator prepares it before it starts the pod (CDI ids recorded, CDI
// file in the node's tree), a claim the plugin cannot prepare leaves its pod Pending with the kubelet's
// Event, and a deleted pod's claim is unprepared.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isNotFound } from "../../src/kube/errors.js";
import { kubeRequest } from "../../src/kube/request.js";
import type { DraResourceClaim } from "../../src/plugin-runtime/dra/claim.js";
import type { DraNodeDevice } from "../../src/plugin-runtime/dra/devices.js";
import { DraPlugin } from "../../src/plugin-runtime/dra/dra-plugin.js";
import { injectedCluster, kubeConfigFromInjected, kubectl, uniqueName, waitFor } from "../cluster/helpers.js";
import { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";

const admin = kubeConfigFromInjected();
const node = firstNode();
const driver = `${uniqueName("ks")}.dra.example.com`;
const namespace = uniqueName("ks-dra");
const deviceClass = uniqueName("ks-dra-class");
const sliceName = uniqueName("ks-dra-slice");
const CDI_DIR = "/var/run/cdi";

let sim: KubeletSimulator;
let plugin: DraPlugin;

function firstNode(): string {
  const [a] = injectedCluster().nodeNames;
  if (a === undefined) throw new Error("the test cluster needs a node");
  return a;
}

const device = (name: string): DraNodeDevice => ({
  name,
  physicalId: name,
  health: "Healthy",
  reason: "",
  containerEdits: { env: [`DEV=${name}`] },
});

async function apply(objects: unknown[]): Promise<void> {
  await kubectl(["apply", "--server-side", "-f", "-"], {
    input: JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }),
  });
}

function template(name: string, index: number) {
  return {
    apiVersion: "resource.k8s.io/v1",
    kind: "ResourceClaimTemplate",
    metadata: { name, namespace },
    spec: {
      spec: {
        devices: {
          requests: [
            {
              name: "foo",
              exactly: {
                deviceClassName: deviceClass,
                selectors: [{ cel: { expression: `device.attributes["${driver}"].index == ${index}` } }],
              },
            },
          ],
        },
      },
    },
  };
}

function workload(name: string, templateName: string) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace },
    spec: {
      containers: [
        { name: "main", image: "registry.example/workload:1", resources: { claims: [{ name: "foo" }] } },
      ],
      resourceClaims: [{ name: "foo", resourceClaimTemplateName: templateName }],
    },
  };
}

interface PodView {
  metadata: { uid: string };
  status?: { phase?: string; resourceClaimStatuses?: { name: string; resourceClaimName?: string }[] };
}

async function getPod(name: string): Promise<PodView | undefined> {
  const r = await kubectl(["get", "pod", name, "-n", namespace, "-o", "json"], { allowFailure: true });
  return r.exitCode === 0 ? (JSON.parse(r.stdout) as PodView) : undefined;
}

beforeAll(async () => {
  await kubectl(["create", "namespace", namespace]);
  sim = await KubeletSimulator.start({ kubeconfig: admin, nodes: [node] });
  plugin = new DraPlugin({
    driverName: driver,
    nodeName: node,
    devices: () => [device("foo-0"), device("foo-1")],
    claims: {
      getResourceClaim: (ref) =>
        kubeRequest<DraResourceClaim>(admin, {
          method: "GET",
          path: `/apis/resource.k8s.io/v1/namespaces/${ref.namespace}/resourceclaims/${ref.name}`,
        }).catch((err: unknown) => {
          if (isNotFound(err)) return undefined;
          throw err;
        }),
    },
    logger: pino({ level: "silent" }),
    pluginDir: join(sim.draPluginsDir(node), driver),
    registryDir: sim.pluginsRegistryDir(node),
    cdiDir: sim.hostPath(node, CDI_DIR),
  });
  await plugin.start();
  await apply([
    {
      apiVersion: "resource.k8s.io/v1",
      kind: "ResourceSlice",
      metadata: { name: sliceName },
      spec: {
        driver,
        nodeName: node,
        pool: { name: node, generation: 1, resourceSliceCount: 1 },
        // foo-9 is in the slice but not on the node: the plugin refuses to prepare it.
        devices: [0, 1, 9].map((i) => ({ name: `foo-${i}`, attributes: { index: { int: i } } })),
      },
    },
    {
      apiVersion: "resource.k8s.io/v1",
      kind: "DeviceClass",
      metadata: { name: deviceClass },
      spec: { selectors: [{ cel: { expression: `device.driver == "${driver}"` } }] },
    },
    template("first", 0),
    template("missing", 9),
  ]);
});

afterAll(async () => {
  await kubectl(["delete", "namespace", namespace, "--wait=false", "--ignore-not-found"], {
    allowFailure: true,
  });
  await kubectl(["delete", "resourceslice", sliceName, "--ignore-not-found"], { allowFailure: true });
  await kubectl(["delete", "deviceclass", deviceClass, "--ignore-not-found"], { allowFailure: true });
  await plugin?.stop();
  await sim?.stop();
});

describe("the kubelet simulator's DRA side", () => {
  it("registers the DRA plugin through the node's plugin watcher with v1 (a 1.34 node)", async () => {
    const registered = await waitFor("the driver registered", () => sim.draManager(node).driver(driver));
    expect(registered.service).toBe("v1.DRAPlugin");
    await waitFor("the verdict at the plugin", () => plugin.registrationStatus()?.registered);
  });

  it("prepares a pod's claim before it runs it, records the CDI ids, and unprepares when it goes", async () => {
    await apply([workload("first", "first")]);
    const pod = await waitFor("the pod Running", async () => {
      const p = await getPod("first");
      return p?.status?.phase === "Running" ? p : undefined;
    });
    const admitted = sim.admittedPods(node).find((p) => p.uid === pod.metadata.uid);
    const claimName = pod.status?.resourceClaimStatuses?.[0]?.resourceClaimName ?? "";
    const claimUid = sim.draManager(node).prepared.values().next().value?.ref.uid ?? "";
    expect(claimName).not.toBe("");
    expect(admitted?.cdiDeviceIds).toEqual({ foo: [`${driver}/device=${claimUid}-foo-0`] });
    const cdiFile = sim.hostPath(node, `${CDI_DIR}/${driver}-device_${claimUid}.json`);
    expect(existsSync(cdiFile)).toBe(true);

    await kubectl(["delete", "pod", "first", "-n", namespace, "--wait=false"]);
    await waitFor(
      "the claim unprepared",
      () => !existsSync(cdiFile) && sim.draManager(node).prepared.size === 0,
    );
    expect(sim.draManager(node).calls.map((c) => c.method)).toEqual(["prepare", "unprepare"]);
  });

  it("leaves a pod whose claim cannot be prepared Pending, with the kubelet's Event", async () => {
    const failure = new Promise<{ message: string }>((resolve) =>
      sim.once("podPrepareFailed", (f) => resolve(f)),
    );
    await apply([workload("missing", "missing")]);
    const failed = await failure;
    expect(failed.message).toMatch(
      /^Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for ResourceClaim missing-foo-\w+: /,
    );
    const events = await waitFor("the Event", async () => {
      const r = await kubectl([
        "get",
        "events",
        "-n",
        namespace,
        "--field-selector",
        "reason=FailedPrepareDynamicResources,involvedObject.name=missing",
        "-o",
        "jsonpath={.items[*].source.component}",
      ]);
      return r.stdout.trim() !== "" ? r.stdout.trim() : undefined;
    });
    expect(events).toBe("kubelet");
    expect((await getPod("missing"))?.status?.phase).toBe("Pending");
  });
});
