// PCI backend: devices found in sysfs by vendor, device id, class, driver and SR-IOV physical function;
// NUMA node and PCIe root from sysfs; VFIO group device nodes for devices bound to vfio-pci; hot-plug and
// removal picked up by rescans.
import { readFile, readdir, readlink, stat } from "node:fs/promises";
import { basename, join } from "node:path";
import type { Logger } from "../../observability/json-log.js";
import { cdiEnvName, type CdiContainerEdits } from "../../cdi/spec.js";
import type { PCIBackend } from "../../api/v1beta1/spec.js";
import type { ContainerAllocation, ContainerDeviceSpec, PhysicalDevice } from "../devices/types.js";
import { RefreshingBackend } from "./refreshing-backend.js";
import { pcieRootAttribute, readPciLocality } from "./sysfs-pci.js";
import { type TrackedDevice, cdiDeviceNode, logDeviceChanges, trackRemovals } from "./device-list.js";

export const DEFAULT_PCI_RESCAN_INTERVAL_MS = 5000;
export const DEFAULT_PCI_REMOVED_GRACE_PERIOD_MS = 60_000;
export const VFIO_DRIVER = "vfio-pci";
/** Prefix of the per-function env var a CDI device sets (`PCI_DEVICE_0000_3B_00_0=0000:3b:00.0`). */
export const PCI_CDI_ENV_PREFIX = "PCI_DEVICE_";
/** Bound to vfio-pci but sysfs shows no IOMMU group: the device cannot be passed through. */
export const REASON_NO_IOMMU_GROUP = "NoIOMMUGroup";
/** Bound to vfio-pci but `/dev/vfio/<group>` is missing. */
export const REASON_VFIO_DEVICE_MISSING = "VFIODeviceMissing";

/** A PCI function as sysfs describes it; hex values lowercase without `0x`. */
export interface PciDeviceInfo {
  readonly address: string;
  readonly vendor: string;
  readonly device: string;
  /** The 6-digit class code (class, subclass, programming interface), e.g. `030200`. */
  readonly classCode: string;
  readonly numaNode: number | undefined;
  /** Bound driver's name; undefined when unbound. */
  readonly driver: string | undefined;
  readonly iommuGroup: string | undefined;
  /** The PCIe root complex (`pci0000:00`); undefined when sysfs does not say. */
  readonly pcieRoot?: string | undefined;
  /** For an SR-IOV virtual function, the address of its physical function (the `physfn` link). */
  readonly physicalFunction?: string | undefined;
}

/** `0x10de\n` → `10de`. Pure. */
export function parseSysfsHex(text: string): string {
  return text.trim().toLowerCase().replace(/^0x/, "");
}

export { parseNumaNode } from "./sysfs-pci.js";

/**
 * Whether a device is one the config asks for: vendor, then device ids (if any), class prefix, bound
 * driver (if `drivers` lists any) and, for `physicalFunctions`, SR-IOV virtual functions of those
 * physical functions only. Pure.
 */
export function matchesPciSelector(
  config: Pick<PCIBackend, "vendor" | "devices" | "classPrefix"> &
    Partial<Pick<PCIBackend, "drivers" | "physicalFunctions">>,
  info: Pick<PciDeviceInfo, "vendor" | "device" | "classCode"> &
    Partial<Pick<PciDeviceInfo, "driver" | "physicalFunction">>,
): boolean {
  if (info.vendor !== config.vendor) return false;
  if (config.devices.length > 0 && !config.devices.includes(info.device)) return false;
  if (config.classPrefix !== undefined && !info.classCode.startsWith(config.classPrefix)) return false;
  const drivers = config.drivers ?? [];
  if (drivers.length > 0 && (info.driver === undefined || !drivers.includes(info.driver))) return false;
  const pfs = config.physicalFunctions ?? [];
  return pfs.length === 0 || (info.physicalFunction !== undefined && pfs.includes(info.physicalFunction));
}

/** The device as reported; `vfioGroupPresent` says whether `/dev/vfio/<group>` exists. Pure. */
export function pciPhysicalDevice(info: PciDeviceInfo, vfioGroupPresent: boolean): PhysicalDevice {
  const attributes: Record<string, string> = {
    vendor: info.vendor,
    device: info.device,
    address: info.address,
    class: info.classCode,
  };
  if (info.driver !== undefined) attributes.driver = info.driver;
  if (info.iommuGroup !== undefined) attributes.iommuGroup = info.iommuGroup;
  if (info.physicalFunction !== undefined) attributes.physicalFunction = info.physicalFunction;
  Object.assign(attributes, pcieRootAttribute(info.pcieRoot));
  let reason = "";
  if (info.driver === VFIO_DRIVER) {
    if (info.iommuGroup === undefined) reason = REASON_NO_IOMMU_GROUP;
    else if (!vfioGroupPresent) reason = REASON_VFIO_DEVICE_MISSING;
  }
  return {
    id: info.address,
    numaNode: info.numaNode,
    health: reason === "" ? "Healthy" : "Unhealthy",
    reason,
    attributes,
  };
}

/**
 * Device nodes a container needs for these devices: `/dev/vfio/<group>` for each IOMMU group of a
 * vfio-pci device (once per group: functions of one group share it) and the `/dev/vfio/vfio` container
 * node. Devices on other drivers contribute nothing; their nodes are driver-specific. Pure.
 */
export function vfioDeviceSpecs(devRoot: string, devices: readonly PciDeviceInfo[]): ContainerDeviceSpec[] {
  const groups = [
    ...new Set(
      devices.flatMap((info) =>
        info.driver === VFIO_DRIVER && info.iommuGroup !== undefined ? [info.iommuGroup] : [],
      ),
    ),
  ];
  if (groups.length === 0) return [];
  const node = (name: string): ContainerDeviceSpec => ({
    containerPath: `/dev/vfio/${name}`,
    hostPath: join(devRoot, "vfio", name),
    permissions: "rw",
  });
  return [...groups.map(node), node("vfio")];
}

/**
 * The variable listing the allocated PCI addresses (comma-separated), named the way KubeVirt looks
 * for externally provided host devices: `PCI_RESOURCE_` + the resource name upper-cased with `/` and `.`
 * turned into `_` (`hardware-vendor.example/foo` → `PCI_RESOURCE_HARDWARE-VENDOR_EXAMPLE_FOO`). Pure.
 */
export function pciAddressesEnvName(resourceName: string): string {
  return `PCI_RESOURCE_${resourceName.toUpperCase().replace(/[/.]/g, "_")}`;
}

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch {
    return undefined;
  }
}

async function linkName(path: string): Promise<string | undefined> {
  try {
    return basename(await readlink(path));
  } catch {
    return undefined;
  }
}

async function pathExists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

/** Reads one sysfs device directory; undefined when it is not the vendor's or is gone mid-read. */
async function readPciDevice(
  sysfsRoot: string,
  address: string,
  vendor: string,
): Promise<PciDeviceInfo | undefined> {
  const dir = join(sysfsRoot, "bus", "pci", "devices", address);
  const vendorText = await readOptional(join(dir, "vendor"));
  // Most of a host's PCI functions are someone else's; read the rest only for the vendor's.
  if (vendorText === undefined || parseSysfsHex(vendorText) !== vendor) return undefined;
  const [deviceText, classText, locality, driver, iommuGroup, physicalFunction] = await Promise.all([
    readOptional(join(dir, "device")),
    readOptional(join(dir, "class")),
    readPciLocality(sysfsRoot, address),
    linkName(join(dir, "driver")),
    linkName(join(dir, "iommu_group")),
    linkName(join(dir, "physfn")),
  ]);
  if (deviceText === undefined || classText === undefined) return undefined;
  return {
    address,
    vendor: parseSysfsHex(vendorText),
    device: parseSysfsHex(deviceText),
    classCode: parseSysfsHex(classText).padStart(6, "0"),
    numaNode: locality.numaNode,
    driver,
    iommuGroup,
    pcieRoot: locality.pcieRoot,
    physicalFunction,
  };
}

export interface PCIBackendOptions {
  readonly logger: Logger;
  /** Resource name; names the env var listing PCI addresses. */
  readonly resourceName: string;
  /** Full rescan period; sysfs sends no file-system events, so this is how hot-plug is seen. */
  readonly rescanIntervalMs?: number;
  /** How long a removed device stays listed as unhealthy (reason DeviceRemoved) before it is dropped. */
  readonly removedGracePeriodMs?: number;
}

export class PCIDeviceBackend extends RefreshingBackend {
  private readonly removedGracePeriodMs: number;
  private readonly envName: string;
  private tracked = new Map<string, TrackedDevice>();
  private infos = new Map<string, PciDeviceInfo>();

  constructor(
    private readonly config: PCIBackend,
    options: PCIBackendOptions,
  ) {
    super("PCI", options.logger, options.rescanIntervalMs ?? DEFAULT_PCI_RESCAN_INTERVAL_MS, {
      entriesOnly: true,
    });
    this.envName = pciAddressesEnvName(options.resourceName);
    this.removedGracePeriodMs = options.removedGracePeriodMs ?? DEFAULT_PCI_REMOVED_GRACE_PERIOD_MS;
  }

  allocate(physicalIds: readonly string[]): ContainerAllocation {
    this.assertKnown(physicalIds, this.infos);
    const infos = physicalIds.map((id) => this.infos.get(id)).filter((info) => info !== undefined);
    return {
      envs: { [this.envName]: physicalIds.join(",") },
      mounts: [],
      devices: vfioDeviceSpecs(this.config.devRoot, infos),
      annotations: {},
    };
  }

  /**
   * The function's vfio nodes when bound to vfio-pci, and always a variable naming its address (the
   * only edit of a function on another driver, whose nodes are driver-specific).
   */
  cdiContainerEdits(physicalId: string): CdiContainerEdits | undefined {
    const info = this.infos.get(physicalId);
    if (info === undefined) return undefined;
    return {
      env: [`${cdiEnvName(PCI_CDI_ENV_PREFIX, info.address)}=${info.address}`],
      deviceNodes: vfioDeviceSpecs(this.config.devRoot, [info]).map(cdiDeviceNode),
    };
  }

  protected async refresh(): Promise<void> {
    if (this.stopped) return;
    const devicesDir = join(this.config.sysfsRoot, "bus", "pci", "devices");
    const vfioDir = join(this.config.devRoot, "vfio");
    // Real sysfs sends no events; the watch helps where the tree is an ordinary directory, /dev/vfio included.
    await this.watcher.watch([devicesDir, vfioDir]);

    let addresses: string[];
    try {
      addresses = (await readdir(devicesDir)).sort();
    } catch (error) {
      this.logger.warn(
        { path: devicesDir, err: error },
        "cannot list PCI devices; keeping the last known devices",
      );
      return;
    }
    const found: PciDeviceInfo[] = [];
    for (const address of addresses) {
      const info = await readPciDevice(this.config.sysfsRoot, address, this.config.vendor);
      if (info !== undefined && matchesPciSelector(this.config, info)) found.push(info);
    }
    const devices: PhysicalDevice[] = [];
    for (const info of found) {
      const groupPresent =
        info.driver === VFIO_DRIVER && info.iommuGroup !== undefined
          ? await pathExists(join(vfioDir, info.iommuGroup))
          : false;
      devices.push(pciPhysicalDevice(info, groupPresent));
    }
    if (this.stopped) return;

    this.tracked = trackRemovals(this.tracked, devices, Date.now(), this.removedGracePeriodMs);
    const infos = new Map(found.map((info) => [info.address, info]));
    for (const id of this.tracked.keys()) {
      const kept = this.infos.get(id);
      if (!infos.has(id) && kept !== undefined) infos.set(id, kept);
    }
    this.infos = infos;

    const before = this.publisher.current();
    const next = [...this.tracked.values()]
      .map(({ device }) => device)
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    if (this.publisher.publish(next)) logDeviceChanges(this.logger, before, next);
  }
}
