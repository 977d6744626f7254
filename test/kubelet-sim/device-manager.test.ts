// The simulated device manager against a scripted device plugin over real unix sockets: it refuses what
// the kubelet refuses (by its own rules, not the plugin's), calls PreStartContainer when asked, and builds
// GetPreferredAllocation requests with must_include the way the kubelet does.
import * as grpc from "@grpc/grpc-js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  DevicePluginService,
  PodResourcesListerClient,
  RegistrationClient,
  type DevicePluginOptions,
  type DevicePluginServer,
  type PreferredAllocationRequest,
  type PreStartContainerRequest,
} from "../../src/plugin-runtime/proto/index.js";
import { pino } from "pino";
import { PluginWatcherRegistration } from "../../src/plugin-runtime/registration/plugin-watcher.js";
import { waitFor } from "../../tools/cluster/wait.js";
import { SimulatedDeviceManager } from "../../tools/kubelet-sim/device-manager.js";
import { isExtendedResourceName } from "../../tools/kubelet-sim/kubelet-rules.js";
import {
  podResourcesPod,
  SimulatedPodResourcesServer,
  type PodResourcesPod,
} from "../../tools/kubelet-sim/pod-resources.js";

const DEVICE_IDS = ["d-0", "d-1", "d-2", "d-3", "d-4", "d-5"];

/** A device plugin whose options and GetPreferredAllocation answer the test chooses; it records every call. */
class ScriptedPlugin {
  readonly preStartCalls: { request: PreStartContainerRequest; deadlineMs: number }[] = [];
  readonly preferredRequests: PreferredAllocationRequest[] = [];
  preferredAnswer: (request: PreferredAllocationRequest) => string[] = () => [];
  private server: grpc.Server | undefined;

  constructor(readonly options: DevicePluginOptions) {}

  async listen(path: string): Promise<void> {
    const server = new grpc.Server();
    const implementation: DevicePluginServer = {
      getDevicePluginOptions: (_call, callback) => callback(null, this.options),
      listAndWatch: (call) => {
        call.write({ devices: DEVICE_IDS.map((ID) => ({ ID, health: "Healthy", topology: undefined })) });
      },
      getPreferredAllocation: (call, callback) => {
        this.preferredRequests.push(call.request);
        callback(null, {
          containerResponses: call.request.containerRequests.map(() => ({
            deviceIDs: this.preferredAnswer(call.request),
          })),
        });
      },
      allocate: (call, callback) =>
        callback(null, {
          containerResponses: call.request.containerRequests.map(() => ({
            envs: {},
            mounts: [],
            devices: [],
            annotations: {},
            cdiDevices: [],
          })),
        }),
      preStartContainer: (call, callback) => {
        const deadline = call.getDeadline();
        this.preStartCalls.push({
          request: call.request,
          // grpc-js gives a Date or epoch milliseconds (Infinity without a deadline).
          deadlineMs: (deadline instanceof Date ? deadline.getTime() : deadline) - Date.now(),
        });
        callback(null, {});
      },
    };
    server.addService(DevicePluginService, implementation);
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`unix://${path}`, grpc.ServerCredentials.createInsecure(), (err) =>
        err ? reject(err) : resolve(),
      ),
    );
    this.server = server;
  }

  close(): void {
    this.server?.forceShutdown();
  }
}

let dir: string;
let kubelet: SimulatedDeviceManager;
const plugins: ScriptedPlugin[] = [];

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "dpo-dm-"));
  kubelet = new SimulatedDeviceManager({ dir, gracePeriodMs: 60_000 });
  await kubelet.start();
});

afterEach(async () => {
  await kubelet.stop();
  for (const plugin of plugins.splice(0)) plugin.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Serves a scripted plugin in the kubelet's directory and registers it the way a plugin does. */
async function register(
  resourceName: string,
  options: DevicePluginOptions,
  version = "v1beta1",
): Promise<{ plugin: ScriptedPlugin; error: grpc.ServiceError | undefined }> {
  const plugin = new ScriptedPlugin(options);
  plugins.push(plugin);
  const endpoint = `p-${plugins.length}.sock`;
  await plugin.listen(join(dir, endpoint));
  const client = new RegistrationClient(
    `unix://${join(dir, "kubelet.sock")}`,
    grpc.credentials.createInsecure(),
  );
  const error = await new Promise<grpc.ServiceError | undefined>((resolve) =>
    client.register(
      { version, endpoint, resourceName, options },
      new grpc.Metadata(),
      { deadline: Date.now() + 15_000 },
      (err) => resolve(err ?? undefined),
    ),
  );
  client.close();
  return { plugin, error };
}

/** Register for a plugin already serving `endpoint`; resolves with the kubelet's error, if any. */
async function registerAgain(
  resourceName: string,
  endpoint: string,
  options: DevicePluginOptions,
): Promise<grpc.ServiceError | undefined> {
  const client = new RegistrationClient(
    `unix://${join(dir, "kubelet.sock")}`,
    grpc.credentials.createInsecure(),
  );
  const error = await new Promise<grpc.ServiceError | undefined>((resolve) =>
    client.register(
      { version: "v1beta1", endpoint, resourceName, options },
      new grpc.Metadata(),
      { deadline: Date.now() + 15_000 },
      (err) => resolve(err ?? undefined),
    ),
  );
  client.close();
  return error;
}

async function devicesSeen(resourceName: string): Promise<void> {
  await waitFor(
    `the device list of ${resourceName}`,
    (observe) => {
      const r = kubelet.resources.get(resourceName);
      observe({ connected: r?.connected, devices: r?.devices.length, refused: kubelet.refused });
      return r?.connected === true && r.devices.length === DEVICE_IDS.length;
    },
    { timeoutMs: 10_000, intervalMs: 10 },
  );
}

const label = (n: number, c: string) => c.repeat(n);
/** A DNS subdomain of exactly `length` characters, in labels of at most 63. */
function domainOf(length: number): string {
  const labels: string[] = [];
  let left = length;
  while (left > 0) {
    const take = Math.min(63, left === 65 ? 62 : left);
    labels.push(label(take, "a"));
    left -= take + 1;
  }
  return labels.join(".");
}

/**
 * Resource names with the kubelet's answer (IsExtendedResourceName in pkg/apis/core/v1/helper, applied by
 * Register in pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go), worked out from its source.
 */
const RESOURCE_NAMES: { name: string; kubelet: "accept" | "refuse"; why: string }[] = [
  { name: "hardware-vendor.example/foo", kubelet: "accept", why: "domain/name" },
  { name: "example.com/Foo_Bar.baz-1", kubelet: "accept", why: "name part may hold upper case, _ and ." },
  {
    name: "example.com/requests.foo",
    kubelet: "accept",
    why: "only the whole name may not start with requests.",
  },
  {
    name: "kubernetes.io.example/foo",
    kubelet: "accept",
    why: "kubernetes.io only counts right before the /",
  },
  { name: `example.com/${label(63, "x")}`, kubelet: "accept", why: "63-character name part" },
  { name: `${domainOf(244)}/foo`, kubelet: "accept", why: "requests.<domain> is exactly 253 characters" },
  { name: "foo", kubelet: "refuse", why: "no / makes it native" },
  { name: "kubernetes.io/foo", kubelet: "refuse", why: "native domain" },
  { name: "example.kubernetes.io/foo", kubelet: "refuse", why: "a *kubernetes.io/ domain is native" },
  { name: "notkubernetes.io/foo", kubelet: "refuse", why: "contains kubernetes.io/" },
  { name: "requests.example/foo", kubelet: "refuse", why: "starts with requests." },
  { name: "Example.com/foo", kubelet: "refuse", why: "domain must be lower case" },
  { name: "example.com/foo/bar", kubelet: "refuse", why: "two slashes" },
  { name: "example.com/", kubelet: "refuse", why: "empty name part" },
  { name: "/foo", kubelet: "refuse", why: "empty domain" },
  { name: "example.com/-foo", kubelet: "refuse", why: "name part must start alphanumeric" },
  { name: "example.com/foo bar", kubelet: "refuse", why: "space in the name part" },
  { name: `example.com/${label(64, "x")}`, kubelet: "refuse", why: "64-character name part" },
  {
    name: `${domainOf(245)}/foo`,
    kubelet: "refuse",
    why: "requests.<domain> exceeds a 253-character subdomain",
  },
  { name: "", kubelet: "refuse", why: "empty" },
];

describe("resource names, by the kubelet's rules", () => {
  it("the table's domains have the lengths it claims", () => {
    expect(domainOf(244)).toHaveLength(244);
    expect(domainOf(245)).toHaveLength(245);
  });

  it.each(RESOURCE_NAMES)("$kubelet $name ($why): the rule", ({ name, kubelet: answer }) => {
    expect(isExtendedResourceName(name)).toBe(answer === "accept");
  });

  it("Register answers every name of the table as the kubelet does, with the kubelet's message", async () => {
    const answers: { name: string; got: string }[] = [];
    for (const { name, kubelet: answer } of RESOURCE_NAMES) {
      const { error } = await register(name, {
        preStartRequired: false,
        getPreferredAllocationAvailable: false,
      });
      if (answer === "accept") {
        if (error === undefined) await devicesSeen(name);
        answers.push({ name, got: error === undefined ? "accept" : `refuse: ${error.details}` });
      } else {
        answers.push({ name, got: error === undefined ? "accept" : error.details });
      }
    }
    expect(answers).toEqual(
      RESOURCE_NAMES.map(({ name, kubelet: answer }) => ({
        name,
        got: answer === "accept" ? "accept" : `the ResourceName ${JSON.stringify(name)} is invalid`,
      })),
    );
  });

  it("refuses a version the kubelet does not speak", async () => {
    const { error } = await register(
      "example.com/foo",
      { preStartRequired: false, getPreferredAllocationAvailable: false },
      "v1alpha1",
    );
    expect(error?.details).toBe(
      'requested API version "v1alpha1" is not supported by kubelet. Supported version is ["v1beta1"]',
    );
  });
});

describe("container start", () => {
  it("calls PreStartContainer with the container's devices and the kubelet's 30 s deadline when the plugin asks", async () => {
    const { plugin } = await register("example.com/pre", {
      preStartRequired: true,
      getPreferredAllocationAvailable: false,
    });
    await devicesSeen("example.com/pre");
    const { deviceIds } = await kubelet.allocate("example.com/pre", 2);
    expect(plugin.preStartCalls.map((c) => c.request.devicesIds)).toEqual([deviceIds]);
    const deadlineMs = plugin.preStartCalls[0]!.deadlineMs;
    expect(deadlineMs).toBeGreaterThan(25_000);
    expect(deadlineMs).toBeLessThanOrEqual(30_000);
  });

  it("does not call PreStartContainer when the plugin does not ask", async () => {
    const { plugin } = await register("example.com/nopre", {
      preStartRequired: false,
      getPreferredAllocationAvailable: false,
    });
    await devicesSeen("example.com/nopre");
    await kubelet.allocate("example.com/nopre", 1);
    expect(plugin.preStartCalls).toEqual([]);
  });
});

describe("GetPreferredAllocation", () => {
  it("sends the devices already chosen as must_include, inside available, with the whole request as the size", async () => {
    const resource = "example.com/pref";
    const { plugin } = await register(resource, {
      preStartRequired: false,
      getPreferredAllocationAvailable: true,
    });
    await devicesSeen(resource);
    // An init container of the pod held d-1 and d-4; the app container may reuse them.
    plugin.preferredAnswer = () => ["d-1", "d-4"];
    const init = await kubelet.allocate(resource, 2);
    const reuse = init.deviceIds;
    expect(reuse).toEqual(["d-1", "d-4"]);

    // The plugin keeps must_include and picks d-5 and d-0, plus an id the kubelet never offered.
    plugin.preferredAnswer = (req) => [
      ...req.containerRequests[0]!.mustIncludeDeviceIDs,
      "d-5",
      "nope",
      "d-0",
    ];
    const app = await kubelet.allocate(resource, 4, { reuse });

    const request = plugin.preferredRequests.at(-1)!.containerRequests[0]!;
    expect(request.mustIncludeDeviceIDs.slice().sort()).toEqual(reuse.slice().sort());
    expect(request.allocationSize).toBe(4);
    const free = DEVICE_IDS.filter((id) => !reuse.includes(id));
    expect(request.availableDeviceIDs.slice().sort()).toEqual([...free, ...reuse].sort());
    // Honoured: the reused devices and the plugin's picks that were available, nothing else.
    expect(app.deviceIds.slice().sort()).toEqual([...reuse, "d-0", "d-5"].sort());
  });

  it("asks nothing when the reused devices cover the request", async () => {
    const resource = "example.com/covered";
    const { plugin } = await register(resource, {
      preStartRequired: false,
      getPreferredAllocationAvailable: true,
    });
    await devicesSeen(resource);
    plugin.preferredAnswer = () => [];
    const init = await kubelet.allocate(resource, 2);
    const asked = plugin.preferredRequests.length;
    const app = await kubelet.allocate(resource, 2, { reuse: init.deviceIds });
    expect(app.deviceIds).toEqual(init.deviceIds);
    expect(plugin.preferredRequests).toHaveLength(asked);
  });
});

describe("two plugins for one resource (a surge upgrade)", () => {
  const OPTIONS: DevicePluginOptions = { preStartRequired: false, getPreferredAllocationAvailable: false };

  /** The healthy device count the kubelet would advertise as allocatable. */
  const allocatable = (resourceName: string): number | undefined =>
    kubelet.capacity(resourceName)?.allocatable;

  it.each([
    // kubernetes #121994: the old plugin's end is taken for the resource's, and the new plugin is cut off.
    { oneEndpointPerResource: true, after: 0 },
    // kubernetes PR #135437 (v1.37.0): one endpoint per socket; the old plugin's end changes nothing.
    { oneEndpointPerResource: false, after: DEVICE_IDS.length },
  ])(
    "one endpoint per resource: $oneEndpointPerResource → allocatable $after once the old plugin goes",
    async ({ oneEndpointPerResource, after }) => {
      await kubelet.stop();
      kubelet = new SimulatedDeviceManager({ dir, gracePeriodMs: 60_000, oneEndpointPerResource });
      await kubelet.start();
      const resource = "vendor.example/surge";
      const old = await register(resource, OPTIONS);
      expect(old.error).toBeUndefined();
      await devicesSeen(resource);
      const next = await register(resource, OPTIONS);
      expect(next.error).toBeUndefined();
      await devicesSeen(resource);
      expect(allocatable(resource)).toBe(DEVICE_IDS.length);

      old.plugin.close();
      await waitFor(
        `allocatable ${after} after the old plugin went`,
        (observe) => {
          observe({
            allocatable: allocatable(resource),
            connected: kubelet.resources.get(resource)?.connected,
          });
          return allocatable(resource) === after;
        },
        { timeoutMs: 10_000, intervalMs: 10 },
      );
      if (after > 0) {
        // And it stays so: give a wrongly applied disconnect the time to land.
        await new Promise((r) => setTimeout(r, 300));
        expect(allocatable(resource)).toBe(after);
      }
    },
  );

  it("one endpoint per socket: the old plugin keeps its stream, and serves the resource when the new one goes first", async () => {
    await kubelet.stop();
    kubelet = new SimulatedDeviceManager({ dir, gracePeriodMs: 60_000, oneEndpointPerResource: false });
    await kubelet.start();
    const resource = "vendor.example/rollback";
    await register(resource, OPTIONS);
    await devicesSeen(resource);
    const next = await register(resource, OPTIONS);
    await devicesSeen(resource);
    expect(kubelet.resources.get(resource)?.endpoint).toBe("p-2.sock");
    // A rollback: the new plugin goes, the old one was never cut off and is promoted.
    next.plugin.close();
    await waitFor(
      "the old plugin serving the resource",
      (observe) => {
        const r = kubelet.resources.get(resource);
        observe({ endpoint: r?.endpoint, connected: r?.connected, allocatable: allocatable(resource) });
        return r?.endpoint === "p-1.sock" && r.connected;
      },
      { timeoutMs: 10_000, intervalMs: 10 },
    );
    expect(allocatable(resource)).toBe(DEVICE_IDS.length);
    // A second registration on a socket that is still connected is refused, as PluginConnected does.
    const again = await registerAgain(resource, "p-1.sock", OPTIONS);
    expect(again?.details).toBe(`device plugin already connected: ${join(dir, "p-1.sock")}`);
    expect(allocatable(resource)).toBe(DEVICE_IDS.length);
  });

  it.each([
    // Before v1.37 DeRegisterPlugin finds the client by resource name: the new plugin is cut off.
    { oneEndpointPerResource: true, after: 0 },
    { oneEndpointPerResource: false, after: DEVICE_IDS.length },
  ])(
    "through the plugin watcher, one endpoint per resource: $oneEndpointPerResource → allocatable $after once the old registration socket goes",
    async ({ oneEndpointPerResource, after }) => {
      await kubelet.stop();
      const registryDir = join(dir, "plugins_registry");
      kubelet = new SimulatedDeviceManager({
        dir,
        pluginsRegistryDir: registryDir,
        gracePeriodMs: 60_000,
        oneEndpointPerResource,
      });
      await kubelet.start();
      const resource = "vendor.example/watched";
      const watcherRegistration = async (name: string): Promise<PluginWatcherRegistration> => {
        const plugin = new ScriptedPlugin(OPTIONS);
        plugins.push(plugin);
        await plugin.listen(join(dir, `${name}.sock`));
        const registration = new PluginWatcherRegistration({
          registryDir,
          socketName: () => `${name}-reg.sock`,
          resourceName: resource,
          endpointPath: () => join(dir, `${name}.sock`),
          supportedVersions: ["v1beta1"],
          logger: pino({ level: "silent" }),
          onStatus: () => undefined,
        });
        await registration.serve();
        return registration;
      };
      const old = await watcherRegistration("old");
      await devicesSeen(resource);
      const next = await watcherRegistration("new");
      try {
        await waitFor(
          "the new plugin serving the resource",
          () => kubelet.resources.get(resource)?.endpoint === join(dir, "new.sock"),
          { timeoutMs: 10_000, intervalMs: 10 },
        );
        // Only the old registration socket goes; the old plugin's own endpoint keeps serving.
        await old.close();
        await waitFor(
          `allocatable ${after} after the old registration socket went`,
          (observe) => {
            observe({
              allocatable: allocatable(resource),
              registrations: kubelet.watcherRegistrations.length,
            });
            return allocatable(resource) === after;
          },
          { timeoutMs: 10_000, intervalMs: 10 },
        );
        if (after > 0) {
          // The watcher looks again every second: give a wrongly applied deregistration the time to land.
          await new Promise((r) => setTimeout(r, 1_200));
          expect(allocatable(resource)).toBe(after);
        }
      } finally {
        await next.close();
      }
    },
  );
});

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
