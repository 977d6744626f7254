// The simulated kubelet's PodResources API over the device manager's allocations.
import * as grpc from "@grpc/grpc-js";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { PodResourcesListerClient } from "../../src/plugin-runtime/proto/index.js";
import {
  podResourcesPod,
  SimulatedPodResourcesServer,
  type PodResourcesPod,
} from "../../tools/kubelet-sim/pod-resources.js";
import {
  DEVICE_IDS,
  dir,
  kubelet,
  register,
  devicesSeen,
  useDeviceManager,
} from "./device-manager-support.js";

useDeviceManager();

describe("the PodResources API over the device manager's allocations", () => {
  const RESOURCE = "example.com/podres";

  function unary<Req, Res>(
    fn: (
      req: Req,
      md: grpc.Metadata,
      opts: Partial<grpc.CallOptions>,
      cb: (e: grpc.ServiceError | null, r: Res) => void,
    ) => unknown,
    req: Req,
  ): Promise<Res> {
    return new Promise((resolve, reject) =>
      fn(req, new grpc.Metadata(), { deadline: Date.now() + 5_000 }, (e, r) => (e ? reject(e) : resolve(r))),
    );
  }

  it("lists each container's devices per pod, the healthy devices as allocatable, one pod by name, and forgets released pods", async () => {
    await register(RESOURCE, { preStartRequired: false, getPreferredAllocationAvailable: false });
    await devicesSeen(RESOURCE);
    const pods: PodResourcesPod[] = [
      { uid: "u1", name: "trainer", namespace: "ml", containers: ["sidecar", "main"] },
      { uid: "u2", name: "idle", namespace: "ml", containers: ["app"] },
    ];
    const server = new SimulatedPodResourcesServer({
      socketPath: join(dir, "pod-resources", "kubelet.sock"),
      deviceManager: kubelet,
      pods: () => pods,
    });
    await server.start();
    const client = new PodResourcesListerClient(
      `unix://${server.socketPath}`,
      grpc.credentials.createInsecure(),
    );
    try {
      const main = await kubelet.allocate(RESOURCE, 2, { owner: "u1", container: "main" });
      const sidecar = await kubelet.allocate(RESOURCE, 1, { owner: "u1", container: "sidecar" });
      expect(kubelet.containerDevices("u1", "main")).toEqual(new Map([[RESOURCE, main.deviceIds]]));

      const list = await unary(client.list.bind(client), {});
      const devicesOf = (pod: string, container: string) =>
        list.podResources
          .find((p) => p.name === pod)
          ?.containers.find((c) => c.name === container)
          ?.devices.flatMap((d) => d.deviceIds.map((id) => `${d.resourceName} ${id}`));
      expect(
        list.podResources.map((p) => `${p.namespace}/${p.name}:${p.containers.map((c) => c.name).join(",")}`),
      ).toEqual(["ml/trainer:sidecar,main", "ml/idle:app"]);
      expect(devicesOf("trainer", "main")).toEqual(main.deviceIds.map((id) => `${RESOURCE} ${id}`));
      expect(devicesOf("trainer", "sidecar")).toEqual(sidecar.deviceIds.map((id) => `${RESOURCE} ${id}`));
      expect(devicesOf("idle", "app")).toEqual([]);

      // Allocatable: every healthy device, each in its own entry, allocated or not.
      const allocatable = await unary(client.getAllocatableResources.bind(client), {});
      expect(
        allocatable.devices.filter((d) => d.resourceName === RESOURCE).flatMap((d) => d.deviceIds),
      ).toEqual(DEVICE_IDS);

      const one = await unary(client.get.bind(client), { podName: "trainer", podNamespace: "ml" });
      expect(one.podResources?.containers.map((c) => c.name)).toEqual(["sidecar", "main"]);
      const missing = await unary(client.get.bind(client), { podName: "gone", podNamespace: "ml" }).catch(
        (e: grpc.ServiceError) => e,
      );
      expect(missing).toMatchObject({
        code: grpc.status.UNKNOWN,
        details: "pod gone in namespace ml not found",
      });

      kubelet.release("u1");
      pods.shift();
      const after = await unary(client.list.bind(client), {});
      expect(after.podResources.flatMap((p) => p.containers.flatMap((c) => c.devices))).toEqual([]);
      expect(server.calls).toEqual({ list: 2, getAllocatableResources: 1, get: 2 });
    } finally {
      client.close();
      await server.stop();
    }
  });

  it("reports restartable init containers and containers, as the kubelet's List does", () => {
    expect(
      podResourcesPod({
        metadata: { uid: "u", name: "p", namespace: "n" },
        spec: {
          initContainers: [{ name: "setup" }, { name: "proxy", restartPolicy: "Always" }],
          containers: [{ name: "main" }],
        },
      }),
    ).toEqual({ uid: "u", name: "p", namespace: "n", containers: ["proxy", "main"] });
  });

  it("resolves each listed container's claims as resourceclaim.Name does: by name, from a template's status, none when no claim is needed", () => {
    expect(
      podResourcesPod({
        metadata: { uid: "u", name: "p", namespace: "n" },
        spec: {
          initContainers: [
            { name: "setup", resources: { claims: [{ name: "direct" }] } },
            { name: "proxy", restartPolicy: "Always", resources: { claims: [{ name: "direct" }] } },
          ],
          containers: [
            { name: "main", resources: { claims: [{ name: "templated" }, { name: "direct" }] } },
            { name: "early", resources: { claims: [{ name: "pending" }] } },
            { name: "skipped", resources: { claims: [{ name: "unneeded" }] } },
            { name: "plain" },
          ],
          resourceClaims: [
            { name: "direct", resourceClaimName: "shared-gpu" },
            { name: "templated", resourceClaimTemplateName: "one-gpu" },
            { name: "pending", resourceClaimTemplateName: "one-gpu" },
            { name: "unneeded", resourceClaimTemplateName: "one-gpu" },
          ],
        },
        status: {
          resourceClaimStatuses: [
            { name: "templated", resourceClaimName: "p-templated-x7k2" },
            { name: "unneeded" },
          ],
        },
      }),
    ).toEqual({
      uid: "u",
      name: "p",
      namespace: "n",
      containers: ["proxy", "main", "early", "skipped", "plain"],
      // The pod's order (spec.resourceClaims), not the container's; a claim not created yet is undefined.
      claims: { proxy: ["shared-gpu"], main: ["shared-gpu", "p-templated-x7k2"], early: [undefined] },
    });
  });

  it("lists each container's prepared claims with their drivers' devices, and none for a container with a claim not prepared", async () => {
    const claim = (name: string, devices: [driver: string, device: string][]) => ({
      ref: { namespace: "ml", name, uid: `uid-${name}` },
      drivers: [...new Set(devices.map(([driver]) => driver))],
      devices: devices.map(([driver, deviceName]) => ({
        driver,
        poolName: "node-a",
        deviceName,
        requestNames: ["r"],
        cdiDeviceIds: [`${driver}/device=${deviceName}`],
      })),
      pods: new Set(["u1"]),
    });
    const prepared = new Map(
      [
        claim("gpus", [
          ["gpu.example.com", "gpu-0"],
          ["nic.example.com", "nic-0"],
          ["gpu.example.com", "gpu-1"],
        ]),
        claim("solo", [["gpu.example.com", "gpu-2"]]),
      ].map((c) => [c.ref.uid, c]),
    );
    const server = new SimulatedPodResourcesServer({
      socketPath: join(dir, "pod-resources", "kubelet.sock"),
      deviceManager: kubelet,
      draManager: { prepared },
      pods: () => [
        {
          uid: "u1",
          name: "trainer",
          namespace: "ml",
          containers: ["main", "waiting", "plain"],
          claims: { main: ["gpus"], waiting: ["solo", "not-prepared"] },
        },
      ],
    });
    await server.start();
    const client = new PodResourcesListerClient(
      `unix://${server.socketPath}`,
      grpc.credentials.createInsecure(),
    );
    try {
      const [pod] = (await unary(client.list.bind(client), {})).podResources;
      const dynamic = Object.fromEntries(pod!.containers.map((c) => [c.name, c.dynamicResources]));
      expect(dynamic).toEqual({
        main: [
          {
            claimName: "gpus",
            claimNamespace: "ml",
            // Per driver; each device's CDI list also holds those of its driver's devices before it.
            claimResources: [
              {
                driverName: "gpu.example.com",
                poolName: "node-a",
                deviceName: "gpu-0",
                cdiDevices: [{ name: "gpu.example.com/device=gpu-0" }],
              },
              {
                driverName: "gpu.example.com",
                poolName: "node-a",
                deviceName: "gpu-1",
                cdiDevices: [
                  { name: "gpu.example.com/device=gpu-0" },
                  { name: "gpu.example.com/device=gpu-1" },
                ],
              },
              {
                driverName: "nic.example.com",
                poolName: "node-a",
                deviceName: "nic-0",
                cdiDevices: [{ name: "nic.example.com/device=nic-0" }],
              },
            ],
          },
        ],
        waiting: [],
        plain: [],
      });
    } finally {
      client.close();
      await server.stop();
    }
  });
});
