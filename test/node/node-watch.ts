// A watch of one Node for a whole scenario, whose own liveness is checked: a LiveWatch
// (tools/upgrade-load/live-watch.ts), which starts an ended watch again from its last resourceVersion (each
// restart counted) and keeps an end it cannot resume from as a gap; before its figures count, the watch must
// have delivered the Node as a GET sees it now.
import type { V1Node } from "@kubernetes/client-node";
import { LiveWatch } from "../../tools/upgrade-load/live-watch.js";
import { kubeConfigFromInjected, waitFor } from "../cluster/helpers.js";
import { core } from "./support.js";

export class NodeWatch {
  private readonly live: LiveWatch<V1Node>;

  constructor(
    private readonly node: string,
    onNode: (node: V1Node) => void,
  ) {
    this.live = new LiveWatch<V1Node>(
      kubeConfigFromInjected(),
      "/api/v1/nodes",
      { fieldSelector: `metadata.name=${node}` },
      (_type, object) => onNode(object),
    );
  }

  /** Node objects delivered (the first ADDED included). */
  get samples(): number {
    return this.live.events;
  }

  /** Times the watch ended and was started again from its last resourceVersion. */
  get restarts(): number {
    return this.live.restarts;
  }

  /** Where events may have been missed: an expired version, or the watch failing when stopped. */
  get gaps(): readonly string[] {
    return this.live.gaps;
  }

  start(): Promise<void> {
    return this.live.start();
  }

  /** Waits until the watch has delivered the Node's version a GET returns now: it is live and caught up. */
  async caughtUp(timeoutMs = 30_000): Promise<void> {
    const now = (await core().readNode({ name: this.node })).metadata!.resourceVersion!;
    await waitFor(
      `the watch of ${this.node} to deliver resourceVersion ${now}`,
      (observe) => {
        const version = this.live.version;
        observe({ version, ...this.live.health() });
        return version !== undefined && BigInt(version) >= BigInt(now);
      },
      { timeoutMs, intervalMs: 50 },
    );
  }

  stop(): void {
    this.live.stop();
  }
}
