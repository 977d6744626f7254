// Whether the nodes of a publish switch (spec.publish changed between DevicePlugin and DRA) may start
// moving: a switch to DRA only while the DeviceClass maps the config's extended resource (the
// ExtendedResourceMapping condition's switchToDraMayStart), since without the mapping every pod asking for
// `<resourceName>: N` would stay Pending on the nodes already switched. A switch back to the device plugin
// may always start. Nodes already in flight finish either way. Pure.
import type { PublishMode } from "../../api/v1beta1/publish.js";

/** What the ExtendedResourceMapping condition says, as far as the gate reads it. */
export interface MappingFacts {
  /** extendedResourceMapping(...).switchToDraMayStart. */
  switchToDraMayStart: boolean;
  /** The condition's status, reason and message, for the wait's message. */
  status: string;
  reason: string;
  message: string;
}

export interface SwitchGateInput {
  /** The publish mode of the revision nodes move from (the base DaemonSet's). */
  from: PublishMode;
  /** The publish mode of the current spec. */
  to: PublishMode;
  /** Undefined while the reconciler has not judged the mapping (then a switch to DRA waits). */
  mapping: MappingFacts | undefined;
}

/** Why no node of the switch may start now, or undefined when they may (or nothing switches). */
export function switchStartBlocked(input: SwitchGateInput): string | undefined {
  if (input.from === input.to || input.to !== "DRA") return undefined;
  const m = input.mapping;
  if (m === undefined) {
    return "the switch to DRA waits: whether the DeviceClass can map the extended resource is not known yet; the device plugin keeps serving";
  }
  if (m.switchToDraMayStart) return undefined;
  return `the switch to DRA waits for ExtendedResourceMapping (now ${m.status}, ${m.reason}: ${m.message}); the device plugin keeps serving`;
}
