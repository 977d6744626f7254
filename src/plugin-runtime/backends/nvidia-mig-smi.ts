// The MIG sources of the NVIDIA backend, parsed: `nvidia-smi -L` (each GPU's MIG devices with their UUIDs
// and profiles), the MIG section of `nvidia-smi -q -x` (each MIG device's GPU and compute instance and its
// memory) and the driver's /proc/driver/nvidia-caps/mig-minors (which /dev/nvidia-caps/nvidia-capN guards
// each instance). Pure parsers; see docs/adr/0007-mig-one-config-per-resource.md for how they are used.

/** Lists every GPU and, indented under it, its MIG devices. */
export const LIST_ARGS: readonly string[] = ["-L"];

/** Where the driver says which capability device node guards which GPU and compute instance. */
export const MIG_MINORS_PATH = "/proc/driver/nvidia-caps/mig-minors";

/** A MIG device as `nvidia-smi -L` lists it under its GPU. */
export interface ListedMigDevice {
  /** The profile, `1g.10gb`, as the device's name says it (without the `MIG ` prefix). */
  readonly profile: string;
  /** The MIG device's index on its GPU (NVML's MIG device handle index). */
  readonly index: number;
  /** `MIG-<uuid>`; drivers before R470 printed `MIG-GPU-<gpu uuid>/<gi>/<ci>`. */
  readonly uuid: string;
  /** GPU and compute instance, known from the UUID only in the old form. */
  readonly gpuInstance: number | undefined;
  readonly computeInstance: number | undefined;
}

export interface ListedGpu {
  readonly index: number;
  readonly name: string;
  readonly uuid: string;
  readonly migDevices: readonly ListedMigDevice[];
}

export interface GpuListParse {
  readonly gpus: ListedGpu[];
  /** Lines that are neither a GPU nor a MIG device; any of them makes the output untrustworthy. */
  readonly problems: string[];
}

const GPU_LINE = /^GPU (\d+): (.*) \(UUID: (GPU-[0-9a-fA-F-]+)\)$/;
const MIG_LINE = /^MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)\s]+)\)$/;
const LEGACY_MIG_UUID = /^MIG-GPU-[0-9a-fA-F-]+\/(\d+)\/(\d+)$/;

function quote(line: string): string {
  return JSON.stringify(line.length > 120 ? `${line.slice(0, 117)}...` : line);
}

/** Parses `nvidia-smi -L`. Pure. */
export function parseGpuList(text: string): GpuListParse {
  const gpus: Array<{ index: number; name: string; uuid: string; migDevices: ListedMigDevice[] }> = [];
  const problems: string[] = [];
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (line === "") return;
    const gpu = GPU_LINE.exec(line);
    if (gpu !== null) {
      const [, index = "", name = "", uuid = ""] = gpu;
      gpus.push({ index: Number.parseInt(index, 10), name, uuid, migDevices: [] });
      return;
    }
    const mig = MIG_LINE.exec(line);
    const parent = gpus.at(-1);
    if (mig !== null && parent !== undefined) {
      const [, profile = "", index = "", uuid = ""] = mig;
      const legacy = LEGACY_MIG_UUID.exec(uuid);
      parent.migDevices.push({
        profile,
        index: Number.parseInt(index, 10),
        uuid,
        gpuInstance: legacy === null ? undefined : Number.parseInt(legacy[1] ?? "", 10),
        computeInstance: legacy === null ? undefined : Number.parseInt(legacy[2] ?? "", 10),
      });
      return;
    }
    problems.push(
      `line ${i + 1}: ${mig === null ? "neither a GPU nor a MIG device" : "a MIG device before any GPU"}: ${quote(line)}`,
    );
  });
  return { gpus, problems };
}

/** A MIG device as the `-q -x` report's `<mig_devices>` section describes it. */
export interface XmlMigDevice {
  readonly index: number;
  readonly gpuInstance: number;
  readonly computeInstance: number;
  /** `fb_memory_usage/total`, in MiB; undefined when not printed. */
  readonly memoryMiB: number | undefined;
}

function xmlText(block: string, tag: string): string | undefined {
  const match = new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(block);
  return match?.[1]?.trim();
}

function xmlInt(block: string, tag: string): number | undefined {
  const text = xmlText(block, tag);
  return text !== undefined && /^\d+$/.test(text) ? Number.parseInt(text, 10) : undefined;
}

/**
 * Each GPU's MIG devices from `nvidia-smi -q -x`, keyed by GPU UUID (GPUs without MIG devices map to an
 * empty list); a MIG device without readable instance ids is left out. A string says why the text is not
 * the report at all. Pure.
 */
export function parseMigXml(text: string): Map<string, XmlMigDevice[]> | string {
  if (!text.includes("<nvidia_smi_log>")) return "no <nvidia_smi_log> element";
  const out = new Map<string, XmlMigDevice[]>();
  for (const match of text.matchAll(/<gpu id="[^"]*">([\s\S]*?)<\/gpu>/g)) {
    const block = match[1] ?? "";
    const section = /<mig_devices>([\s\S]*?)<\/mig_devices>/.exec(block)?.[1] ?? "";
    // The GPU's own fields, with the MIG section (whose devices have memory fields of their own) cut out.
    const uuid = xmlText(block.replace(section, ""), "uuid");
    if (uuid === undefined) continue;
    const devices: XmlMigDevice[] = [];
    for (const mig of section.matchAll(/<mig_device>([\s\S]*?)<\/mig_device>/g)) {
      const body = mig[1] ?? "";
      const index = xmlInt(body, "index");
      const gpuInstance = xmlInt(body, "gpu_instance_id");
      const computeInstance = xmlInt(body, "compute_instance_id");
      if (index === undefined || gpuInstance === undefined || computeInstance === undefined) continue;
      const fb = /<fb_memory_usage>([\s\S]*?)<\/fb_memory_usage>/.exec(body)?.[1] ?? "";
      const total = /^(\d+) MiB$/.exec(xmlText(fb, "total") ?? "");
      devices.push({
        index,
        gpuInstance,
        computeInstance,
        memoryMiB: total === null ? undefined : Number.parseInt(total[1] ?? "", 10),
      });
    }
    out.set(uuid, devices);
  }
  return out;
}

/** The capability a GPU instance is guarded by, as mig-minors names it (by the GPU's minor number). */
export function gpuInstanceCap(gpuMinor: number, gpuInstance: number): string {
  return `gpu${gpuMinor}/gi${gpuInstance}/access`;
}

/** The capability a compute instance is guarded by. */
export function computeInstanceCap(gpuMinor: number, gpuInstance: number, computeInstance: number): string {
  return `gpu${gpuMinor}/gi${gpuInstance}/ci${computeInstance}/access`;
}

const MINORS_LINE = /^(config|monitor|gpu\d+\/gi\d+\/access|gpu\d+\/gi\d+\/ci\d+\/access) (\d+)$/;

/**
 * mig-minors: capability → minor of /dev/nvidia-caps/nvidia-cap<minor>. Lines it does not know are
 * skipped, as NVIDIA's container toolkit skips them. Pure.
 */
export function parseMigMinors(text: string): Map<string, number> {
  const caps = new Map<string, number>();
  for (const raw of text.split("\n")) {
    const match = MINORS_LINE.exec(raw.trim());
    if (match !== null) caps.set(match[1] ?? "", Number.parseInt(match[2] ?? "", 10));
  }
  return caps;
}
