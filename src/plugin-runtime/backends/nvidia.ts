// NVIDIA backend: GPUs discovered and polled through nvidia-smi, XID events read from the kernel log
// (/dev/kmsg, or the deprecated dmesg binary), /dev/nvidia* device nodes, NUMA nodes from sysfs. A GPU
// that recovers is healthy again; one whose XID needs a reset only once the reset is seen (nvidia-health.ts).
//
// Health sources, both documented by NVIDIA:
// - Polling `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` every `pollIntervalSeconds`: a GPU
//   that is no longer listed (or listed as "Unable to determine the device handle") is lost; a field
//   printed as `[GPU requires reset]` or `[Unknown Error]` means the driver cannot talk to it; the driver
//   missing, nvidia-smi missing, hanging or printing garbage makes every GPU unhealthy with that reason.
// - XID events: the kernel driver logs every XID as `NVRM: Xid (PCI:0000:3b:00): 79, ...`; with
//   `kmsgPath` (or `dmesgPath`) set, new such lines mark the GPU unhealthy (`XID79-ResetRequired`)
//   unless the XID is one of `ignoredXids` (application errors).
// - Memory-error counters from a second `--query-gpu`: rows pending remapping or a failed remapping make
//   the GPU unhealthy until a reset.
// Recovery: a Transient XID holds until a later poll (never the one that saw the XID) finds the GPU
// listed, every field readable and nothing waiting for a reset; a ResetRequired one also waits for the
// reset (nvidia-health.ts). NVIDIA's plugin never marks a GPU healthy again (NVIDIA/k8s-device-plugin#1014).
//
// MIG: with `mig.strategy` Single or Mixed the devices offered are MIG devices (nvidia-mig.ts, ADR 0007),
// each unhealthy whenever its GPU is; with None a GPU in MIG mode is unhealthy (MIGEnabled).
import { stat } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../../observability/json-log.js";
import type { CdiContainerEdits } from "../../cdi/spec.js";
import type { NVIDIABackend } from "../../api/v1beta1/spec.js";
import type { ContainerAllocation, ContainerDeviceSpec, PhysicalDevice } from "../devices/types.js";
import { RefreshingBackend } from "./refreshing-backend.js";
import { cdiDeviceNode, logDeviceChanges } from "./device-list.js";
import type { Interconnect } from "../devices/interconnect.js";
import {
  HEALTH_QUERY_ARGS,
  XidHolds,
  classifyXid,
  countersReason,
  parseDriverLoads,
  parseHealthQuery,
  xidReason,
  type HealthCounters,
  type XidHold,
} from "./nvidia-health.js";
import { KmsgReader } from "./nvidia-kmsg.js";
import { readInterconnect, topologyKey } from "./nvidia-topology.js";
import {
  migInventoryFor,
  migParent,
  migXidKey,
  offerMigDevices,
  xidGpu,
  type MigInventory,
} from "./nvidia-mig.js";
import { pcieRootAttribute, readPciLocality } from "./sysfs-pci.js";
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
/** MIG strategy None: a GPU in MIG mode cannot run CUDA work as a whole GPU, and its MIG devices are not offered. */
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
  /** Its PCIe root complex from sysfs (`pci0000:00`), published as resource.kubernetes.io/pcieRoot. */
  readonly pcieRoot?: string | undefined;
  /** Whether the last successful poll listed it. */
  readonly listed: boolean;
}

/** What one refresh found, as input to the pure health decision. */
export interface GpuObservation {
  readonly gpu: KnownGpu;
  readonly minor: number | undefined;
  readonly cudaVersion: string | undefined;
  readonly xid: XidHold | undefined;
  /** The memory-error counters of the last poll, when nvidia-smi gave them. */
  readonly counters?: HealthCounters | undefined;
  /** Reason of a failed poll (every GPU gets it), or undefined when the poll succeeded. */
  readonly pollFailure: string | undefined;
  /** Whether /dev/nvidia<minor> and /dev/nvidiactl exist. */
  readonly deviceNodesPresent: boolean;
  /** MIG strategy Single or Mixed: MIG mode is no reason to be unhealthy, the MIG devices are offered. */
  readonly migAdvertised?: boolean;
  /** CUDA compute capability (`9.0`), where nvidia-smi gives it (the operator's node labels read it). */
  readonly computeCapability?: string | undefined;
}

/** The reason a GPU is unhealthy, most fundamental first; "" when healthy. Pure. */
export function gpuUnhealthyReason(o: GpuObservation): string {
  if (o.pollFailure !== undefined) return o.pollFailure;
  if (o.xid !== undefined) return xidReason(o.xid.xid, o.xid.cls);
  if (!o.gpu.listed) return REASON_GPU_LOST;
  const errors = Object.values(o.gpu.row.fieldErrors);
  if (errors.includes(REQUIRES_RESET_VALUE)) return REASON_GPU_REQUIRES_RESET;
  if (errors.length > 0) return REASON_GPU_UNREADABLE;
  const counters = countersReason(o.counters);
  if (counters !== "") return counters;
  if (o.gpu.row.migMode === "Enabled" && o.migAdvertised !== true) return REASON_MIG_ENABLED;
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
  Object.assign(attributes, pcieRootAttribute(o.gpu.pcieRoot));
  const reason = gpuUnhealthyReason(o);
  return {
    id: row.uuid,
    numaNode: o.gpu.numaNode,
    health: reason === "" ? "Healthy" : "Unhealthy",
    reason,
    attributes,
  };
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
  /** Overrides /proc/driver/nvidia-caps/mig-minors (tests). */
  readonly migMinorsPath?: string;
}

export class NVIDIADeviceBackend extends RefreshingBackend {
  private known = new Map<string, KnownGpu>();
  private readonly xids = new XidHolds();
  private counters = new Map<string, HealthCounters>();
  private readonly kmsg: KmsgReader | undefined;
  private minors = new Map<string, number>();
  private cudaVersion: string | undefined;
  private computeCaps = new Map<string, string>();
  /** Which GPUs and driver the XML report was read for; it is read again when they change. */
  private xmlKey: string | undefined;
  private controlNodes: string[] = [];
  private presentGpuNodes = new Set<string>();
  private lastXidTimestamp: number | undefined;
  /** The GPU interconnect from `nvidia-smi topo -m`, read once per set of GPUs (`topologyKey`). */
  private links: Interconnect | undefined;
  private linksKey: string | undefined;
  private refreshes = 0;
  private readonly problems = new Map<string, string>();
  private readonly timeoutMs: number;
  /** The MIG layout; undefined with strategy None. */
  private readonly mig: MigInventory | undefined;
  /** Each offered MIG device's nodes under the dev root: its GPU's, then its two capability nodes. */
  private migNodes = new Map<string, readonly string[]>();
  /** With a MIG strategy, the ids offered now (a GPU whose MIG devices are offered is not one). */
  private offered = new Set<string>();

  constructor(
    private readonly config: NVIDIABackend,
    options: NVIDIABackendOptions,
  ) {
    super("NVIDIA", options.logger, options.pollIntervalMs ?? config.pollIntervalSeconds * 1000);
    this.timeoutMs = config.timeoutSeconds * 1000;
    this.kmsg = config.kmsgPath === undefined ? undefined : new KmsgReader(config.kmsgPath);
    if (config.dmesgPath !== undefined && config.kmsgPath === undefined) {
      this.logger.warn(
        { dmesgPath: config.dmesgPath },
        "nvidia.dmesgPath is deprecated (the release image has no dmesg): set nvidia.kmsgPath: /dev/kmsg",
      );
    }
    this.mig = migInventoryFor(config, options.migMinorsPath);
  }

  /** What keeps the backend from a full picture right now (failed runs of nvidia-smi, dmesg). */
  diagnostics(): readonly string[] {
    return [...this.problems.values()];
  }

  override async stop(): Promise<void> {
    await super.stop();
    await this.kmsg?.close();
  }

  interconnect(): Interconnect | undefined {
    return this.links;
  }

  allocate(physicalIds: readonly string[]): ContainerAllocation {
    this.assertKnown(physicalIds, { has: (id) => this.isOffered(id) });
    return {
      envs: { [NVIDIA_VISIBLE_DEVICES_ENV]: physicalIds.join(",") },
      mounts: [],
      devices: this.deviceSpecs(physicalIds),
      annotations: {},
    };
  }

  /** The GPU's own node and the control nodes: complete for the one device, as CDI wants. */
  cdiContainerEdits(physicalId: string): CdiContainerEdits | undefined {
    if (!this.isOffered(physicalId)) return undefined;
    const nodes = this.deviceSpecs([physicalId]);
    return nodes.length === 0 ? undefined : { deviceNodes: nodes.map(cdiDeviceNode) };
  }

  private isOffered(id: string): boolean {
    return this.mig === undefined ? this.known.has(id) : this.offered.has(id);
  }

  /**
   * /dev/nvidia<minor> of each GPU, then the control nodes, each once and only when it exists: a missing
   * host path would fail the container's creation instead of just leaving a node out.
   */
  private deviceSpecs(physicalIds: readonly string[]): ContainerDeviceSpec[] {
    const names: string[] = [];
    const present = (name: string) =>
      this.presentGpuNodes.has(name) || this.mig?.view().presentNodes.has(name) === true;
    for (const id of physicalIds) {
      const migNodes = this.migNodes.get(id);
      if (migNodes !== undefined) {
        for (const name of migNodes) if (present(name) && !names.includes(name)) names.push(name);
        continue;
      }
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
    const { events, driverLoads } = await this.readKernelLog();
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

    for (const load of driverLoads) this.xids.driverLoaded(load);
    if (rows !== undefined) await this.takePoll(rows, unreachable, refresh);
    this.applyXidEvents(events, refresh);
    // A reload logged after an XID of this same read counts too (the next poll may release it).
    for (const load of driverLoads) this.xids.driverLoaded(load);
    await this.checkDeviceNodes();
    if (this.stopped) return;

    const devices =
      this.mig === undefined
        ? this.wholeGpuDevices([...this.known.keys()], pollFailure, false)
        : await this.migStrategyDevices(this.mig, pollFailure);
    if (this.stopped) return;
    const before = this.publisher.current();
    if (this.publisher.publish(devices)) logDeviceChanges(this.logger, before, devices);
    this.logger.debug({ refresh }, "NVIDIA refresh done");
  }

  private observe(gpu: KnownGpu, pollFailure: string | undefined, migAdvertised: boolean): GpuObservation {
    return {
      gpu,
      minor: this.minors.get(gpu.row.uuid),
      cudaVersion: this.cudaVersion,
      xid: this.xids.get(gpu.row.uuid),
      counters: this.counters.get(gpu.row.uuid),
      pollFailure,
      deviceNodesPresent: this.gpuNodesPresent(gpu.row.uuid),
      computeCapability: this.computeCaps.get(gpu.row.uuid),
      migAdvertised,
    };
  }

  private wholeGpuDevices(ids: readonly string[], poll: string | undefined, mig: boolean): PhysicalDevice[] {
    return ids
      .flatMap((id) => this.known.get(id) ?? [])
      .map((gpu) => nvidiaPhysicalDevice(this.observe(gpu, poll, mig)))
      .sort((a, b) => Number(a.attributes.index) - Number(b.attributes.index) || (a.id < b.id ? -1 : 1));
  }

  /** Strategy Single or Mixed: what the MIG plan offers now (nvidia-mig.ts). */
  private async migStrategyDevices(mig: MigInventory, poll: string | undefined): Promise<PhysicalDevice[]> {
    const gpus = [...this.known.values()];
    const offer = await offerMigDevices({
      inventory: mig,
      mig: this.config.mig,
      readLayout: poll === undefined && gpus.some((g) => g.row.migMode === "Enabled"),
      parents: gpus.map((g) =>
        migParent(g, this.minors.get(g.row.uuid), gpuUnhealthyReason(this.observe(g, poll, true))),
      ),
      wholeDevices: (ids) => this.wholeGpuDevices(ids, poll, true),
      cudaVersion: this.cudaVersion,
      xidOf: (key) => this.xids.get(key),
    });
    for (const [source, problem] of Object.entries(offer.problems)) {
      if (problem === undefined) this.clearProblem(source);
      else this.noteProblem(source, problem);
    }
    this.migNodes = offer.migNodes;
    this.offered = new Set(offer.devices.map((d) => d.id));
    return offer.devices;
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
      const { numaNode, pcieRoot } =
        previous?.row.busId === row.busId
          ? previous
          : await readPciLocality(this.config.sysfsRoot, row.busId);
      next.set(row.uuid, { row, numaNode, pcieRoot, listed: true });
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

    await this.readCounters();
    // Keys are GPUs, or with a MIG strategy the instances an XID named (migXidKey).
    for (const key of this.xids.keys()) {
      const uuid = xidGpu(key);
      const released = this.xids.polled(key, listed.get(uuid), this.counters.get(uuid), refresh);
      if (released !== undefined) {
        this.logger.info(
          { device: key, xid: released.xid, class: released.cls, resetSeen: released.resetSeen },
          "GPU recovered after XID",
        );
      }
    }
    await this.readXmlInfo(rows);
    await this.readTopology(rows);
  }

  /** The interconnect, read again only when the GPUs change; without it the policy alone decides. */
  private async readTopology(rows: readonly GpuRow[]): Promise<void> {
    const key = topologyKey(rows);
    if (key === this.linksKey) return;
    this.linksKey = key;
    const links = await readInterconnect(this.config.nvidiaSmiPath, this.timeoutMs, rows);
    if (typeof links === "string") {
      this.links = undefined;
      this.noteProblem(
        "topology",
        `${links} (allocation ignores the GPU interconnect until the GPUs change)`,
      );
      return;
    }
    this.clearProblem("topology");
    this.links = links;
    if (links !== undefined)
      this.logger.info({ gpus: rows.length }, "GPU interconnect read (nvidia-smi topo -m)");
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

  /** The memory-error counters; none when this nvidia-smi cannot give them (a problem, not a health). */
  private async readCounters(): Promise<void> {
    const result = await runCommand(this.config.nvidiaSmiPath, HEALTH_QUERY_ARGS, this.timeoutMs);
    const parsed = result.ok ? parseHealthQuery(result.stdout) : undefined;
    if (parsed === undefined || parsed.problems.length > 0) {
      const why = result.ok ? (parsed?.problems.slice(0, 3).join("; ") ?? "") : result.failure.message;
      this.noteProblem(
        "counters",
        `memory-error counters not read: ${why} (rows pending remapping go unseen)`,
      );
      this.counters = new Map();
      return;
    }
    this.clearProblem("counters");
    this.counters = parsed.counters;
  }

  /**
   * New XID lines and the driver loads in the kernel log, from /dev/kmsg (or the deprecated dmesg); none
   * when neither is configured or reading fails (that is a problem, not a health).
   */
  private async readKernelLog(): Promise<{ events: XidEvent[]; driverLoads: number[] }> {
    let text: string;
    if (this.kmsg !== undefined) {
      const read = await this.kmsg.read();
      if (!read.ok) {
        this.noteProblem("kmsg", `${read.message} (XID events are not watched meanwhile)`);
        return { events: [], driverLoads: [] };
      }
      this.clearProblem("kmsg");
      if (read.lost > 0) {
        this.logger.warn({ lost: read.lost }, "kernel log records overwritten before they were read");
      }
      text = read.text;
    } else if (this.config.dmesgPath !== undefined) {
      const result = await runCommand(this.config.dmesgPath, [], this.timeoutMs);
      if (!result.ok) {
        this.noteProblem("dmesg", `${result.failure.message} (XID events are not watched meanwhile)`);
        return { events: [], driverLoads: [] };
      }
      this.clearProblem("dmesg");
      text = result.stdout;
    } else {
      return { events: [], driverLoads: [] };
    }
    const { fresh, newest } = newXidEvents(parseXidEvents(text), this.lastXidTimestamp);
    this.lastXidTimestamp = newest;
    return { events: fresh, driverLoads: parseDriverLoads(text) };
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
      const cls = classifyXid(event.xid, this.config.ignoredXids);
      if (cls === "Application") {
        this.logger.info(fields, "XID ignored (application error)");
      } else if (gpu === undefined) {
        this.logger.warn(fields, "XID for a device that is not a known GPU");
      } else {
        this.logger.warn(
          { ...fields, class: cls },
          cls === "ResetRequired"
            ? "XID makes the GPU unhealthy until a reset is seen and nvidia-smi shows it well"
            : "XID makes the GPU unhealthy until nvidia-smi shows it well again",
        );
        // The first XID names the fault; the ones that follow it (63 after 48, say) only extend the hold.
        // With a MIG strategy an XID the driver attributes to an instance holds only its MIG devices.
        const key = this.mig === undefined ? gpu.row.uuid : migXidKey(gpu.row.uuid, event);
        const counters = this.counters.get(gpu.row.uuid);
        this.xids.hold(key, event, cls, refresh, counters?.eccUncorrectedVolatile);
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
