// Registering again when the kubelet hands out fewer of the plugin's devices than it advertises as healthy
// for longer than a bound (capacity-check.ts decides): the kubelet dropped the plugin without the plugin
// noticing. Keeps the decision's state and the record the node report carries.
import type { Logger } from "../../observability/json-log.js";
import type { PluginMetrics } from "../metrics.js";
import {
  INITIAL_CAPACITY_STATE,
  judgeCapacity,
  type CapacityObservation,
  type CapacityState,
} from "../podresources/capacity-check.js";

/** The reason label of dpo_plugin_reregistrations_total for a heal. */
export const CAPACITY_LOST = "CapacityLost";

/** What the plugin last did about lost capacity, for the node report (status.registration.selfHeal). */
export interface SelfHealRecord {
  /** Heals since the plugin started. */
  count: number;
  /** When the last one registered again (epoch ms). */
  lastAtMs: number;
  /** What the plugin saw: "kubelet advertised 0 of 4 healthy devices for 30 s; registered again". */
  message: string;
  /** When the kubelet listed every healthy device again after the last one; absent until it does. */
  healedAtMs?: number;
}

export interface CapacityHealOptions {
  /** How long the kubelet may list fewer before the plugin registers again (DEFAULT_CAPACITY_HEAL_AFTER_MS). */
  boundMs: number;
  resourceName: string;
  metrics: PluginMetrics;
  logger: Logger;
  /** The plugin's side of a reading, taken when the kubelet answered. */
  plugin: () => Omit<CapacityObservation, "atMs" | "kubeletAllocatable">;
  /** Register again on a fresh socket (the runtime's re-registration path). */
  reregister: (message: string) => void;
  /** The record changed. */
  onChange: () => void;
}

export class CapacityHeal {
  private state: CapacityState = INITIAL_CAPACITY_STATE;
  private record: SelfHealRecord | undefined;

  constructor(private readonly opts: CapacityHealOptions) {}

  get last(): SelfHealRecord | undefined {
    return this.record;
  }

  /** One answer of the kubelet's GetAllocatableResources: the resource's ids it would hand out. */
  observe(kubeletAllocatable: ReadonlySet<string>): void {
    const atMs = Date.now();
    const { state, action } = judgeCapacity(
      this.state,
      { atMs, kubeletAllocatable, ...this.opts.plugin() },
      this.opts.boundMs,
    );
    this.state = state;
    if (action.kind === "reregister") {
      this.record = { count: (this.record?.count ?? 0) + 1, lastAtMs: atMs, message: action.message };
      this.opts.metrics.reregistrations.inc({ resource: this.opts.resourceName, reason: CAPACITY_LOST });
      this.opts.logger.warn(
        { kubelet: action.kubelet, plugin: action.plugin, shortForMs: action.shortForMs },
        "the kubelet hands out fewer devices than the plugin advertises as healthy; registering again",
      );
      this.opts.reregister(action.message);
      this.opts.onChange();
    } else if (action.kind === "healed" && this.record !== undefined) {
      this.record = { ...this.record, healedAtMs: atMs };
      this.opts.logger.info(
        { afterMs: action.afterMs },
        "the kubelet lists every healthy device of the plugin again",
      );
      this.opts.onChange();
    }
  }
}
