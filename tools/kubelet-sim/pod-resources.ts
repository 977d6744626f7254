// A stand-in for the kubelet's PodResources API (v1.PodResourcesLister on pod-resources/kubelet.sock), for
// tests only: it answers from the simulated device manager's allocations, the simulated DRA manager's
// prepared claims and the pods the simulated kubelet runs, the way the kubelet's server combines its pod
// manager, device manager and DRA manager.
import * as grpc from "@grpc/grpc-js";
import type { V1Pod } from "@kubernetes/client-node";
import { mkdir, unlink } from "node:fs/promises";
import { dirname } from "node:path";
import {
  PodResourcesListerService,
  type ContainerDevices,
  type ContainerResources,
  type PodResources,
  type PodResourcesListerServer,
} from "../../src/plugin-runtime/proto/index.js";
import type { SimulatedDeviceManager } from "./device-manager.js";
import type { PreparedClaim } from "./dra-manager.js";
import { podClaimNames } from "./dra-rules.js";

/** A pod as the PodResources API lists it: identity, and the containers it reports on, in order. */
export interface PodResourcesPod {
  uid: string;
  name: string;
  namespace: string;
  /** Restartable init containers (sidecars) first, then the containers; other init containers are not listed. */
  containers: string[];
  /**
   * Listed container → the ResourceClaims it uses (its `resources.claims`, resolved as the kubelet's
   * resourceclaim.Name does), in the pod's order; undefined for a claim not created yet. Absent: none.
   */
  claims?: Readonly<Record<string, readonly (string | undefined)[]>>;
}

/** The containers the kubelet's List reports for a pod (server_v1.go: IsRestartableInitContainer, then Containers). */
export function podResourcesPod(pod: V1Pod): PodResourcesPod {
  const listed = [
    ...(pod.spec?.initContainers ?? []).filter((c) => c.restartPolicy === "Always"),
    ...(pod.spec?.containers ?? []),
  ];
  // GetContainerClaimInfos: the pod's claims in spec order that the container names; one that needs no
  // ResourceClaim (a template entry resolved to no name) is left out.
  const resolved = podClaimNames(pod);
  const claims: Record<string, (string | undefined)[]> = {};
  for (const c of listed) {
    const used = new Set((c.resources?.claims ?? []).map((claim) => claim.name));
    const names = resolved.filter((r) => used.has(r.podClaimName)).map((r) => r.claimName);
    if (names.length > 0) claims[c.name] = names;
  }
  return {
    uid: pod.metadata?.uid ?? "",
    name: pod.metadata?.name ?? "",
    namespace: pod.metadata?.namespace ?? "",
    containers: listed.map((c) => c.name),
    ...(Object.keys(claims).length > 0 ? { claims } : {}),
  };
}

export interface SimulatedPodResourcesOptions {
  /** Stands in for /var/lib/kubelet/pod-resources/kubelet.sock. */
  socketPath: string;
  /** What the device manager gave (or, in tests, a stand-in that says what it holds). */
  deviceManager: Pick<SimulatedDeviceManager, "containerDevices" | "device" | "allocatableDevices">;
  /** The claims the node's DRA manager prepared, by uid (its claim info cache); without it, no claims. */
  draManager?: { readonly prepared: ReadonlyMap<string, PreparedClaim> };
  /** The pods the kubelet runs (its GetActivePods): every pod bound to the node that is not finished. */
  pods: () => readonly PodResourcesPod[];
}

/** The calls answered, by method, for assertions. */
export interface PodResourcesCalls {
  list: number;
  getAllocatableResources: number;
  get: number;
}

export class SimulatedPodResourcesServer {
  private server: grpc.Server | undefined;
  readonly calls: PodResourcesCalls = { list: 0, getAllocatableResources: 0, get: 0 };

  constructor(private readonly opts: SimulatedPodResourcesOptions) {}

  get socketPath(): string {
    return this.opts.socketPath;
  }

  async start(): Promise<void> {
    await mkdir(dirname(this.opts.socketPath), { recursive: true });
    await unlink(this.opts.socketPath).catch(() => undefined);
    const server = new grpc.Server();
    const impl: PodResourcesListerServer = {
      list: (_call, callback) => {
        this.calls.list++;
        callback(null, { podResources: this.opts.pods().map((p) => this.resourcesOf(p)) });
      },
      getAllocatableResources: (_call, callback) => {
        this.calls.getAllocatableResources++;
        // No CPU or memory manager here: their lists stay empty, as on a kubelet with the none policies.
        callback(null, {
          devices: this.opts.deviceManager
            .allocatableDevices()
            .flatMap(({ resourceName, device }) => perNumaNode(resourceName, device.ID, numaNodes(device))),
          cpuIds: [],
          memory: [],
        });
      },
      get: (call, callback) => {
        this.calls.get++;
        const { podName, podNamespace } = call.request;
        const pod = this.opts.pods().find((p) => p.name === podName && p.namespace === podNamespace);
        if (pod === undefined) {
          // The kubelet returns a plain Go error, which gRPC sends as Unknown.
          callback(
            { code: grpc.status.UNKNOWN, details: `pod ${podName} in namespace ${podNamespace} not found` },
            null,
          );
          return;
        }
        callback(null, { podResources: this.resourcesOf(pod) });
      },
    };
    server.addService(PodResourcesListerService, impl);
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`unix://${this.opts.socketPath}`, grpc.ServerCredentials.createInsecure(), (e) =>
        e ? reject(e) : resolve(),
      ),
    );
    this.server = server;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (server !== undefined) {
      await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
      server.forceShutdown();
    }
    await unlink(this.opts.socketPath).catch(() => undefined);
  }

  private resourcesOf(pod: PodResourcesPod): PodResources {
    return {
      name: pod.name,
      namespace: pod.namespace,
      containers: pod.containers.map((name): ContainerResources => {
        const devices: ContainerDevices[] = [];
        for (const [resourceName, ids] of this.opts.deviceManager.containerDevices(pod.uid, name)) {
          for (const id of ids) {
            const device = this.opts.deviceManager.device(resourceName, id);
            devices.push(...perNumaNode(resourceName, id, device === undefined ? [] : numaNodes(device)));
          }
        }
        return {
          name,
          devices,
          cpuIds: [],
          memory: [],
          dynamicResources: this.dynamicResourcesOf(pod, name),
        };
      }),
      // No CPU or memory manager here, so no pod-level exclusive CPUs or memory either.
      cpuIds: [],
      memory: [],
    };
  }

  /**
   * GetDynamicResources (container_manager_linux.go, v1.37.2): each claim the container uses, from the
   * DRA manager's cache, with the devices its drivers' NodePrepareResources answered. A claim not created
   * or not in the cache (not prepared) makes the kubelet log an error and list none for the container.
   */
  private dynamicResourcesOf(
    pod: PodResourcesPod,
    container: string,
  ): ContainerResources["dynamicResources"] {
    const out: ContainerResources["dynamicResources"] = [];
    for (const claimName of pod.claims?.[container] ?? []) {
      const claim = [...(this.opts.draManager?.prepared.values() ?? [])].find(
        (c) => c.ref.namespace === pod.namespace && c.ref.name === claimName,
      );
      if (claimName === undefined || claim === undefined) return [];
      out.push({
        claimName: claim.ref.name,
        claimNamespace: claim.ref.namespace,
        claimResources: claimResources(claim),
      });
    }
    return out;
  }
}

/**
 * A claim's devices, per driver in the order they were prepared, as the kubelet lists them. Its CDI list
 * is declared once per driver and appended to for each device, so every device carries the CDI ids of
 * the driver's devices listed before it too (v1.37.2 does so; consumers must not read it per device).
 */
function claimResources(
  claim: PreparedClaim,
): ContainerResources["dynamicResources"][number]["claimResources"] {
  const out: ContainerResources["dynamicResources"][number]["claimResources"] = [];
  for (const driver of new Set(claim.drivers)) {
    const cdiDevices: { name: string }[] = [];
    for (const device of claim.devices.filter((d) => d.driver === driver)) {
      cdiDevices.push(...device.cdiDeviceIds.map((name) => ({ name })));
      out.push({
        cdiDevices: [...cdiDevices],
        driverName: driver,
        poolName: device.poolName,
        deviceName: device.deviceName,
      });
    }
  }
  return out;
}

function numaNodes(device: { topology?: { nodes: { ID: number }[] } | undefined }): number[] {
  return (device.topology?.nodes ?? []).map((n) => n.ID);
}

/**
 * One entry per device and NUMA node, as the kubelet answers (containerDevicesFromResourceDeviceInstances):
 * a device without topology gets one entry without it.
 */
function perNumaNode(resourceName: string, id: string, nodes: readonly number[]): ContainerDevices[] {
  if (nodes.length === 0) return [{ resourceName, deviceIds: [id] }];
  return nodes.map((node) => ({ resourceName, deviceIds: [id], topology: { nodes: [{ ID: node }] } }));
}
