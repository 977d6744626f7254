// The Events a status transition deserves: what changed since the status last written. Pure.
import type { Condition, DevicePluginConfigStatus, NodeProblem } from "../../api/v1beta1/status.js";
import { admissionRejectedPodsOf } from "./admission-rejections.js";

export interface StatusEvent {
  type: "Normal" | "Warning";
  reason: string;
  message: string;
}

function conditionOf(conditions: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

/**
 * Events for what changed since the previous status: Stalled turning True; Ready turning True, or False
 * from True; and, once the plugin has settled, Degraded turning True or False and each listed node with
 * a problem (node and reason) it did not have before, or whose problem names something new: a device it
 * did not name, or pods the kubelet rejected since (a reboot's rejections arrive one by one, and the first
 * settled status may see only some of them). While the plugin rolls out, restarting pods make
 * passing problems, so Degraded and node events wait; the first settled status after a rollout is
 * compared with a clean slate, so a problem that outlives the rollout is reported once.
 */
export function transitionEvents(
  previous: DevicePluginConfigStatus | undefined,
  conditions: readonly Condition[],
  listed: readonly NodeProblem[],
  reconciling: boolean,
): StatusEvent[] {
  const events: StatusEvent[] = [];
  const before = (type: string): string => conditionOf(previous?.conditions, type)?.status ?? "Unknown";
  const now = (type: string): Condition | undefined => conditionOf(conditions, type);

  const stalled = now("Stalled");
  if (stalled?.status === "True" && before("Stalled") !== "True") {
    events.push({ type: "Warning", reason: stalled.reason, message: stalled.message });
  }
  const ready = now("Ready");
  if (ready?.status === "True" && before("Ready") !== "True") {
    events.push({ type: "Normal", reason: "Ready", message: ready.message });
  } else if (ready?.status === "False" && before("Ready") === "True") {
    events.push({ type: "Warning", reason: "NotReady", message: `${ready.reason}: ${ready.message}` });
  }
  if (reconciling) return events;

  const wasSettled = previous !== undefined && before("Reconciling") === "False";
  const degradedBefore = wasSettled ? before("Degraded") : "Unknown";
  const degraded = now("Degraded");
  if (degraded?.status === "True" && degradedBefore !== "True") {
    events.push({ type: "Warning", reason: "Degraded", message: `${degraded.reason}: ${degraded.message}` });
  } else if (degraded?.status === "False" && degradedBefore === "True") {
    events.push({ type: "Normal", reason: "Recovered", message: degraded.message });
  }
  const known = new Map(
    (wasSettled ? (previous?.problems ?? []) : []).map((p) => [`${p.node}\u0000${p.reason}`, p]),
  );
  for (const problem of listed) {
    const before = known.get(`${problem.node}\u0000${problem.reason}`);
    if (before !== undefined && !namesSomethingNew(before, problem)) continue;
    const devices = problem.devices && problem.devices.length > 0 ? ` [${problem.devices.join(", ")}]` : "";
    events.push({
      type: "Warning",
      reason: problem.reason,
      message: `node ${problem.node}: ${problem.message ?? problem.reason}${devices}`,
    });
  }
  return events;
}

/** Whether a node's problem, known before, now names a device or a rejected pod it did not. */
function namesSomethingNew(before: NodeProblem, now: NodeProblem): boolean {
  const devices = new Set(before.devices ?? []);
  if ((now.devices ?? []).some((d) => !devices.has(d))) return true;
  if (now.reason !== "AdmissionRejected") return false;
  const pods = { before: admissionRejectedPodsOf(before), now: admissionRejectedPodsOf(now) };
  const named = new Set(pods.before.named);
  return pods.now.count > pods.before.count || pods.now.named.some((p) => !named.has(p));
}
