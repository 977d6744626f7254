// Many plugins' node reports from one process: a NodeStateWriter (src/plugin-runtime/report, the code
// `dpo plugin` runs) per node, each over its own ApiClient with its own credentials, fed by a fake
// runtime whose devices the caller can flip. For benchmarks and tests of the operator at scale, where
// thousands of plugin processes would not fit the machine but their API traffic must be the real one.
import pino from "pino";
import type { ApiCredentials, ApiRequest } from "../../src/plugin-runtime/report/api-client.js";
import { ApiClient } from "../../src/plugin-runtime/report/api-client.js";
import { NodeStateWriter, type ReportSource } from "../../src/plugin-runtime/report/writer.js";
import type { PhysicalDevice } from "../../src/plugin-runtime/devices/types.js";
import type { RuntimeStatus } from "../../src/plugin-runtime/runtime.js";
import { PluginMetrics } from "../../src/plugin-runtime/metrics.js";

export interface ReportFleetOptions {
  namespace: string;
  config: { name: string; uid: string };
  resourceName: string;
  /** The plugin revision the config's DaemonSet runs (its `dpo.dev/revision` label). */
  revision?: string | undefined;
  /** Physical devices per node, all healthy at first. */
  devices: number;
  /** Device `index` of the node (the node's position in `credentials`); `dev-<index>` without attributes when absent. */
  device?: (nodeIndex: number, index: number) => SimulatedDevice;
  /** The credentials of each node's plugin (a pod-bound ServiceAccount token, as in the pod). */
  credentials: ReadonlyMap<string, ApiCredentials>;
  /** The writers' coalescing interval (the plugin's default when absent). */
  minIntervalMs?: number;
}

/** What a simulated device reports beside its health. */
export type SimulatedDevice = Pick<PhysicalDevice, "id" | "numaNode" | "attributes">;

function bareDevice(_nodeIndex: number, index: number): SimulatedDevice {
  return { id: `dev-${index}`, numaNode: 0, attributes: {} };
}

/** The runtime of one simulated plugin: registered, with devices whose health the fleet flips. */
class FakeRuntime implements ReportSource {
  private devices: PhysicalDevice[];
  private readonly listeners = new Set<() => void>();
  private readonly registeredAt = Date.now();

  constructor(
    readonly node: string,
    count: number,
    device: (index: number) => SimulatedDevice,
  ) {
    this.devices = Array.from({ length: count }, (_, i) => ({
      ...device(i),
      health: "Healthy",
      reason: "",
    }));
  }

  status(): RuntimeStatus {
    return {
      serving: true,
      registered: true,
      socketPath: "/var/lib/kubelet/device-plugins/dpo.sock",
      registrationSocketPath: "/var/lib/kubelet/device-plugins/kubelet.sock",
      kubeletAPIVersion: "v1beta1",
      lastRegistrationError: undefined,
      registrationChangedAtMs: this.registeredAt,
      kubeletRestarts: 0,
    };
  }

  snapshot(): {
    physical: readonly PhysicalDevice[];
    advertised: ReturnType<ReportSource["snapshot"]>["advertised"];
  } {
    return {
      physical: this.devices,
      advertised: this.devices.map((d) => ({
        id: d.id,
        physicalId: d.id,
        replica: 0,
        numaNode: d.numaNode,
        health: d.health,
        reason: d.reason,
      })),
    };
  }

  subscribe(onChange: () => void): () => void {
    this.listeners.add(onChange);
    return () => this.listeners.delete(onChange);
  }

  /** Flips device `index` between Healthy and Unhealthy; returns the new health. */
  flip(index: number): PhysicalDevice["health"] {
    const health = this.devices[index]!.health === "Healthy" ? "Unhealthy" : "Healthy";
    this.devices = this.devices.map((d, i) =>
      i === index ? { ...d, health, reason: health === "Unhealthy" ? "flap" : "" } : d,
    );
    for (const listener of this.listeners) listener();
    return health;
  }
}

export class ReportFleet {
  private readonly runtimes = new Map<string, FakeRuntime>();
  private readonly writers = new Map<string, NodeStateWriter>();
  private readonly clients: ApiClient[] = [];
  private requestCount = 0;
  private failedCount = 0;
  /** The plugins' metrics; one registry for all writers (the counters are not what is measured here). */
  readonly metrics = new PluginMetrics();

  constructor(private readonly opts: ReportFleetOptions) {
    const logger = pino({ level: process.env["FLEET_LOG_LEVEL"] ?? "silent" });
    const device = opts.device ?? bareDevice;
    let nodeIndex = 0;
    for (const [node, credentials] of opts.credentials) {
      const thisNode = nodeIndex++;
      const client = new ApiClient(credentials);
      this.clients.push(client);
      // Every request any writer makes passes here: the count is the plugins' API traffic.
      const api = {
        request: (req: ApiRequest): Promise<unknown> => {
          this.requestCount++;
          return client.request(req).catch((err: unknown) => {
            this.failedCount++;
            throw err;
          });
        },
      };
      const runtime = new FakeRuntime(node, opts.devices, (i) => device(thisNode, i));
      this.runtimes.set(node, runtime);
      this.writers.set(
        node,
        new NodeStateWriter({
          api,
          source: runtime,
          namespace: opts.namespace,
          config: opts.config,
          nodeName: node,
          resourceName: opts.resourceName,
          revision: opts.revision,
          pluginVersion: "fleet",
          logger,
          metrics: this.metrics,
          ...(opts.minIntervalMs === undefined ? {} : { minIntervalMs: opts.minIntervalMs }),
        }),
      );
    }
  }

  get nodes(): string[] {
    return [...this.writers.keys()];
  }

  /** Requests all writers have sent to the API server so far (failed ones included). */
  requests(): number {
    return this.requestCount;
  }

  failures(): number {
    return this.failedCount;
  }

  /** Starts the writers, `batch` at a time, each batch once its first reports are written. */
  async start(batch = 100, deadlineMs = 300_000): Promise<void> {
    const writers = [...this.writers.values()];
    const deadline = Date.now() + deadlineMs;
    for (let i = 0; i < writers.length; i += batch) {
      const slice = writers.slice(i, i + batch);
      for (const w of slice) w.start();
      while (slice.some((w) => w.written === undefined)) {
        if (Date.now() > deadline) {
          const missing = slice.filter((w) => w.written === undefined).map((w) => w.name);
          throw new Error(
            `report fleet: ${missing.length} writers of batch ${i / batch} have written nothing (${missing.slice(0, 3).join(", ")}…); ${this.failedCount} requests failed`,
          );
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }

  /** Whether every writer's last accepted report shows the runtime's current devices. */
  settled(): boolean {
    for (const [node, writer] of this.writers) {
      const devices = this.runtimes.get(node)!.snapshot().physical;
      const written = writer.written?.devices;
      if (written === undefined || written.length !== devices.length) return false;
      if (written.some((d, i) => d.health !== devices[i]!.health)) return false;
    }
    return true;
  }

  /** Flips the health of device `index` on `node`'s plugin. */
  flip(node: string, index = 0): PhysicalDevice["health"] {
    const runtime = this.runtimes.get(node);
    if (runtime === undefined) throw new Error(`report fleet: no plugin on node ${node}`);
    return runtime.flip(index);
  }

  /**
   * A flap storm: each of `nodes` flips device 0 once a second, `flips` times, the nodes' flips spread evenly
   * over each second. Resolves after the last flip.
   */
  async flapStorm(nodes: readonly string[], flips: number): Promise<void> {
    await Promise.all(
      nodes.map(
        (node, j) =>
          new Promise<void>((resolve) => {
            let done = 0;
            let timer: NodeJS.Timeout | undefined;
            const flip = (): void => {
              this.flip(node);
              if (++done >= flips) {
                clearInterval(timer);
                resolve();
              }
            };
            setTimeout(
              () => {
                flip();
                if (done < flips) timer = setInterval(flip, 1_000);
              },
              Math.floor((j * 1_000) / nodes.length),
            );
          }),
      ),
    );
  }

  /** Unhealthy devices on all nodes, as the runtimes have them now. */
  unhealthy(): number {
    let n = 0;
    for (const r of this.runtimes.values())
      n += r.snapshot().physical.filter((d) => d.health !== "Healthy").length;
    return n;
  }

  async stop(): Promise<void> {
    // No final "not registered" write: the fleet simulates plugins that keep running.
    await Promise.all([...this.writers.values()].map((w) => w.stop({ budgetMs: 0 })));
    for (const c of this.clients) c.close();
  }
}
