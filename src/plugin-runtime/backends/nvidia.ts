// NVIDIA backend: GPUs discovered and polled through nvidia-smi, XID events read from the kernel log
// through dmesg, /dev/nvidia* device nodes, NUMA nodes from sysfs. A GPU that recovers is healthy again.
//
// Health sources, both documented by NVIDIA:
// - Polling `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` every `pollIntervalSeconds`: a GPU
//   that is no longer listed (or listed as "Unable to determine the device handle") is lost; a field
//   printed as `[GPU requires reset]` or `[Unknown Error]` means the driver cannot talk to it; the driver
//   missing, nvidia-smi missing, hanging or printing garbage makes every GPU unhealthy with that reason.
// - XID events: the kernel driver logs every XID as `NVRM: Xid (PCI:0000:3b:00): 79, ...`; with
//   `dmesgPath` set, new such lines mark the GPU unhealthy (`XID79`) unless the XID is one of
//   `ignoredXids` (application errors).
// Recovery: an XID holds until a later poll (never the one that saw the XID) finds the GPU listed, every
// field readable and no memory pages pending retirement; then it is healthy again. NVIDIA's plugin never
// does this (NVIDIA/k8s-device-plugin#1014): a GPU reset there still needs a plugin restart.
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import type { CdiContainerEdits } from "../../cdi/spec.js";
import type { NVIDIABackend } from "../../api/v1beta1/spec.js";
import type { ContainerAllocation, ContainerDeviceSpec, PhysicalDevice } from "../devices/types.js";
import { RefreshingBackend } from "./refreshing-backend.js";
import { cdiDeviceNode, logDeviceChanges } from "./device-list.js";
import { parseNumaNode } from "./pci.js";
import {
  COMPUTE_CAP_QUERY_ARGS,
  GPU_QUERY_ARGS,
  REQUIRES_RESET_VALUE,
  XML_QUERY_ARGS,
  parseGpuQuery,
  parseComputeCaps,
  parseNvidiaSmiXml,
  parseXidEvents,
  runCommand,
  type CommandFailure,
  type GpuRow,
  type NvidiaSmiXmlInfo,
  type XidEvent,
} from "./nvidia-smi.js";

/** The variable the NVIDIA Container Toolkit reads to inject a container's GPUs (and driver libraries). */
export const NVIDIA_VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES";
/** Control nodes every CUDA container needs, given with the GPUs when they exist. */
export const NVIDIA_CONTROL_NODES = ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"] as const;

export const REASON_DRIVER_UNAVAILABLE = "DriverUnavailable";
export const REASON_NVIDIA_SMI_MISSING = "NvidiaSmiMissing";
export const REASON_NVIDIA_SMI_TIMEOUT = "NvidiaSmiTimeout";
export const REASON_NVIDIA_SMI_FAILED = "NvidiaSmiFailed";
export const REASON_NVIDIA_SMI_OUTPUT_INVALID = "NvidiaSmiOutputInvalid";
/** Known GPU that nvidia-smi no longer lists or cannot open (fallen off the bus, XID 79). */
export const REASON_GPU_LOST = "GPULost";
export const REASON_GPU_REQUIRES_RESET = "GPURequiresReset";
export const REASON_GPU_UNREADABLE = "GPUUnreadable";
/** MIG devices are not advertised; a GPU in MIG mode cannot run CUDA work as a whole GPU. */
export const REASON_MIG_ENABLED = "MIGEnabled";
export const REASON_DEVICE_NODE_MISSING = "DeviceNodeMissing";
/** The minor number (the N of /dev/nvidiaN) is not known yet: `nvidia-smi -q -x` did not say. */
export const REASON_DEVICE_NODE_UNKNOWN = "DeviceNodeUnknown";

const FAILURE_REASON: Record<CommandFailure["kind"], string> = {
  Missing: REASON_NVIDIA_SMI_MISSING,
  Timeout: REASON_NVIDIA_SMI_TIMEOUT,
  DriverUnavailable: REASON_DRIVER_UNAVAILABLE,
  Failed: REASON_NVIDIA_SMI_FAILED,
};

/** A GPU the backend has seen, with what the last poll said of it. */
export interface KnownGpu {
  readonly row: GpuRow;
  readonly numaNode: number | undefined;
  /** Whether the last successful poll listed it. */
  readonly listed: boolean;
}

/** An XID that currently holds a GPU unhealthy. */
export interface ActiveXid {
  readonly xid: number;
  readonly detail: string;
  /** The refresh that saw it; only a later refresh's poll can clear it. */
  readonly refresh: number;
}

/** What one refresh found, as input to the pure health decision. */
export interface GpuObservation {
  readonly gpu: KnownGpu;
  readonly minor: number | undefined;
  readonly cudaVersion: string | undefined;
  readonly xid: ActiveXid | undefined;
  /** Reason of a failed poll (every GPU gets it), or undefined when the poll succeeded. */
  readonly pollFailure: string | undefined;
  /** Whether /dev/nvidia<minor> and /dev/nvidiactl exist. */
  readonly deviceNodesPresent: boolean;
  /** CUDA compute capability (`9.0`), where nvidia-smi gives it (the operator's node labels read it). */
  readonly computeCapability?: string | undefined;
}

/** The reason a GPU is unhealthy, most fundamental first; "" when healthy. Pure. */
export function gpuUnhealthyReason(o: GpuObservation): string {
  if (o.pollFailure !== undefined) return o.pollFailure;
  if (o.xid !== undefined) return `XID${o.xid.xid}`;
  if (!o.gpu.listed) return REASON_GPU_LOST;
  const errors = Object.values(o.gpu.row.fieldErrors);
  if (errors.includes(REQUIRES_RESET_VALUE)) return REASON_GPU_REQUIRES_RESET;
  if (errors.length > 0) return REASON_GPU_UNREADABLE;
  if (o.gpu.row.migMode === "Enabled") return REASON_MIG_ENABLED;
  if (o.minor === undefined) return REASON_DEVICE_NODE_UNKNOWN;
  if (!o.deviceNodesPresent) return REASON_DEVICE_NODE_MISSING;
  return "";
}

/** The device as reported: id the GPU's UUID, attributes from nvidia-smi. Pure. */
export function nvidiaPhysicalDevice(o: GpuObservation): PhysicalDevice {
  const { row } = o.gpu;
  const attributes: Record<string, string> = {
    model: row.name,
    index: String(row.index),
    pciBusId: row.busId,
    driverVersion: row.driverVersion,
    migMode: row.migMode ?? "NotSupported",
  };
  if (row.memoryMiB !== undefined) attributes.memoryMiB = String(row.memoryMiB);
  if (o.cudaVersion !== undefined) attributes.cudaVersion = o.cudaVersion;
  if (o.computeCapability !== undefined) attributes.computeCapability = o.computeCapability;
  if (o.minor !== undefined) attributes.minor = String(o.minor);
  if (o.xid !== undefined && o.xid.detail !== "") attributes.lastXid = `${o.xid.xid}: ${o.xid.detail}`;
  const reason = gpuUnhealthyReason(o);
  return {
    id: row.uuid,
    numaNode: o.gpu.numaNode,
    health: reason === "" ? "Healthy" : "Unhealthy",
    reason,
    attributes,
  };
}

/**
 * Whether a poll shows a GPU with an XID well again: listed, every field readable, no memory pages
 * waiting to be retired (which needs a reset). Pure.
 */
export function recoveredFromXid(row: GpuRow | undefined): boolean {
  return (
    row !== undefined && Object.keys(row.fieldErrors).length === 0 && row.pagesPendingRetirement !== true
  );
}

/** The XID events newer than `after`, and the newest timestamp seen. Pure. */
export function newXidEvents(
  events: readonly XidEvent[],
  after: number | undefined,
): { fresh: XidEvent[]; newest: number | undefined } {
  let newest = after;
  const fresh: XidEvent[] = [];
  for (const event of events) {
    if (after !== undefined && event.timestamp > after) fresh.push(event);
    if (newest === undefined || event.timestamp > newest) newest = event.timestamp;
  }
  // The first read only learns where "now" is: XIDs logged before the plugin started are history, and a
  // GPU they broke shows it in the poll anyway.
  return { fresh, newest: newest ?? 0 };
}

export interface NVIDIABackendOptions {
  readonly logger: Logger;
  /** Overrides `pollIntervalSeconds` (tests). */
  readonly pollIntervalMs?: number;
}

export class NVIDIADeviceBackend extends RefreshingBackend {
  private known = new Map<string, KnownGpu>();
  private readonly xids = new Map<string, ActiveXid>();
  private minors = new Map<string, number>();
  private cudaVersion: string | undefined;
  private computeCaps = new Map<string, string>();
  /** Which GPUs and driver the XML report was read for; it is read again when they change. */
  private xmlKey: string | undefined;
  private controlNodes: string[] = [];
  private presentGpuNodes = new Set<string>();
  private lastXidTimestamp: number | undefined;
  private refreshes = 0;
  private readonly problems = new Map<string, string>();
  private readonly timeoutMs: number;

  constructor(
    private readonly config: NVIDIABackend,
    options: NVIDIABackendOptions,
  ) {
    super("NVIDIA", options.logger, options.pollIntervalMs ?? config.pollIntervalSeconds * 1000);
    this.timeoutMs = config.timeoutSeconds * 1000;
  }

  /** What keeps the backend from a full picture right now (failed runs of nvidia-smi, dmesg). */
  diagnostics(): readonly string[] {
    return [...this.problems.values()];
  }

  allocate(physicalIds: readonly string[]): ContainerAllocation {
    this.assertKnown(physicalIds, this.known);
    return {
      envs: { [NVIDIA_VISIBLE_DEVICES_ENV]: physicalIds.join(",") },
      mounts: [],
      devices: this.deviceSpecs(physicalIds),
      annotations: {},
    };
  }

  /** The GPU's own node and the control nodes: complete for the one device, as CDI wants. */
  cdiContainerEdits(physicalId: string): CdiContainerEdits | undefined {
    if (!this.known.has(physicalId)) return undefined;
    const nodes = this.deviceSpecs([physicalId]);
    return nodes.length === 0 ? undefined : { deviceNodes: nodes.map(cdiDeviceNode) };
  }

  /**
   * /dev/nvidia<minor> of each GPU, then the control nodes, each once and only when it exists: a missing
   * host path would fail the container's creation instead of just leaving a node out.
   */
  private deviceSpecs(physicalIds: readonly string[]): ContainerDeviceSpec[] {
    const names: string[] = [];
    for (const id of physicalIds) {
      const minor = this.minors.get(id);
      const name = `nvidia${minor}`;
      if (minor !== undefined && this.presentGpuNodes.has(name) && !names.includes(name)) names.push(name);
    }
    names.push(...this.controlNodes);
    return names.map((name) => ({
      containerPath: `/dev/${name}`,
      hostPath: join(this.config.devRoot, name),
      permissions: "rw",
    }));
  }

  protected async refresh(): Promise<void> {
    if (this.stopped) return;
    this.refreshes += 1;
    const refresh = this.refreshes;
    const events = await this.readXidEvents();
    const query = await runCommand(this.config.nvidiaSmiPath, GPU_QUERY_ARGS, this.timeoutMs);
    if (this.stopped) return;

    let pollFailure: string | undefined;
    let rows: GpuRow[] | undefined;
    let unreachable: string[] = [];
    if (query.ok) {
      const parsed = parseGpuQuery(query.stdout);
      if (parsed.problems.length > 0) {
        pollFailure = REASON_NVIDIA_SMI_OUTPUT_INVALID;
        this.noteProblem(
          "query",
          `nvidia-smi output not understood: ${parsed.problems.slice(0, 3).join("; ")}`,
        );
      } else {
        rows = parsed.rows;
        unreachable = parsed.unreachable;
        this.clearProblem("query");
      }
    } else {
      // With one GPU lost nvidia-smi fails, but still lists the others: use them when they all parse.
      const partial = query.failure.kind === "Failed" ? parseGpuQuery(query.failure.stdout) : undefined;
      if (partial !== undefined && partial.problems.length === 0 && partial.rows.length > 0) {
        rows = partial.rows;
        unreachable = partial.unreachable;
        this.noteProblem("query", query.failure.message);
      } else {
        pollFailure = FAILURE_REASON[query.failure.kind];
        this.noteProblem("query", query.failure.message);
      }
    }

    if (rows !== undefined) await this.takePoll(rows, unreachable, refresh);
    this.applyXidEvents(events, refresh);
    await this.checkDeviceNodes();
    if (this.stopped) return;

    const devices = [...this.known.values()]
      .map((gpu) =>
        nvidiaPhysicalDevice({
          gpu,
          minor: this.minors.get(gpu.row.uuid),
          cudaVersion: this.cudaVersion,
          xid: this.xids.get(gpu.row.uuid),
          pollFailure,
          deviceNodesPresent: this.gpuNodesPresent(gpu.row.uuid),
          computeCapability: this.computeCaps.get(gpu.row.uuid),
        }),
      )
      .sort((a, b) => Number(a.attributes.index) - Number(b.attributes.index) || (a.id < b.id ? -1 : 1));
    const before = this.publisher.current();
    if (this.publisher.publish(devices)) logDeviceChanges(this.logger, before, devices);
  }

  /** Merges a successful poll: new GPUs are added, missing ones kept as not listed, XIDs maybe cleared. */
  private async takePoll(
    rows: readonly GpuRow[],
    unreachable: readonly string[],
    refresh: number,
  ): Promise<void> {
    const listed = new Map(rows.map((row) => [row.uuid, row]));
    const next = new Map<string, KnownGpu>();
    for (const row of rows) {
      const previous = this.known.get(row.uuid);
      const numaNode =
        previous?.row.busId === row.busId ? previous.numaNode : await this.readNumaNode(row.busId);
      next.set(row.uuid, { row, numaNode, listed: true });
    }
    // A GPU once seen stays listed (unhealthy) until the plugin restarts: a GPU that fell off the bus is
    // a loss the kubelet and the operator should see, not a silently smaller node.
    for (const [uuid, gpu] of this.known) {
      if (next.has(uuid)) continue;
      if (gpu.listed) {
        const how = unreachable.includes(gpu.row.busId) ? "cannot be opened" : "is no longer listed";
        this.logger.warn({ device: uuid, pciBusId: gpu.row.busId }, `GPU ${how} by nvidia-smi`);
      }
      next.set(uuid, { ...gpu, listed: false });
    }
    this.known = next;

    for (const [uuid, active] of this.xids) {
      if (active.refresh < refresh && recoveredFromXid(listed.get(uuid))) {
        this.xids.delete(uuid);
        this.logger.info({ device: uuid, xid: active.xid }, "GPU recovered after XID");
      }
    }
    await this.readXmlInfo(rows);
  }

  private async readNumaNode(busId: string): Promise<number | undefined> {
    try {
      return parseNumaNode(
        await readFile(join(this.config.sysfsRoot, "bus", "pci", "devices", busId, "numa_node"), "utf8"),
      );
    } catch {
      return undefined;
    }
  }

  /** Minor numbers and the CUDA version, read again only when the GPUs or the driver change. */
  private async readXmlInfo(rows: readonly GpuRow[]): Promise<void> {
    const key = rows
      .map((row) => `${row.uuid}@${row.driverVersion}`)
      .sort()
      .join(",");
    if (key === this.xmlKey) return;
    const result = await runCommand(this.config.nvidiaSmiPath, XML_QUERY_ARGS, this.timeoutMs);
    const info: NvidiaSmiXmlInfo | string = result.ok
      ? parseNvidiaSmiXml(result.stdout)
      : result.failure.message;
    if (typeof info === "string") {
      // Not cached: the next refresh tries again. Until then the GPUs have no known device node.
      this.noteProblem("xml", `nvidia-smi -q -x: ${info}`);
      return;
    }
    this.clearProblem("xml");
    this.xmlKey = key;
    this.cudaVersion = info.cudaVersion;
    this.minors = new Map(info.minorNumbers);
    // Not a health source: a driver before R510, which lacks the field, just leaves it unknown.
    const caps = await runCommand(this.config.nvidiaSmiPath, COMPUTE_CAP_QUERY_ARGS, this.timeoutMs);
    this.computeCaps = caps.ok ? parseComputeCaps(caps.stdout) : new Map<string, string>();
  }

  /** New XID lines from dmesg; none when dmesg is not configured or fails (that is a problem, not a health). */
  private async readXidEvents(): Promise<XidEvent[]> {
    const dmesg = this.config.dmesgPath;
    if (dmesg === undefined) return [];
    const result = await runCommand(dmesg, [], this.timeoutMs);
    if (!result.ok) {
      this.noteProblem("dmesg", `${result.failure.message} (XID events are not watched meanwhile)`);
      return [];
    }
    this.clearProblem("dmesg");
    const { fresh, newest } = newXidEvents(parseXidEvents(result.stdout), this.lastXidTimestamp);
    this.lastXidTimestamp = newest;
    return fresh;
  }

  private applyXidEvents(events: readonly XidEvent[], refresh: number): void {
    for (const event of events) {
      const gpu = [...this.known.values()].find((g) => g.row.busId.startsWith(`${event.pciDevice}.`));
      const fields = {
        xid: event.xid,
        pciDevice: event.pciDevice,
        detail: event.detail,
        device: gpu?.row.uuid,
      };
      if (this.config.ignoredXids.includes(event.xid)) {
        this.logger.info(fields, "XID ignored (application error)");
      } else if (gpu === undefined) {
        this.logger.warn(fields, "XID for a device that is not a known GPU");
      } else {
        this.logger.warn(fields, "XID makes the GPU unhealthy until nvidia-smi shows it well again");
        // The first XID names the fault; the ones that follow it (63 after 48, say) only extend the hold.
        const active = this.xids.get(gpu.row.uuid);
        this.xids.set(gpu.row.uuid, {
          xid: active?.xid ?? event.xid,
          detail: active?.detail ?? event.detail,
          refresh,
        });
      }
    }
  }

  private async checkDeviceNodes(): Promise<void> {
    const exists = async (name: string) => {
      try {
        await stat(join(this.config.devRoot, name));
        return true;
      } catch {
        return false;
      }
    };
    const control: string[] = [];
    for (const name of NVIDIA_CONTROL_NODES) if (await exists(name)) control.push(name);
    this.controlNodes = control;
    const present = new Set<string>();
    for (const minor of new Set(this.minors.values())) {
      if (await exists(`nvidia${minor}`)) present.add(`nvidia${minor}`);
    }
    this.presentGpuNodes = present;
  }

  private gpuNodesPresent(uuid: string): boolean {
    const minor = this.minors.get(uuid);
    return (
      minor !== undefined &&
      this.presentGpuNodes.has(`nvidia${minor}`) &&
      this.controlNodes.includes("nvidiactl")
    );
  }

  /** Logs a problem when it first appears or changes, and keeps it for `diagnostics`. */
  private noteProblem(source: string, message: string): void {
    if (this.problems.get(source) !== message)
      this.logger.warn({ source, problem: message }, "NVIDIA discovery problem");
    this.problems.set(source, message);
  }

  private clearProblem(source: string): void {
    if (this.problems.delete(source)) this.logger.info({ source }, "NVIDIA discovery problem resolved");
  }
}
