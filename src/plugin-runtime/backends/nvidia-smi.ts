// nvidia-smi and dmesg as data sources for the NVIDIA backend: the arguments it runs them with, pure
// parsers for their output (CSV rows, the -q -x XML, NVRM Xid kernel messages), and a runner that bounds
// every run and turns each way it can fail into a reason a user can act on.
import { execFile } from "node:child_process";

/** The `--query-gpu` fields, in the order of the CSV columns. */
export const GPU_QUERY_FIELDS = [
  "index",
  "uuid",
  "name",
  "memory.total",
  "mig.mode.current",
  "pci.bus_id",
  "driver_version",
  "retired_pages.pending",
] as const;

/** One line per GPU, values separated by ", ", no header, numbers without units (memory in MiB). */
export const GPU_QUERY_ARGS: readonly string[] = [
  `--query-gpu=${GPU_QUERY_FIELDS.join(",")}`,
  "--format=csv,noheader,nounits",
];

/** The full XML report: the only place with the CUDA version and each GPU's minor number. */
export const XML_QUERY_ARGS: readonly string[] = ["-q", "-x"];

/**
 * Each GPU's CUDA compute capability (`9.0`), a field nvidia-smi has had since driver R510: asked apart
 * from the health poll, and only when the GPUs or the driver change, so a driver without it costs nothing.
 */
export const COMPUTE_CAP_QUERY_ARGS: readonly string[] = [
  "--query-gpu=uuid,compute_cap",
  "--format=csv,noheader",
];

/** GPU uuid → compute capability from COMPUTE_CAP_QUERY_ARGS output; lines of any other shape are skipped. Pure. */
export function parseComputeCaps(text: string): Map<string, string> {
  const caps = new Map<string, string>();
  for (const line of text.split("\n")) {
    const values = line.split(",").map((value) => value.trim());
    const [uuid = "", cap = ""] = values;
    if (values.length === 2 && UUID.test(uuid) && /^\d+\.\d+$/.test(cap)) caps.set(uuid, cap);
  }
  return caps;
}

/** What nvidia-smi prints in a field it cannot read; values in brackets are never data. */
export const REQUIRES_RESET_VALUE = "[GPU requires reset]";

/** A GPU as one `--query-gpu` row describes it. */
export interface GpuRow {
  readonly index: number;
  /** `GPU-` followed by a UUID, as nvidia-smi prints it. */
  readonly uuid: string;
  readonly name: string;
  readonly memoryMiB: number | undefined;
  /** `Enabled` or `Disabled`; undefined where MIG is not supported (`[N/A]`). */
  readonly migMode: "Enabled" | "Disabled" | undefined;
  /** Normalized as sysfs names it: 4-digit domain, lower case (`0000:3b:00.0`). */
  readonly busId: string;
  readonly driverVersion: string;
  /** `retired_pages.pending`: Yes means a reset or reboot is needed to retire bad memory pages. */
  readonly pagesPendingRetirement: boolean | undefined;
  /** Fields nvidia-smi could not read, with the marker it printed (`[GPU requires reset]`, `[Unknown Error]`). */
  readonly fieldErrors: Readonly<Record<string, string>>;
}

export interface GpuQueryParse {
  readonly rows: GpuRow[];
  /** Bus ids of GPUs nvidia-smi names but cannot open ("Unable to determine the device handle for GPU..."). */
  readonly unreachable: string[];
  /** Lines that are neither; any of them makes the whole output untrustworthy. */
  readonly problems: string[];
}

const NOT_APPLICABLE = new Set(["[N/A]", "[Not Supported]", "N/A"]);
const UUID = /^GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const BUS_ID = /^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$/;
const UNREACHABLE =
  /^Unable to determine the device handle for (?:GPU\s*)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]):/;

/** nvidia-smi's `00000000:3B:00.0` as sysfs spells it, `0000:3b:00.0`; undefined when it is none. Pure. */
export function normalizeBusId(text: string): string | undefined {
  const match = BUS_ID.exec(text.trim());
  if (match === null) return undefined;
  const [, domain = "", bus = "", device = "", fn = ""] = match;
  if (Number.parseInt(domain.slice(0, -4) || "0", 16) !== 0) return undefined;
  return `${domain.slice(-4)}:${bus}:${device}.${fn}`.toLowerCase();
}

function quote(line: string): string {
  return JSON.stringify(line.length > 120 ? `${line.slice(0, 117)}...` : line);
}

/** Parses one CSV row; a string says what is wrong with it. Pure. */
export function parseGpuRow(line: string): GpuRow | string {
  const values = line.split(",").map((value) => value.trim());
  if (values.length !== GPU_QUERY_FIELDS.length) {
    return `expected ${GPU_QUERY_FIELDS.length} comma-separated fields (${GPU_QUERY_FIELDS.join(", ")}), got ${values.length}`;
  }
  const field = (name: (typeof GPU_QUERY_FIELDS)[number]): string =>
    values[GPU_QUERY_FIELDS.indexOf(name)] ?? "";
  const fieldErrors: Record<string, string> = {};
  /** The value, undefined when not applicable, recorded as an error when nvidia-smi could not read it. */
  const read = (name: (typeof GPU_QUERY_FIELDS)[number]): string | undefined => {
    const value = field(name);
    if (NOT_APPLICABLE.has(value)) return undefined;
    if (value.startsWith("[")) {
      fieldErrors[name] = value;
      return undefined;
    }
    return value;
  };

  const indexText = field("index");
  if (!/^\d+$/.test(indexText)) return `index ${quote(indexText)} is not a number`;
  const uuid = field("uuid");
  if (!UUID.test(uuid)) return `uuid ${quote(uuid)} is not GPU-<uuid>`;
  const busId = normalizeBusId(field("pci.bus_id"));
  if (busId === undefined) return `pci.bus_id ${quote(field("pci.bus_id"))} is not a PCI address`;
  const memoryText = read("memory.total");
  if (memoryText !== undefined && !/^\d+$/.test(memoryText)) {
    return `memory.total ${quote(memoryText)} is not a number of MiB`;
  }
  const migText = read("mig.mode.current");
  if (migText !== undefined && migText !== "Enabled" && migText !== "Disabled") {
    return `mig.mode.current ${quote(migText)} is not Enabled or Disabled`;
  }
  const pendingText = read("retired_pages.pending");
  if (pendingText !== undefined && pendingText !== "Yes" && pendingText !== "No") {
    return `retired_pages.pending ${quote(pendingText)} is not Yes or No`;
  }
  return {
    index: Number.parseInt(indexText, 10),
    uuid,
    name: read("name") ?? "",
    memoryMiB: memoryText === undefined ? undefined : Number.parseInt(memoryText, 10),
    migMode: migText,
    busId,
    driverVersion: read("driver_version") ?? "",
    pagesPendingRetirement: pendingText === undefined ? undefined : pendingText === "Yes",
    fieldErrors,
  };
}

/** Parses the whole `--query-gpu` output. Pure. */
export function parseGpuQuery(text: string): GpuQueryParse {
  const rows: GpuRow[] = [];
  const unreachable: string[] = [];
  const problems: string[] = [];
  const seen = new Set<string>();
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (line === "") return;
    const lost = UNREACHABLE.exec(line);
    if (lost !== null) {
      const busId = normalizeBusId(lost[1] ?? "");
      if (busId !== undefined) unreachable.push(busId);
      return;
    }
    const row = parseGpuRow(line);
    if (typeof row === "string") problems.push(`line ${i + 1}: ${row}: ${quote(line)}`);
    else if (seen.has(row.uuid)) problems.push(`line ${i + 1}: GPU ${row.uuid} listed twice`);
    else {
      seen.add(row.uuid);
      rows.push(row);
    }
  });
  return { rows, unreachable, problems };
}

/** What the XML report adds to the CSV rows. */
export interface NvidiaSmiXmlInfo {
  readonly cudaVersion: string | undefined;
  /** GPU uuid → minor number (the N of /dev/nvidiaN, which need not be the index). */
  readonly minorNumbers: ReadonlyMap<string, number>;
}

function xmlText(block: string, tag: string): string | undefined {
  const match = new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(block);
  return match?.[1]?.trim();
}

/** Reads the CUDA version and minor numbers from `nvidia-smi -q -x`; a string says why it cannot. Pure. */
export function parseNvidiaSmiXml(text: string): NvidiaSmiXmlInfo | string {
  if (!text.includes("<nvidia_smi_log>")) return "no <nvidia_smi_log> element";
  const cuda = xmlText(text, "cuda_version");
  const minorNumbers = new Map<string, number>();
  for (const match of text.matchAll(/<gpu id="[^"]*">([\s\S]*?)<\/gpu>/g)) {
    const block = match[1] ?? "";
    const uuid = xmlText(block, "uuid");
    const minor = xmlText(block, "minor_number");
    if (uuid !== undefined && minor !== undefined && /^\d+$/.test(minor)) {
      minorNumbers.set(uuid, Number.parseInt(minor, 10));
    }
  }
  return { cudaVersion: cuda === undefined || NOT_APPLICABLE.has(cuda) ? undefined : cuda, minorNumbers };
}

/** An XID the NVIDIA kernel driver logged: `[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=..., ...`. */
export interface XidEvent {
  /** Seconds since boot, as dmesg prints it; orders events and tells new ones from old. */
  readonly timestamp: number;
  /** `domain:bus:device` of the GPU, lower case (`0000:3b:00`); the function is always 0 for a GPU. */
  readonly pciDevice: string;
  readonly xid: number;
  /** The rest of the message (process, and the driver's description where it gives one). */
  readonly detail: string;
  /** On a MIG GPU, the GPU and compute instance the driver attributes the XID to (`GPU-I:05 GPU-CI:00`). */
  readonly gpuInstance?: number;
  readonly computeInstance?: number;
}

// On a MIG GPU the driver adds the instances it attributes the XID to: `(PCI:0000:01:00 GPU-I:05)`.
const XID_LINE =
  /^\[\s*(\d+(?:\.\d+)?)\]\s+NVRM: Xid \(PCI:([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?: GPU-I:(\d+))?(?: GPU-CI:(\d+))?\): (\d+),?\s*(.*)$/;

/** The XID events in dmesg output, in order; other lines are ignored. Pure. */
export function parseXidEvents(text: string): XidEvent[] {
  const events: XidEvent[] = [];
  for (const raw of text.split("\n")) {
    const match = XID_LINE.exec(raw.trim());
    if (match === null) continue;
    const [, ts = "", pci = "", gi, ci, xid = "", detail = ""] = match;
    const [domain = "", bus = "", device = ""] = pci.toLowerCase().split(":");
    events.push({
      timestamp: Number.parseFloat(ts),
      pciDevice: `${domain.slice(-4)}:${bus}:${device}`,
      xid: Number.parseInt(xid, 10),
      detail: detail.length > 200 ? `${detail.slice(0, 197)}...` : detail,
      ...(gi === undefined ? {} : { gpuInstance: Number.parseInt(gi, 10) }),
      ...(ci === undefined ? {} : { computeInstance: Number.parseInt(ci, 10) }),
    });
  }
  return events;
}

/** Why a run of nvidia-smi (or dmesg) gave no usable output. */
export type CommandFailureKind = "Missing" | "Timeout" | "DriverUnavailable" | "Failed";

export interface CommandFailure {
  readonly kind: CommandFailureKind;
  /** One line for logs and `dpo probe`: the command, and what went wrong. */
  readonly message: string;
  /** Whatever it printed on stdout before failing (nvidia-smi still lists reachable GPUs when one is lost). */
  readonly stdout: string;
}

export type CommandResult = { ok: true; stdout: string } | { ok: false; failure: CommandFailure };

/** Output beyond this is a broken tool, not a report: an 8-GPU `-q -x` is about 200 KiB. */
const MAX_OUTPUT_BYTES = 16 * 1024 * 1024;

/** The message nvidia-smi prints (on stdout) when the kernel driver is missing or not loaded. */
const DRIVER_UNAVAILABLE = /couldn't communicate with the NVIDIA driver|NVIDIA driver is not loaded/i;

function firstLine(text: string): string {
  const line = text.split("\n").find((l) => l.trim() !== "") ?? "";
  return line.length > 200 ? `${line.slice(0, 197)}...` : line.trim();
}

/**
 * Runs a command with a deadline and classifies the outcome. Never rejects: a missing binary, a hang
 * (killed with SIGKILL), a crash or the driver-missing message each come back as a failure.
 */
export function runCommand(path: string, args: readonly string[], timeoutMs: number): Promise<CommandResult> {
  const command = [path, ...args].join(" ");
  return new Promise((resolve) => {
    execFile(
      path,
      [...args],
      { timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: MAX_OUTPUT_BYTES, encoding: "utf8" },
      (error, stdout, stderr) => {
        if (error === null) return resolve({ ok: true, stdout });
        // A spawn error carries an errno string, a finished process its exit code as a number.
        const code: unknown = (error as { code?: unknown }).code;
        const fail = (kind: CommandFailureKind, message: string) =>
          resolve({ ok: false, failure: { kind, message: `${command}: ${message}`, stdout: stdout ?? "" } });
        if (code === "ENOENT") return fail("Missing", `not found (is the NVIDIA driver installed?)`);
        if (code === "EACCES") return fail("Failed", "not executable (permission denied)");
        if (error.killed === true && error.signal === "SIGKILL") {
          return fail("Timeout", `no answer within ${timeoutMs} ms; killed`);
        }
        if (code === "ERR_CHILD_PROCESS_STDIO_MAXBUFFER") {
          return fail("Failed", `printed more than ${MAX_OUTPUT_BYTES} bytes; killed`);
        }
        const output = `${stdout ?? ""}\n${stderr ?? ""}`;
        if (DRIVER_UNAVAILABLE.test(output)) return fail("DriverUnavailable", firstLine(output));
        const how =
          typeof code === "number" ? `exit code ${String(code)}` : `signal ${error.signal ?? "unknown"}`;
        const said = firstLine(stderr ?? "") || firstLine(stdout ?? "");
        return fail("Failed", said === "" ? how : `${how}: ${said}`);
      },
    );
  });
}
