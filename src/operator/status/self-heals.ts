// The Events that mirror a plugin's self-heal (status.registration.selfHeal of its DeviceNodeState): a
// Warning naming the node when the plugin registered again because the kubelet handed out fewer devices
// than it advertised as healthy, and a Normal one once the kubelet lists them all again. Remembers, per
// config and node, the last heal it announced, so each is announced once per operator process.
import type { DeviceNodeState } from "../../api/v1beta1/devicenodestate.js";
import type { StatusEvent } from "./transition-events.js";

/**
 * A heal first seen by this process (a restart, a failover) is announced only if it is this recent: an
 * older one was announced by the process before, or is history the report still shows.
 */
export const SELF_HEAL_EVENT_WINDOW_MS = 10 * 60_000;

interface Announced {
  lastTime: string;
  healed: boolean;
}

export class SelfHealEvents {
  private readonly announced = new Map<string, Map<string, Announced>>();

  /** Events for the heals in `reports` not announced yet; `nowMs` judges a heal seen for the first time. */
  events(config: string, reports: readonly DeviceNodeState[], nowMs: number): StatusEvent[] {
    const byNode = this.announced.get(config) ?? new Map<string, Announced>();
    this.announced.set(config, byNode);
    const events: StatusEvent[] = [];
    for (const report of reports) {
      const heal = report.status?.registration.selfHeal;
      if (heal === undefined) continue;
      const node = report.spec.nodeName;
      const seen = byNode.get(node);
      const healed = heal.healedTime !== undefined;
      const fresh =
        seen === undefined ? nowMs - Date.parse(heal.lastTime) <= SELF_HEAL_EVENT_WINDOW_MS : true;
      if (seen?.lastTime !== heal.lastTime && fresh) {
        events.push({ type: "Warning", reason: "CapacityLost", message: `node ${node}: ${heal.message}` });
      }
      if (healed && (seen?.lastTime !== heal.lastTime || !seen.healed) && fresh) {
        const afterS = Math.round((Date.parse(heal.healedTime!) - Date.parse(heal.lastTime)) / 100) / 10;
        events.push({
          type: "Normal",
          reason: "CapacityRestored",
          message: `node ${node}: the kubelet lists every healthy device again, ${afterS} s after the plugin registered again (${heal.count} self-heals since it started)`,
        });
      }
      byNode.set(node, { lastTime: heal.lastTime, healed });
    }
    return events;
  }

  /** The config is gone: forget its nodes. */
  forget(config: string): void {
    this.announced.delete(config);
  }
}
