// MIG devices of the NVIDIA backend: which devices a config offers under strategy Single or Mixed (the
// pure plan, with the reasons NVIDIA's plugin gives for a layout Single cannot serve), each MIG device as
// a reported device with its parent's health, the device nodes a container gets for it, and the inventory
// that re-reads the layout from nvidia-smi and the driver. Decided in docs/adr/0007-mig-one-config-per-resource.md.
import { xidReason, type XidClass } from "./nvidia-health.js";
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import type { MIG, NVIDIABackend } from "../../api/v1beta1/spec.js";
import type { PhysicalDevice } from "../devices/types.js";
import { runCommand } from "./nvidia-smi.js";
import {
  LIST_ARGS,
  MIG_MINORS_PATH,
  computeInstanceCap,
  gpuInstanceCap,
  parseGpuList,
  parseMigMinors,
  parseMigXml,
  type ListedGpu,
  type XmlMigDevice,
} from "./nvidia-mig-smi.js";

/** Strategy Single: some GPUs of the node have MIG on and others off. */
export const REASON_MIG_MODE_MIXED = "MIGModeMixed";
/** Strategy Single: a GPU has MIG on but no MIG device. */
export const REASON_MIG_NO_DEVICES = "MIGNoDevices";
/** Strategy Single: the node's MIG devices are of more than one profile. */
export const REASON_MIG_PROFILES_MIXED = "MIGProfilesMixed";
/** The MIG device's GPU and compute instance are not known (the `-q -x` report did not say). */
export const REASON_MIG_PLACEMENT_UNKNOWN = "MIGPlacementUnknown";
/** mig-minors names no capability device for the MIG device's GPU or compute instance. */
export const REASON_MIG_CAPABILITY_UNKNOWN = "MIGCapabilityUnknown";
/** A /dev/nvidia-caps/nvidia-capN the MIG device needs does not exist. */
export const REASON_MIG_CAPABILITY_NODE_MISSING = "MIGCapabilityNodeMissing";

/** A MIG device as the inventory knows it. */
export interface MigDeviceInfo {
  /** `MIG-<uuid>`: the id it is advertised under, and what NVIDIA_VISIBLE_DEVICES names. */
  readonly uuid: string;
  readonly profile: string;
  /** Index on its GPU (`nvidia-smi -L`'s `Device N`). */
  readonly index: number;
  readonly gpuInstance: number | undefined;
  readonly computeInstance: number | undefined;
  readonly memoryMiB: number | undefined;
}

/** A GPU as the MIG plan sees it. */
export interface MigParent {
  readonly uuid: string;
  readonly index: number;
  readonly name: string;
  readonly busId: string;
  readonly driverVersion: string;
  readonly migEnabled: boolean;
  readonly numaNode: number | undefined;
  /** The N of /dev/nvidiaN; undefined while not known. */
  readonly minor: number | undefined;
  /** Why the GPU itself is unhealthy (MIG mode aside), "" when it is not: its MIG devices share it. */
  readonly reason: string;
  readonly migDevices: readonly MigDeviceInfo[];
}

/**
 * The key an XID the driver attributes to a GPU instance (and maybe a compute instance) is held under:
 * `<gpu uuid>/gi<n>[/ci<m>]`; the GPU's own UUID when it names none. Pure.
 */
export function migXidKey(
  gpuUuid: string,
  at: { readonly gpuInstance?: number | undefined; readonly computeInstance?: number | undefined },
): string {
  if (at.gpuInstance === undefined) return gpuUuid;
  const gi = `${gpuUuid}/gi${at.gpuInstance}`;
  return at.computeInstance === undefined ? gi : `${gi}/ci${at.computeInstance}`;
}

/** The GPU UUID an XID key belongs to. Pure. */
export function xidGpu(key: string): string {
  return key.split("/")[0] ?? key;
}

export interface MigLayoutProblem {
  readonly reason: string;
  /** One line for logs and diagnostics: what is wrong, on which GPUs. */
  readonly message: string;
}

export interface MigPlan {
  /** GPUs offered whole, as with MIG off. */
  readonly wholeGpus: readonly MigParent[];
  readonly migDevices: ReadonlyArray<{ readonly parent: MigParent; readonly device: MigDeviceInfo }>;
  /** Why strategy Single cannot serve this layout; every device offered is unhealthy with its reason. */
  readonly layoutProblem: MigLayoutProblem | undefined;
}

const indexes = (gpus: readonly MigParent[]) => gpus.map((g) => g.index).join(", ");

/**
 * What a config offers, as NVIDIA's plugin decides it (internal/rm/device_map.go): Single offers every
 * MIG device (or every GPU when none has MIG on) and needs MIG on every GPU, a device on each and one
 * profile; Mixed offers the MIG devices of `profile`, or without one the GPUs with MIG off. Pure.
 */
export function planMig(
  strategy: "Single" | "Mixed",
  profile: string | undefined,
  gpus: readonly MigParent[],
): MigPlan {
  const on = gpus.filter((g) => g.migEnabled);
  const off = gpus.filter((g) => !g.migEnabled);
  const devicesOf = (parents: readonly MigParent[], keep: (d: MigDeviceInfo) => boolean) =>
    parents.flatMap((parent) => parent.migDevices.filter(keep).map((device) => ({ parent, device })));
  if (strategy === "Mixed") {
    return profile === undefined
      ? { wholeGpus: off, migDevices: [], layoutProblem: undefined }
      : { wholeGpus: [], migDevices: devicesOf(on, (d) => d.profile === profile), layoutProblem: undefined };
  }
  if (on.length === 0) return { wholeGpus: gpus, migDevices: [], layoutProblem: undefined };
  const empty = on.filter((g) => g.migDevices.length === 0);
  const profiles = [...new Set(on.flatMap((g) => g.migDevices.map((d) => d.profile)))].sort();
  let layoutProblem: MigLayoutProblem | undefined;
  if (off.length > 0) {
    layoutProblem = {
      reason: REASON_MIG_MODE_MIXED,
      message: `MIG is on for GPU ${indexes(on)} and off for GPU ${indexes(off)}; strategy Single needs MIG on every GPU of the node`,
    };
  } else if (empty.length > 0) {
    layoutProblem = {
      reason: REASON_MIG_NO_DEVICES,
      message: `MIG is on but no MIG device is configured on GPU ${indexes(empty)}; strategy Single needs at least one on each`,
    };
  } else if (profiles.length > 1) {
    layoutProblem = {
      reason: REASON_MIG_PROFILES_MIXED,
      message: `more than one MIG profile on the node (${profiles.join(", ")}); strategy Single needs one`,
    };
  }
  // A layout Single cannot serve still shows every device, each unhealthy with the reason, so the node's
  // problem is visible in the status instead of a silently empty resource.
  return { wholeGpus: [...off, ...empty], migDevices: devicesOf(on, () => true), layoutProblem };
}

/** What one MIG device's caps and nodes look like now (from mig-minors and /dev). */
export interface MigNodeView {
  /** capability → minor, from mig-minors. */
  readonly caps: ReadonlyMap<string, number>;
  /** Names under the dev root that exist (`nvidia-caps/nvidia-cap12`). */
  readonly presentNodes: ReadonlySet<string>;
}

/** The capability device nodes (relative to the dev root) of a MIG device, or why there are none. Pure. */
export function migCapabilityNodes(
  parentMinor: number | undefined,
  device: MigDeviceInfo,
  caps: ReadonlyMap<string, number>,
): string[] | string {
  if (device.gpuInstance === undefined || device.computeInstance === undefined)
    return REASON_MIG_PLACEMENT_UNKNOWN;
  if (parentMinor === undefined) return REASON_MIG_CAPABILITY_UNKNOWN;
  const gi = caps.get(gpuInstanceCap(parentMinor, device.gpuInstance));
  const ci = caps.get(computeInstanceCap(parentMinor, device.gpuInstance, device.computeInstance));
  if (gi === undefined || ci === undefined) return REASON_MIG_CAPABILITY_UNKNOWN;
  return [`nvidia-caps/nvidia-cap${gi}`, `nvidia-caps/nvidia-cap${ci}`];
}

/** The MIG device as reported: its parent's health first, then the layout's, then its own. Pure. */
export function migPhysicalDevice(
  parent: MigParent,
  device: MigDeviceInfo,
  layoutProblem: MigLayoutProblem | undefined,
  view: MigNodeView,
  cudaVersion: string | undefined,
  xid?: { readonly xid: number; readonly cls: XidClass },
): PhysicalDevice {
  const nodes = migCapabilityNodes(parent.minor, device, view.caps);
  let reason =
    parent.reason || (xid === undefined ? "" : xidReason(xid.xid, xid.cls)) || (layoutProblem?.reason ?? "");
  if (reason === "" && typeof nodes === "string") reason = nodes;
  if (reason === "" && typeof nodes !== "string" && !nodes.every((n) => view.presentNodes.has(n)))
    reason = REASON_MIG_CAPABILITY_NODE_MISSING;
  const attributes: Record<string, string> = {
    model: parent.name,
    profile: device.profile,
    index: `${parent.index}:${device.index}`,
    parentUUID: parent.uuid,
    parentIndex: String(parent.index),
    pciBusId: parent.busId,
    driverVersion: parent.driverVersion,
  };
  if (device.gpuInstance !== undefined) attributes.gpuInstanceId = String(device.gpuInstance);
  if (device.computeInstance !== undefined) attributes.computeInstanceId = String(device.computeInstance);
  if (device.memoryMiB !== undefined) attributes.memoryMiB = String(device.memoryMiB);
  if (parent.minor !== undefined) attributes.minor = String(parent.minor);
  if (cudaVersion !== undefined) attributes.cudaVersion = cudaVersion;
  return {
    id: device.uuid,
    numaNode: parent.numaNode,
    health: reason === "" ? "Healthy" : "Unhealthy",
    reason,
    attributes,
  };
}

/**
 * Each GPU's MIG devices from `-L` joined with the report's instances by index: the old UUID form
 * carries the instances itself; a device the report does not cover has them unknown. Pure.
 */
export function joinMigDevices(
  listed: readonly ListedGpu[],
  report: ReadonlyMap<string, readonly XmlMigDevice[]> | undefined,
): Map<string, MigDeviceInfo[]> {
  const out = new Map<string, MigDeviceInfo[]>();
  for (const gpu of listed) {
    const fromReport = new Map((report?.get(gpu.uuid) ?? []).map((d) => [d.index, d]));
    out.set(
      gpu.uuid,
      gpu.migDevices.map((d) => {
        const x = fromReport.get(d.index);
        return {
          ...d,
          gpuInstance: d.gpuInstance ?? x?.gpuInstance,
          computeInstance: d.computeInstance ?? x?.computeInstance,
          memoryMiB: x?.memoryMiB,
        };
      }),
    );
  }
  return out;
}

/** A GPU as the NVIDIA backend knows it, as far as the MIG plan needs (structurally its KnownGpu). */
export interface MigGpuSource {
  readonly row: {
    readonly uuid: string;
    readonly index: number;
    readonly name: string;
    readonly busId: string;
    readonly driverVersion: string;
    readonly migMode: "Enabled" | "Disabled" | undefined;
  };
  readonly numaNode: number | undefined;
}

/** What the MIG plan needs of a GPU, its MIG devices taken later. Pure. */
export function migParent(
  gpu: MigGpuSource,
  minor: number | undefined,
  reason: string,
): Omit<MigParent, "migDevices"> {
  const { uuid, index, name, busId, driverVersion, migMode } = gpu.row;
  return {
    uuid,
    index,
    name,
    busId,
    driverVersion,
    migEnabled: migMode === "Enabled",
    numaNode: gpu.numaNode,
    minor,
    reason,
  };
}

export interface MigOfferInput {
  readonly inventory: MigInventory;
  /** The config's `mig`; its strategy is Single or Mixed here. */
  readonly mig: MIG | undefined;
  /** Whether to read the layout again (a GPU has MIG on and nvidia-smi answers). */
  readonly readLayout: boolean;
  readonly parents: ReadonlyArray<Omit<MigParent, "migDevices">>;
  /** The whole-GPU devices of these GPUs, as the backend reports them with MIG off. */
  readonly wholeDevices: (uuids: readonly string[]) => PhysicalDevice[];
  readonly cudaVersion: string | undefined;
  /** The XID held under a key (`migXidKey`), if any. */
  readonly xidOf?: (key: string) => { readonly xid: number; readonly cls: XidClass } | undefined;
}

export interface MigOffer {
  /** Whole GPUs first (by index), then MIG devices by GPU and index. */
  readonly devices: PhysicalDevice[];
  /** Each offered MIG device's nodes under the dev root: its GPU's, then its two capability nodes. */
  readonly migNodes: Map<string, readonly string[]>;
  readonly layoutProblem: MigLayoutProblem | undefined;
  /** For `dpo probe`: what kept the layout read from a full picture (`mig`), what Single refuses (`migLayout`). */
  readonly problems: { readonly mig: string | undefined; readonly migLayout: string | undefined };
}

/** One refresh of a MIG strategy: the layout maybe read again, the plan, the capability nodes looked at. */
export async function offerMigDevices(input: MigOfferInput): Promise<MigOffer> {
  const { inventory } = input;
  const readProblem = input.readLayout ? await inventory.refresh() : undefined;
  const parents = input.parents.map((p) => ({ ...p, migDevices: inventory.devicesOf(p.uuid) }));
  const plan = planMig(input.mig?.strategy === "Single" ? "Single" : "Mixed", input.mig?.profile, parents);
  const migNodes = new Map<string, readonly string[]>();
  for (const { parent, device } of plan.migDevices) {
    const caps = migCapabilityNodes(parent.minor, device, inventory.view().caps);
    if (typeof caps !== "string") migNodes.set(device.uuid, [`nvidia${parent.minor}`, ...caps]);
  }
  await inventory.checkNodes([...migNodes.values()].flatMap((names) => names.slice(1)));
  const layout = plan.layoutProblem;
  const whole = input
    .wholeDevices(plan.wholeGpus.map((g) => g.uuid))
    .map((d) =>
      layout === undefined || d.reason !== ""
        ? d
        : { ...d, health: "Unhealthy" as const, reason: layout.reason },
    );
  const mig = [...plan.migDevices]
    .sort((a, b) => a.parent.index - b.parent.index || a.device.index - b.device.index)
    .map(({ parent, device }) => {
      const { gpuInstance, computeInstance } = device;
      const xid =
        input.xidOf?.(migXidKey(parent.uuid, { gpuInstance, computeInstance })) ??
        input.xidOf?.(migXidKey(parent.uuid, { gpuInstance }));
      return migPhysicalDevice(parent, device, layout, inventory.view(), input.cudaVersion, xid);
    });
  return {
    devices: [...whole, ...mig],
    migNodes,
    layoutProblem: layout,
    problems: {
      mig: readProblem,
      migLayout: layout === undefined ? undefined : `mig.strategy Single: ${layout.message}`,
    },
  };
}

/** The inventory a config's MIG strategy needs; none with strategy None. */
export function migInventoryFor(
  config: Pick<NVIDIABackend, "mig" | "nvidiaSmiPath" | "devRoot" | "timeoutSeconds">,
  minorsPath: string | undefined,
): MigInventory | undefined {
  if ((config.mig?.strategy ?? "None") === "None") return undefined;
  return new MigInventory({
    nvidiaSmiPath: config.nvidiaSmiPath,
    devRoot: config.devRoot,
    timeoutMs: config.timeoutSeconds * 1000,
    minorsPath: minorsPath ?? MIG_MINORS_PATH,
  });
}

export interface MigInventoryOptions {
  readonly nvidiaSmiPath: string;
  readonly devRoot: string;
  readonly timeoutMs: number;
  /** /proc/driver/nvidia-caps/mig-minors, or a test's copy. */
  readonly minorsPath: string;
}

/**
 * The node's MIG layout, read again on every refresh that finds a GPU with MIG on: `nvidia-smi -L`
 * each time (a layout change shows there first), the `-q -x` report and mig-minors when the listing
 * changed. A GPU that `-L` no longer lists keeps its last devices, as the backend keeps a lost GPU.
 */
export class MigInventory {
  private byParent = new Map<string, MigDeviceInfo[]>();
  /** The `-L` output the devices were last built from; undefined forces a full read. */
  private listing: string | undefined;
  private caps = new Map<string, number>();
  private present = new Set<string>();

  constructor(private readonly options: MigInventoryOptions) {}

  devicesOf(parentUuid: string): readonly MigDeviceInfo[] {
    return this.byParent.get(parentUuid) ?? [];
  }

  view(): MigNodeView {
    return { caps: this.caps, presentNodes: this.present };
  }

  /** Reads the layout; resolves with what kept it from a full picture, undefined when nothing did. */
  async refresh(): Promise<string | undefined> {
    const { nvidiaSmiPath, timeoutMs } = this.options;
    const list = await runCommand(nvidiaSmiPath, LIST_ARGS, timeoutMs);
    if (!list.ok) return `${list.failure.message} (the MIG layout is the last one read)`;
    const parsed = parseGpuList(list.stdout);
    if (parsed.problems.length > 0)
      return `nvidia-smi -L output not understood: ${parsed.problems.slice(0, 3).join("; ")}`;
    let problem: string | undefined;
    if (list.stdout !== this.listing) {
      const xml = await runCommand(nvidiaSmiPath, ["-q", "-x"], timeoutMs);
      const report = xml.ok ? parseMigXml(xml.stdout) : xml.failure.message;
      const next = joinMigDevices(parsed.gpus, typeof report === "string" ? undefined : report);
      for (const [uuid, devices] of this.byParent) if (!next.has(uuid)) next.set(uuid, devices);
      this.byParent = next;
      if (typeof report === "string") problem = `nvidia-smi -q -x: ${report} (MIG instances unknown)`;
      else this.listing = list.stdout;
      problem ??= await this.readMinors();
      if (problem !== undefined) this.listing = undefined;
    }
    return problem;
  }

  private async readMinors(): Promise<string | undefined> {
    try {
      this.caps = parseMigMinors(await readFile(this.options.minorsPath, "utf8"));
      return undefined;
    } catch (err) {
      return `${this.options.minorsPath}: ${(err as Error).message} (MIG capability devices unknown)`;
    }
  }

  /** Looks which of these capability nodes (relative to the dev root) exist, for `view`. */
  async checkNodes(names: Iterable<string>): Promise<void> {
    const present = new Set<string>();
    for (const name of new Set(names)) {
      try {
        await stat(join(this.options.devRoot, name));
        present.add(name);
      } catch {
        // Missing: the MIG device that needs it is unhealthy.
      }
    }
    this.present = present;
  }
}
