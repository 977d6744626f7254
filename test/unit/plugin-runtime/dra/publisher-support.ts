// An in-memory API for the ResourceSlice publisher's tests, and publishers started against it (stopped after
// each test).
import { pino } from "pino";
import { SlicePublisher } from "../../../../src/plugin-runtime/dra/publisher.js";
import type { PoolDevice, ResourceSlice } from "../../../../src/plugin-runtime/dra/slices.js";
import {
  ApiError,
  type ApiRequest,
  type ApiWatchRequest,
  type WatchEvent,
} from "../../../../src/plugin-runtime/report/api-client.js";

export const logger = pino({ level: process.env["DPO_TEST_LOG"] ?? "silent" });

export interface Watcher {
  onEvent: (event: WatchEvent<ResourceSlice>) => void;
  end: (err?: ApiError) => void;
}

/**
 * A tiny resourceslices store with request counting and injectable failures. Writes get a
 * resourceVersion and, on create, a uid, and go out to the open watches as the API server sends them (a
 * write's event may come before its answer); a watch first replays what happened after the
 * resourceVersion it asks for.
 */
export class FakeApi {
  readonly objects = new Map<string, ResourceSlice>();
  readonly calls: string[] = [];
  /** The path of every watch started. */
  readonly watchPaths: string[] = [];
  failures: ApiError[] = [];
  /** As a 1.35 API server with DRADeviceTaints off: device taints are dropped from every write. */
  dropTaints = false;
  /** Server-side dry runs seen (answered, never stored). */
  dryRuns = 0;
  private rv = 0;
  private uid = 0;
  private readonly watchers = new Set<Watcher>();
  private readonly history: WatchEvent<ResourceSlice>[] = [];

  request<T>(req: ApiRequest): Promise<T> {
    this.calls.push(req.method);
    const failure = this.failures.shift();
    if (failure) return Promise.reject(failure);
    const name = req.path.split("?")[0]!.split("/")[5];
    switch (req.method) {
      case "GET":
        return Promise.resolve({
          metadata: { resourceVersion: String(this.rv) },
          items: [...this.objects.values()],
        } as T);
      case "POST":
      case "PUT": {
        const slice = this.stored(req.body as ResourceSlice);
        if (req.path.includes("dryRun=All")) {
          this.dryRuns++;
          return Promise.resolve(slice as T);
        }
        const uid = this.objects.get(slice.metadata.name)?.metadata.uid ?? `uid-${++this.uid}`;
        const stored = {
          ...slice,
          metadata: { ...slice.metadata, uid, resourceVersion: String(++this.rv) },
        };
        const type = this.objects.has(slice.metadata.name) ? "MODIFIED" : "ADDED";
        this.objects.set(slice.metadata.name, stored);
        this.emit(type, stored);
        return Promise.resolve(stored as T);
      }
      case "DELETE":
        this.remove(name!);
        return Promise.resolve({} as T);
      default:
        return Promise.reject(new Error(`unexpected ${req.method}`));
    }
  }

  private stored(slice: ResourceSlice): ResourceSlice {
    if (!this.dropTaints) return slice;
    const devices = slice.spec.devices?.map(({ taints: _dropped, ...rest }) => rest);
    return { ...slice, spec: { ...slice.spec, ...(devices === undefined ? {} : { devices }) } };
  }

  watch<T>(req: ApiWatchRequest, onEvent: (event: WatchEvent<T>) => void): Promise<void> {
    this.watchPaths.push(req.path);
    const since = Number(new URLSearchParams(req.path.split("?")[1]).get("resourceVersion") ?? 0);
    for (const event of this.history) {
      if (Number(event.object.metadata.resourceVersion) > since) onEvent(event as WatchEvent<T>);
    }
    return new Promise((resolve, reject) => {
      const watcher: Watcher = {
        onEvent: onEvent as (event: WatchEvent<ResourceSlice>) => void,
        end: (err) => {
          this.watchers.delete(watcher);
          if (err) reject(err);
          else resolve();
        },
      };
      this.watchers.add(watcher);
      req.signal?.addEventListener(
        "abort",
        () => watcher.end(new ApiError("aborted", { code: 0, reason: "Aborted" })),
        { once: true },
      );
    });
  }

  /** Someone else deletes a slice (the kubelet starting). */
  deleteBehindBack(name: string): void {
    this.remove(name);
  }

  /** Someone else rewrites a slice. */
  replaceBehindBack(slice: ResourceSlice): void {
    const stored = { ...slice, metadata: { ...slice.metadata, resourceVersion: String(++this.rv) } };
    this.objects.set(slice.metadata.name, stored);
    this.emit("MODIFIED", stored);
  }

  /** Ends every open watch with `err` (410: the resourceVersion was compacted away). */
  endWatches(err: ApiError): void {
    for (const watcher of [...this.watchers]) watcher.end(err);
  }

  get openWatches(): number {
    return this.watchers.size;
  }

  private remove(name: string): void {
    const gone = this.objects.get(name);
    if (gone === undefined) return;
    this.objects.delete(name);
    this.emit("DELETED", { ...gone, metadata: { ...gone.metadata, resourceVersion: String(++this.rv) } });
  }

  private emit(type: "ADDED" | "MODIFIED" | "DELETED", object: ResourceSlice): void {
    this.history.push({ type, object });
    for (const watcher of this.watchers) watcher.onEvent({ type, object });
  }
}

export const generation = (api: FakeApi): number | undefined =>
  [...api.objects.values()][0]?.spec.pool.generation;

/** Every publisher a test started: stopPublishers stops them. */
export const publishers: SlicePublisher[] = [];

/** A publisher of `devices()` for node n, config c of driver d.example.com, against `api`; stopped by stopPublishers. */
export function startPublisher(api: FakeApi, devices: () => PoolDevice[], coalesceMs = 30): SlicePublisher {
  const p = new SlicePublisher({
    client: api,
    driver: "d.example.com",
    node: "n",
    configName: "c",
    devices,
    logger,
    coalesceMs,
    retryBaseMs: 20,
    retryMaxMs: 100,
  });
  publishers.push(p);
  return p;
}

export async function stopPublishers(): Promise<void> {
  for (const p of publishers.splice(0)) await p.stop();
}
