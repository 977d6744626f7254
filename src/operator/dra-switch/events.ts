// What a publish switch tells about each node as it moves (events on the config), and the upgrade
// status's message during a switch: which node is where. Pure.
import type { PublishMode } from "../../api/v1beta1/publish.js";

/** A plan's action as far as the switch's events read it. */
interface PlannedAction {
  node: string;
  kind: string;
}

export interface SwitchEvent {
  type: "Normal";
  reason: string;
  message: string;
}

function pathName(path: PublishMode): string {
  return path === "DRA" ? "the DRA plugin" : "the device plugin";
}

/**
 * One event per node step of a switch from `from` to `to` (a rollback goes from `to` back to `from`):
 * the old path stopping, the new one assigned once the old one no longer advertises, the node serving.
 */
export function switchEvents(
  actions: readonly PlannedAction[],
  switching: { from: PublishMode; to: PublishMode },
  resourceName: string,
): SwitchEvent[] {
  const { from, to } = switching;
  const gone = (path: PublishMode) =>
    path === "DRA"
      ? `its ResourceSlices of the driver are gone`
      : `its allocatable ${resourceName} is 0 or absent`;
  const out: SwitchEvent[] = [];
  for (const a of actions) {
    const at = `node ${a.node}`;
    switch (a.kind) {
      case "RemoveFromOld":
        out.push({
          type: "Normal",
          reason: "SwitchNodeStopping",
          message: `${at}: switching ${resourceName} from ${from} to ${to}; stopping ${pathName(from)}`,
        });
        break;
      case "AddToNew":
        out.push({
          type: "Normal",
          reason: "SwitchNodeStarting",
          message: `${at}: ${pathName(from)} is gone and ${gone(from)}; starting ${pathName(to)}`,
        });
        break;
      case "RemoveFromNew":
        out.push({
          type: "Normal",
          reason: "SwitchNodeStopping",
          message: `${at}: rolling the switch back to ${from}; stopping ${pathName(to)}`,
        });
        break;
      case "AddToOld":
        out.push({
          type: "Normal",
          reason: "SwitchNodeStarting",
          message: `${at}: ${pathName(to)} is gone and ${gone(to)}; starting ${pathName(from)} again`,
        });
        break;
    }
  }
  return out;
}

/** The upgrade status's message while a switch moves: the direction, the nodes in flight, a wait. */
export function switchMessage(
  switching: { from: PublishMode; to: PublishMode },
  inFlight: readonly string[],
  blocked: string | undefined,
  rollingBack = false,
): string {
  const shown = inFlight.slice(0, 5).join(", ");
  const more = inFlight.length > 5 ? ` and ${inFlight.length - 5} more` : "";
  const moving =
    inFlight.length === 0 ? "no node in flight" : `in flight (neither path or starting): ${shown}${more}`;
  const what = rollingBack
    ? `rolling the switch back from ${switching.to} to ${switching.from}`
    : `switching spec.publish from ${switching.from} to ${switching.to}`;
  const text = `${what} node by node, each node replaced: ${moving}${blocked !== undefined ? `; ${blocked}` : ""}`;
  return text.length > 1024 ? `${text.slice(0, 1021)}...` : text;
}
