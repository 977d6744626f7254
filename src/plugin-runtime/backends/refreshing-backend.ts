// The life cycle every backend shares: a device list refreshed one run at a time, on file-system events
// and on a timer, published only when it changed, and a stop that leaves no watcher or timer behind.
import type { Logger } from "../../observability/json-log.js";
import type { CdiContainerEdits } from "../../cdi/spec.js";
import type { ContainerAllocation, PhysicalDevice } from "../devices/types.js";
import type { DeviceBackend, DeviceListener } from "../devices/backend.js";
import { DeviceListPublisher, UnknownDevicesError } from "./device-list.js";
import { DirectoryWatcher, SerialRunner } from "./watch.js";

export abstract class RefreshingBackend implements DeviceBackend {
  readonly preStartRequired: boolean = false;
  protected readonly logger: Logger;
  protected readonly publisher: DeviceListPublisher;
  protected readonly runner: SerialRunner;
  protected readonly watcher: DirectoryWatcher;
  protected stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private started: Promise<readonly PhysicalDevice[]> | undefined;

  constructor(
    readonly type: string,
    logger: Logger,
    private readonly refreshIntervalMs: number,
    watchOptions?: { readonly entriesOnly: boolean },
  ) {
    this.logger = logger.child({ backend: type });
    this.publisher = new DeviceListPublisher(this.logger);
    this.runner = new SerialRunner(() => this.refresh(), this.logger);
    this.watcher = new DirectoryWatcher(() => this.runner.request(), this.logger, watchOptions);
  }

  /** Looks at the devices again and publishes the list; never runs twice at once. */
  protected abstract refresh(): Promise<void>;

  abstract allocate(physicalIds: readonly string[]): ContainerAllocation;

  abstract cdiContainerEdits(physicalId: string): CdiContainerEdits | undefined;

  start(): Promise<readonly PhysicalDevice[]> {
    this.started ??= this.begin();
    return this.started;
  }

  devices(): readonly PhysicalDevice[] {
    return this.publisher.current();
  }

  subscribe(listener: DeviceListener): () => void {
    return this.publisher.subscribe(listener);
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    this.watcher.close();
    await this.runner.stop();
    this.publisher.clear();
  }

  /** The first refresh, then periodic ones (file-system events trigger them sooner). */
  protected async begin(): Promise<readonly PhysicalDevice[]> {
    await this.runner.runNow();
    this.refreshPeriodically();
    return this.publisher.current();
  }

  /** The timer also ends grace periods when no event comes, and covers trees that send no events (sysfs). */
  protected refreshPeriodically(): void {
    if (this.stopped) return;
    this.timer = setInterval(() => this.runner.request(), this.refreshIntervalMs);
    this.timer.unref();
  }

  /** Refuses ids this backend does not know (a device may vanish between the server's check and here). */
  protected assertKnown(physicalIds: readonly string[], known: { has(id: string): boolean }): void {
    const unknown = physicalIds.filter((id) => !known.has(id));
    if (unknown.length > 0) throw new UnknownDevicesError(this.type, unknown);
  }
}
