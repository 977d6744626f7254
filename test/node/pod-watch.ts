// Watches a workload's pods and the events about them for a whole test on the real node: admission failures,
// container restarts, pods deleted, warnings, and why each watch ended.
import { Watch, type CoreV1Event, type KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { core } from "./support.js";

/**
 * Every pod of the Deployment and every event about one, for the whole test: admission failures (a pod
 * Failed, or the kubelet's UnexpectedAdmissionError / OutOf<resource>), container restarts, pods deleted.
 */
export class PodWatch {
  readonly pods = new Map<string, V1Pod>();
  readonly admissionFailures = new Set<string>();
  readonly restarts = new Set<string>();
  readonly deleted: string[] = [];
  readonly warnings = new Set<string>();
  private readonly aborts: (() => void)[] = [];

  /** Why a watch ended (each is started again at once, from the last version it saw). */
  readonly ends: string[] = [];
  private stopped = false;

  /** Pods labelled app=`app` in `namespace`, and the events of that namespace about them. */
  constructor(
    private readonly kc: KubeConfig,
    private readonly namespace: string,
    private readonly app: string,
  ) {}

  async start(): Promise<void> {
    await this.follow(
      `/api/v1/namespaces/${this.namespace}/pods`,
      { labelSelector: `app=${this.app}` },
      (t, o) => this.pod(t, o),
    );
    await this.follow<CoreV1Event>(`/api/v1/namespaces/${this.namespace}/events`, {}, (t, o) =>
      this.event(t, o),
    );
  }

  /**
   * A watch that goes on until stop(): client-node's Watch gives up after 30 s without an event (seen on
   * the real node: the first try's watches ended during the first switch) and the API server ends watches
   * too, so each end is recorded and the watch started again from the last resourceVersion seen.
   */
  private async follow<T extends { metadata?: { resourceVersion?: string } }>(
    path: string,
    query: Record<string, string>,
    handle: (type: string, object: T) => void,
  ): Promise<void> {
    let version: string | undefined;
    const open = async (): Promise<void> => {
      const request = await new Watch(this.kc).watch(
        path,
        { ...query, ...(version === undefined ? {} : { resourceVersion: version }) },
        (type, object: T) => {
          if (type === "ERROR") {
            // A Status, not an object (e.g. 410 Gone): the server ends the watch next; start over then.
            this.ends.push(`${path}: ${JSON.stringify(object)}`);
            version = undefined;
            return;
          }
          if (type === "BOOKMARK") return;
          version = object.metadata?.resourceVersion ?? version;
          handle(type, object);
        },
        (err: unknown) => {
          if (this.stopped) return;
          this.ends.push(`${path}: ${err instanceof Error ? err.message : String(err)}`);
          // An expired version (410) cannot be resumed: start over, and see every object again.
          if (/410|expired|too old/i.test(String(err))) version = undefined;
          setTimeout(() => void open().catch((e: unknown) => this.ends.push(`${path}: ${String(e)}`)), 100);
        },
      );
      this.aborts.push(() => request.abort());
    };
    await open();
  }

  /** Everything the watches might have missed: every pod and event there is now, through the same checks. */
  async sweep(): Promise<void> {
    const pods = await core().listNamespacedPod({
      namespace: this.namespace,
      labelSelector: `app=${this.app}`,
    });
    for (const pod of pods.items) this.pod("SWEPT", pod);
    const events = await core().listNamespacedEvent({ namespace: this.namespace });
    for (const event of events.items) this.event("SWEPT", event);
  }

  stop(): void {
    this.stopped = true;
    for (const abort of this.aborts) abort();
  }

  private pod(type: string, pod: V1Pod): void {
    const uid = pod.metadata?.uid ?? "";
    const name = pod.metadata?.name ?? "";
    this.pods.set(uid, pod);
    if (type === "DELETED") this.deleted.push(name);
    const reason = pod.status?.reason ?? "";
    if (pod.status?.phase === "Failed" || /UnexpectedAdmissionError|^OutOf/.test(reason)) {
      this.admissionFailures.add(
        `${name}: phase ${pod.status?.phase}, ${reason}: ${pod.status?.message ?? ""}`,
      );
    }
    for (const c of pod.status?.containerStatuses ?? []) {
      if (c.restartCount > 0) this.restarts.add(`${name}/${c.name}: ${c.restartCount} restarts`);
    }
  }

  private event(type: string, event: CoreV1Event): void {
    if (type === "DELETED" || !(event.involvedObject.name ?? "").startsWith(`${this.app}-`)) return;
    const line = `${event.involvedObject.kind} ${event.involvedObject.name}: ${event.reason}: ${event.message}`;
    if (/UnexpectedAdmissionError|^OutOf|AdmissionError/.test(event.reason ?? ""))
      this.admissionFailures.add(line);
    if (event.type === "Warning") this.warnings.add(line);
  }
}
