// Whether the API server keeps DeviceClass spec.extendedResourceName (KEP-5004): it drops the field
// silently while the DRAExtendedResource gate is off (alpha and off by default in 1.35, locked on in 1.37),
// and no discovery document shows a gate. So the operator asks the only way there is: a server-side dry
// run of a class carrying the field, compared with what the server answers. Nothing is stored.
import type { Logger } from "pino";
import { LABEL_MANAGED_BY } from "../contract/names.js";
import { DEVICE_CLASSES, sleep, systemClock, type Clock, type ObjectClient } from "../kube/index.js";
import { MANAGED_BY } from "./model/names.js";
import type { DeviceClass } from "./controllers/dra.js";
import { extendedResourceNameKept } from "./status/extended-resource.js";

/** The class the probe dry-runs: no real class is ever created under this name. */
export const PROBE_DEVICE_CLASS = "extended-resource-probe.dpo.dev";
/** The extended resource name it carries (a dry run stores nothing, so no real class is shadowed). */
export const PROBE_EXTENDED_RESOURCE = "dpo.dev/extended-resource-probe";

/** The DeviceClass the probe sends: selects nothing, maps PROBE_EXTENDED_RESOURCE. */
export function probeDeviceClass(): DeviceClass & { metadata: { name: string } } {
  return {
    apiVersion: "resource.k8s.io/v1",
    kind: "DeviceClass",
    metadata: { name: PROBE_DEVICE_CLASS, labels: { [LABEL_MANAGED_BY]: MANAGED_BY } },
    spec: {
      selectors: [{ cel: { expression: "false" } }],
      extendedResourceName: PROBE_EXTENDED_RESOURCE,
    },
  };
}

/**
 * One probe: true when the API server kept spec.extendedResourceName in its dry-run answer, false when it
 * dropped it. Errors (unreachable, forbidden, a class of the probe's name existing) are thrown: the
 * answer is then not known.
 */
export async function probeExtendedResourceName(objects: ObjectClient): Promise<boolean> {
  const sent = probeDeviceClass();
  const stored = await objects.create<DeviceClass & { metadata: { name: string } }>(DEVICE_CLASSES, sent, {
    dryRun: true,
  });
  const kept = extendedResourceNameKept(sent, stored);
  if (kept === undefined) throw new Error("the probe class carried no spec.extendedResourceName");
  return kept;
}

export interface ProbeOptions {
  objects: ObjectClient;
  logger: Logger;
}

/** One probe, its answer logged: true or false, or undefined (and a warning with the error) when it failed. */
export async function probeOnce(opts: ProbeOptions): Promise<boolean | undefined> {
  try {
    const kept = await probeExtendedResourceName(opts.objects);
    opts.logger.info(
      { extendedResourceNameKept: kept },
      kept
        ? "the API server keeps DeviceClass spec.extendedResourceName: DRA configs map their resource name"
        : "the API server drops DeviceClass spec.extendedResourceName (DRAExtendedResource off): no config maps its resource name through DRA",
    );
    return kept;
  } catch (err) {
    opts.logger.warn(
      { err: String(err) },
      "could not find out whether the API server keeps DeviceClass spec.extendedResourceName",
    );
    return undefined;
  }
}

export interface ProbeLoopOptions extends ProbeOptions {
  /** How long to wait before asking again after a failed probe. */
  retryMs: number;
  signal: AbortSignal;
  clock?: Clock;
}

/**
 * Probes every `retryMs` until one answers; undefined once `signal` aborts. Meanwhile the configs say
 * ExtendedResourceSupportUnknown.
 */
export async function probeUntilAnswered(opts: ProbeLoopOptions): Promise<boolean | undefined> {
  while (!opts.signal.aborted) {
    await sleep(opts.clock ?? systemClock, opts.retryMs, opts.signal);
    if (opts.signal.aborted) break;
    const kept = await probeOnce(opts);
    if (kept !== undefined) return kept;
  }
  return undefined;
}
