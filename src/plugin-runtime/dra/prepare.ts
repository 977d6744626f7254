// Pure: what preparing a ResourceClaim on this node means for this driver — which allocation results
// are ours, whether each is a healthy device of this node, the claim's CDI spec and the answer's devices.
import {
  buildCdiSpec,
  cdiTransientSpecFileName,
  parseCdiKind,
  qualifiedCdiName,
  type CdiContainerEdits,
  type CdiDevice,
  type CdiSpec,
} from "../../cdi/spec.js";
import type { ClaimReference, DeviceRequestAllocationResult, DraResourceClaim } from "./claim.js";
import type { DraNodeDevice } from "./devices.js";

/**
 * The CDI class of every device this plugin prepares. The kind is `<driver>/device`: a DRA driver name
 * is a DNS subdomain, which is what CDI wants for the vendor part; a class without a dot needs no
 * CDI 0.6.0 reader.
 */
export const DRA_CDI_CLASS = "device";

/** `<driver>/device`, or a problem when the driver name cannot be a CDI vendor (e.g. a leading digit). */
export function draCdiKind(driver: string): { ok: true; kind: string } | { ok: false; problem: string } {
  const kind = `${driver}/${DRA_CDI_CLASS}`;
  const parsed = parseCdiKind(kind);
  return parsed.ok ? { ok: true, kind } : { ok: false, problem: `driver '${driver}': CDI ${parsed.problem}` };
}

/** Longest claim uid accepted; Kubernetes uids are 36-character UUIDs. */
export const MAX_CLAIM_UID_LENGTH = 128;
/**
 * A uid goes into a file name and a CDI device name, so only characters both allow (and no `.` or `..`
 * tricks): alphanumeric first and last, `-`, `_`, `.` between.
 */
const SAFE_UID = /^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$/;

/** Why a claim uid cannot name this driver's files, or undefined. Pure. */
export function claimUidProblem(uid: string): string | undefined {
  if (uid === "") return "claim reference has no uid";
  if (uid.length > MAX_CLAIM_UID_LENGTH || !SAFE_UID.test(uid)) {
    return `claim uid ${JSON.stringify(uid.slice(0, MAX_CLAIM_UID_LENGTH))} is not a uid`;
  }
  return undefined;
}

/** Why the kubelet's claim reference cannot be acted on, or undefined. Pure. */
export function claimReferenceProblem(ref: ClaimReference): string | undefined {
  const missing = (["namespace", "name", "uid"] as const).filter((field) => ref[field] === "");
  if (missing.length > 0) return `claim reference has no ${missing.join(", ")}`;
  return claimUidProblem(ref.uid);
}

/**
 * The claim's spec file in the CDI directory: the CDI convention for transient specs,
 * `<driver>-device_<claim uid>.json`, so the name alone tells which driver and claim it belongs to, a
 * retry rewrites the same file and unprepare finds it without remembering anything. Pure.
 */
export function claimSpecFileName(kind: string, claimUid: string): string {
  return cdiTransientSpecFileName(kind, claimUid);
}

/**
 * The CDI device name of one device for one claim: `<claim uid>-<device>`. Runtimes drop a qualified
 * name that two spec files of a directory define (a conflict), so the name must not be the device's
 * alone: a device can be in two claims' files for a moment (one claim unprepared, the next prepared).
 * Pure.
 */
export function claimCdiDeviceName(claimUid: string, device: string): string {
  return `${claimUid}-${device}`;
}

/**
 * The CDI device name of what one request of a claim needs as a whole (requestEdits):
 * `<claim uid>_<request>`. Device names are DNS labels (no `_`), so it never names a device's entry. Pure.
 */
export function requestCdiDeviceName(claimUid: string, request: string): string {
  return `${claimUid}_${request}`;
}

/** `request/subrequest` → `request`: the kubelet's answer names the claim's own requests. Pure. */
export function baseRequestName(request: string): string {
  const slash = request.indexOf("/");
  return slash < 0 ? request : request.slice(0, slash);
}

/** One device in the kubelet's answer (the fields of the DRA API's Device message). */
export interface PreparedDevice {
  readonly requestNames: readonly string[];
  readonly poolName: string;
  readonly deviceName: string;
  readonly cdiDeviceIds: readonly string[];
}

export interface DriverOnNode {
  /** This driver's name, as allocation results carry it. */
  readonly driver: string;
  /** This node's pool (the node name). */
  readonly pool: string;
  /** `<driver>/device` (see draCdiKind). */
  readonly cdiKind: string;
  /**
   * What a container needs for one request's devices together, beyond each device's own edits: what the
   * device plugin's Allocate gives for the same devices (see allocationEdits), so a pod sees the same env
   * on both paths. Given the request's physical ids.
   */
  readonly requestEdits?: (physicalIds: readonly string[]) => CdiContainerEdits;
}

export type ClaimPlan =
  | {
      readonly ok: true;
      readonly devices: readonly PreparedDevice[];
      /** Undefined when the claim has none of our devices: nothing to write. */
      readonly spec: CdiSpec | undefined;
      readonly fileName: string;
    }
  | { readonly ok: false; readonly error: string };

/**
 * Decides how to prepare `claim` (fetched for `ref`) on this node. Results of other drivers are skipped,
 * as upstream drivers do: a claim may hold devices of several drivers and the kubelet asks each driver
 * for its own; a claim with none of ours is prepared with no devices and no spec file. Every result of
 * ours must name a healthy device of this node's pool, or the claim is refused with an error naming
 * each offending device. Pure.
 */
export function planClaimPreparation(
  ref: ClaimReference,
  claim: DraResourceClaim,
  node: DriverOnNode,
  devices: ReadonlyMap<string, DraNodeDevice>,
): ClaimPlan {
  const claimName = `${ref.namespace}/${ref.name}`;
  const refProblem = claimReferenceProblem(ref);
  if (refProblem !== undefined) return { ok: false, error: refProblem };
  const uid = claim.metadata?.uid ?? "";
  if (uid !== ref.uid) {
    // The claim was deleted and created again under the same name: the kubelet asks for the old one.
    return {
      ok: false,
      error: `ResourceClaim ${claimName} has uid ${JSON.stringify(uid)}, not ${ref.uid}: it was replaced`,
    };
  }
  const allocation = claim.status?.allocation;
  if (allocation === undefined) return { ok: false, error: `ResourceClaim ${claimName} is not allocated` };

  const ours = (allocation.devices?.results ?? []).filter((result) => result.driver === node.driver);
  const problems = ours.flatMap((result) => resultProblem(result, node, devices));
  if (problems.length > 0) {
    return { ok: false, error: `ResourceClaim ${claimName}: ${problems.join("; ")}` };
  }

  const cdiDevices = new Map<string, CdiDevice>();
  const prepared: PreparedDevice[] = [];
  for (const result of ours) {
    const device = devices.get(result.device)!;
    const cdiName = claimCdiDeviceName(ref.uid, device.name);
    // Two results may share a device (two requests, shared capacity): one CDI entry serves both.
    cdiDevices.set(cdiName, { name: cdiName, containerEdits: device.containerEdits });
    prepared.push({
      requestNames: [baseRequestName(result.request)],
      poolName: result.pool,
      deviceName: result.device,
      cdiDeviceIds: [qualifiedCdiName(node.cdiKind, cdiName)],
    });
  }
  addRequestEdits(ref.uid, node, prepared, devices, cdiDevices);
  const fileName = claimSpecFileName(node.cdiKind, ref.uid);
  if (cdiDevices.size === 0) return { ok: true, devices: prepared, spec: undefined, fileName };

  const { spec, skipped } = buildCdiSpec(node.cdiKind, [...cdiDevices.values()]);
  if (skipped.length > 0 || spec === undefined) {
    // A runtime would refuse the file (or the device): fail now, naming the device, not at container start.
    const described = skipped.map((s) => `device ${deviceOfCdiName(s.name, ref.uid)}: ${s.problem}`);
    return { ok: false, error: `ResourceClaim ${claimName}: ${described.join("; ")}` };
  }
  return { ok: true, devices: prepared, spec, fileName };
}

/**
 * One CDI entry per request with the request's edits as a whole (node.requestEdits), named by the first
 * answer entry of the request, so a container that uses the request gets it once. Empty edits add none.
 */
function addRequestEdits(
  uid: string,
  node: DriverOnNode,
  prepared: PreparedDevice[],
  devices: ReadonlyMap<string, DraNodeDevice>,
  cdiDevices: Map<string, CdiDevice>,
): void {
  if (node.requestEdits === undefined) return;
  const byRequest = new Map<string, number[]>();
  prepared.forEach((p, i) =>
    byRequest.set(p.requestNames[0]!, [...(byRequest.get(p.requestNames[0]!) ?? []), i]),
  );
  for (const [request, indexes] of byRequest) {
    const ids = [...new Set(indexes.map((i) => devices.get(prepared[i]!.deviceName)!.physicalId))];
    const edits = node.requestEdits(ids);
    if ((edits.env ?? []).length + (edits.mounts ?? []).length + (edits.deviceNodes ?? []).length === 0)
      continue;
    const name = requestCdiDeviceName(uid, request);
    cdiDevices.set(name, { name, containerEdits: edits });
    const first = indexes[0]!;
    prepared[first] = {
      ...prepared[first]!,
      cdiDeviceIds: [...prepared[first]!.cdiDeviceIds, qualifiedCdiName(node.cdiKind, name)],
    };
  }
}

function resultProblem(
  result: DeviceRequestAllocationResult,
  node: DriverOnNode,
  devices: ReadonlyMap<string, DraNodeDevice>,
): string[] {
  const name = JSON.stringify(result.device);
  if (result.pool !== node.pool) {
    return [`device ${name} is in pool ${JSON.stringify(result.pool)}, not this node's pool ${node.pool}`];
  }
  const device = devices.get(result.device);
  if (device === undefined) return [`device ${name} is not a device of ${node.driver} on ${node.pool}`];
  if (device.health !== "Healthy") {
    return [`device ${name} is unhealthy${device.reason === "" ? "" : `: ${device.reason}`}`];
  }
  return [];
}

function deviceOfCdiName(cdiName: string, uid: string): string {
  return JSON.stringify(cdiName.slice(uid.length + 1));
}
