// A watch of one Node for a whole scenario, whose own liveness is checked: client-node's Watch ends after 30 s
// without an event and the API server ends watches too, so an ended watch is started again from the last
// resourceVersion it saw (each restart counted), an end it cannot resume from (410 Gone: events may be lost) is
// kept as a gap, and before its figures count the watch must have delivered the Node as a GET sees it now.
import { Watch, type V1Node } from "@kubernetes/client-node";
import { kubeConfigFromInjected, waitFor } from "../cluster/helpers.js";
import { core } from "./support.js";

export class NodeWatch {
  /** Node objects delivered (the first ADDED included). */
  samples = 0;
  /** Times the watch ended and was started again from its last resourceVersion. */
  restarts = 0;
  /** Why each end happened. */
  readonly ends: string[] = [];
  /** Ends it could not resume from (the version expired): events in between may be missing. */
  readonly gaps: string[] = [];
  private version: string | undefined;
  private abort: (() => void) | undefined;
  private stopped = false;

  constructor(
    private readonly node: string,
    private readonly onNode: (node: V1Node) => void,
  ) {}

  async start(): Promise<void> {
    await this.open();
  }

  private async open(): Promise<void> {
    const query: Record<string, string> = { fieldSelector: `metadata.name=${this.node}` };
    if (this.version !== undefined) query.resourceVersion = this.version;
    const request = await new Watch(kubeConfigFromInjected()).watch(
      "/api/v1/nodes",
      query,
      (type: string, object: V1Node) => {
        if (type === "ERROR") {
          // A Status, not a Node (e.g. 410 Gone): the server ends the watch next; it starts over then.
          this.gaps.push(JSON.stringify(object));
          this.version = undefined;
          return;
        }
        if (type === "BOOKMARK") return;
        this.version = object.metadata?.resourceVersion ?? this.version;
        this.samples++;
        this.onNode(object);
      },
      (err: unknown) => {
        if (this.stopped) return;
        const why =
          err instanceof Error ? err.message : err == null ? "closed by the server" : JSON.stringify(err);
        this.ends.push(why);
        if (/410|expired|too old/i.test(why)) {
          this.gaps.push(why);
          this.version = undefined;
        }
        this.restarts++;
        void this.open().catch((e: unknown) => this.ends.push(`restart failed: ${String(e)}`));
      },
    );
    this.abort = () => request.abort();
  }

  /** Waits until the watch has delivered the Node's version a GET returns now: it is live and caught up. */
  async caughtUp(timeoutMs = 30_000): Promise<void> {
    const now = (await core().readNode({ name: this.node })).metadata!.resourceVersion!;
    await waitFor(
      `the watch of ${this.node} to deliver resourceVersion ${now}`,
      (observe) => {
        observe({ version: this.version, samples: this.samples, ends: this.ends, gaps: this.gaps });
        return this.version !== undefined && BigInt(this.version) >= BigInt(now);
      },
      { timeoutMs, intervalMs: 50 },
    );
  }

  stop(): void {
    this.stopped = true;
    this.abort?.();
  }
}
