// How long nodes carry a config's Replace taint (its fence), timed from the Node updates a watch shows:
// what the upgrade tests bound and the upgrade benchmark reports.
import type { V1Node } from "@kubernetes/client-node";

/** How long each node carried a config's Replace taint, from the Node updates it is shown. */
export class FenceTimes {
  /** Per node, the ms it was fenced in all, counted once each fence came off. */
  readonly ms = new Map<string, number>();
  private readonly since = new Map<string, number>();

  constructor(private readonly taintKey: string) {}

  observe(node: V1Node): void {
    const name = node.metadata?.name ?? "";
    const fenced = (node.spec?.taints ?? []).some((t) => t.key === this.taintKey);
    const since = this.since.get(name);
    if (fenced && since === undefined) this.since.set(name, performance.now());
    if (!fenced && since !== undefined) {
      this.since.delete(name);
      this.ms.set(name, (this.ms.get(name) ?? 0) + performance.now() - since);
    }
  }
}
