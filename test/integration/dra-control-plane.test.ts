// The local control plane schedules with DRA as a real 1.34 cluster does: resource.k8s.io/v1 is served,
// the resourceclaim controller makes a pod's claim from its ResourceClaimTemplate, and the scheduler's
// DynamicResources plugin allocates it from ResourceSlices, choosing by a CEL selector on an attribute,
// and binds the pod to the node whose slice holds the device. No plugin is involved: the slices are
// written here by hand.
import { afterAll, describe, expect, it } from "vitest";
import { injectedCluster, kubectl, uniqueName, waitFor } from "../cluster/helpers.js";

const [nodeA, nodeB] = twoNodes();
const driver = `${uniqueName("cp")}.dra.example.com`;
const namespace = uniqueName("dra-cp");
const deviceClass = uniqueName("dra-cp-class");
const slices = [uniqueName("dra-cp-a"), uniqueName("dra-cp-b")];

function twoNodes(): [string, string] {
  const [a, b] = injectedCluster().nodeNames;
  if (a === undefined || b === undefined) throw new Error("the test cluster needs two nodes");
  return [a, b];
}

function slice(name: string, node: string, model: string) {
  return {
    apiVersion: "resource.k8s.io/v1",
    kind: "ResourceSlice",
    metadata: { name },
    spec: {
      driver,
      nodeName: node,
      pool: { name: node, generation: 1, resourceSliceCount: 1 },
      devices: [
        {
          name: "foo-0",
          attributes: { model: { string: model }, index: { int: 0 } },
          capacity: { memory: { value: "80Gi" } },
        },
      ],
    },
  };
}

async function apply(objects: unknown[]): Promise<void> {
  await kubectl(["apply", "--server-side", "-f", "-"], {
    input: JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }),
  });
}

async function getJson<T>(args: string[]): Promise<T | undefined> {
  const r = await kubectl(["get", ...args, "-o", "json"], { allowFailure: true });
  return r.exitCode === 0 ? (JSON.parse(r.stdout) as T) : undefined;
}

interface Pod {
  spec: { nodeName?: string };
  status?: { resourceClaimStatuses?: { name: string; resourceClaimName?: string }[] };
}
interface Claim {
  metadata: { name: string };
  status?: {
    allocation?: {
      devices?: { results?: { driver: string; pool: string; device: string; request: string }[] };
      nodeSelector?: unknown;
    };
    reservedFor?: { resource: string; name: string }[];
  };
}

afterAll(async () => {
  await kubectl(["delete", "namespace", namespace, "--wait=false", "--ignore-not-found"], {
    allowFailure: true,
  });
  await kubectl(["delete", "resourceslice", ...slices, "--ignore-not-found"], { allowFailure: true });
  await kubectl(["delete", "deviceclass", deviceClass, "--ignore-not-found"], { allowFailure: true });
});

describe("DRA in the local control plane", () => {
  it("serves resource.k8s.io/v1", async () => {
    const r = await kubectl(["api-resources", "--api-group=resource.k8s.io", "-o", "name"]);
    for (const resource of ["resourceslices", "resourceclaims", "resourceclaimtemplates", "deviceclasses"]) {
      expect(r.stdout).toContain(`${resource}.resource.k8s.io`);
    }
    const versions = await kubectl(["api-versions"]);
    expect(versions.stdout.split("\n")).toContain("resource.k8s.io/v1");
  });

  it("allocates a templated claim by a CEL attribute selector and binds the pod to that node", async () => {
    await apply([
      { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } },
      slice(slices[0]!, nodeA, "alpha"),
      slice(slices[1]!, nodeB, "beta"),
      {
        apiVersion: "resource.k8s.io/v1",
        kind: "DeviceClass",
        metadata: { name: deviceClass },
        spec: { selectors: [{ cel: { expression: `device.driver == "${driver}"` } }] },
      },
      {
        apiVersion: "resource.k8s.io/v1",
        kind: "ResourceClaimTemplate",
        metadata: { name: "beta", namespace },
        spec: {
          spec: {
            devices: {
              requests: [
                {
                  name: "foo",
                  exactly: {
                    deviceClassName: deviceClass,
                    selectors: [
                      {
                        cel: {
                          expression:
                            `device.attributes["${driver}"].model == "beta" && ` +
                            `device.capacity["${driver}"].memory.compareTo(quantity("64Gi")) >= 0`,
                        },
                      },
                    ],
                  },
                },
              ],
            },
          },
        },
      },
      {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "workload", namespace },
        spec: {
          containers: [
            { name: "main", image: "registry.example/workload:1", resources: { claims: [{ name: "foo" }] } },
          ],
          resourceClaims: [{ name: "foo", resourceClaimTemplateName: "beta" }],
        },
      },
    ]);

    // The resourceclaim controller creates the claim and names it in the pod's status.
    const claimName = await waitFor(
      "the pod's generated claim",
      async () => {
        const pod = await getJson<Pod>(["pod", "workload", "-n", namespace]);
        return pod?.status?.resourceClaimStatuses?.find((s) => s.name === "foo")?.resourceClaimName;
      },
      { timeoutMs: 60_000 },
    );
    // The scheduler allocates it from node B's slice, the only device matching, and reserves it for the pod.
    const claim = await waitFor(
      "the claim allocated and reserved",
      async () => {
        const c = await getJson<Claim>(["resourceclaim", claimName, "-n", namespace]);
        return c?.status?.allocation !== undefined && (c.status.reservedFor ?? []).length > 0 ? c : undefined;
      },
      { timeoutMs: 60_000 },
    );
    expect(claim.status?.allocation?.devices?.results).toEqual([
      expect.objectContaining({ driver, pool: nodeB, device: "foo-0", request: "foo" }),
    ]);
    expect(claim.status?.reservedFor).toEqual([
      expect.objectContaining({ resource: "pods", name: "workload" }),
    ]);
    const pod = await waitFor(
      "the pod bound",
      async () => {
        const p = await getJson<Pod>(["pod", "workload", "-n", namespace]);
        return p?.spec.nodeName !== undefined ? p : undefined;
      },
      { timeoutMs: 60_000 },
    );
    expect(pod.spec.nodeName).toBe(nodeB);
  });
});
