// Pure: Container Device Interface (CDI) spec documents, names and the spec version they need. Knows
// nothing of the device-plugin or DRA APIs, so both can describe their devices through it.

/** A device node the container runtime creates in the container (CDI `deviceNodes`). */
export interface CdiDeviceNode {
  /** Path in the container. */
  readonly path: string;
  /** Path on the host when it differs from `path` (needs CDI 0.5.0). */
  readonly hostPath?: string;
  /** cgroup permissions, a combination of r, w, m. */
  readonly permissions?: string;
}

/** A mount the container runtime adds (CDI `mounts`); `type` is left out so no 0.4.0 reader is needed. */
export interface CdiMount {
  readonly hostPath: string;
  readonly containerPath: string;
  readonly options?: readonly string[];
}

/** What a container that gets a device needs (CDI `containerEdits`, the subset this project writes). */
export interface CdiContainerEdits {
  /** `NAME=value` entries. */
  readonly env?: readonly string[];
  readonly deviceNodes?: readonly CdiDeviceNode[];
  readonly mounts?: readonly CdiMount[];
}

export interface CdiDevice {
  /** Unqualified device name: `<kind>=<name>` is what a container asks for. */
  readonly name: string;
  readonly containerEdits: CdiContainerEdits;
}

export interface CdiSpec {
  readonly cdiVersion: string;
  readonly kind: string;
  readonly devices: readonly CdiDevice[];
}

/** Where runtimes look for generated (as opposed to installed) specs. */
export const DEFAULT_CDI_DIR = "/var/run/cdi";

/**
 * The CDI versions whose features this project may use, lowest first (SPEC.md, "Released versions"):
 * 0.3.0 is the earliest a runtime accepts; 0.5.0 added `deviceNodes[].hostPath` and device names
 * starting with a digit; 0.6.0 allowed dots in the class part of the kind.
 */
export const CDI_VERSIONS = ["0.3.0", "0.5.0", "0.6.0"] as const;
export type CdiVersion = (typeof CDI_VERSIONS)[number];

const ALNUM = /^[A-Za-z0-9]$/;
const LETTER = /^[A-Za-z]$/;

/** The CDI parser's rule for vendor and class: a letter first, alphanumeric last, `_-.` between. */
function vendorOrClassProblem(what: string, name: string): string | undefined {
  if (name === "") return `${what} is empty`;
  if (!LETTER.test(name[0]!)) return `${what} '${name}' must start with a letter`;
  if (!/^[A-Za-z0-9_.-]*$/.test(name))
    return `${what} '${name}' may hold only letters, digits, '_', '-', '.'`;
  if (!ALNUM.test(name[name.length - 1]!)) return `${what} '${name}' must end with a letter or digit`;
  return undefined;
}

/** Splits a kind `<vendor>/<class>`; a problem when either part breaks the CDI naming rules. Pure. */
export function parseCdiKind(
  kind: string,
): { ok: true; vendor: string; class: string } | { ok: false; problem: string } {
  const slash = kind.indexOf("/");
  if (slash < 0 || slash !== kind.lastIndexOf("/")) {
    return { ok: false, problem: `kind '${kind}' must be <vendor>/<class>` };
  }
  const vendor = kind.slice(0, slash);
  const klass = kind.slice(slash + 1);
  const problem = vendorOrClassProblem("vendor", vendor) ?? vendorOrClassProblem("class", klass);
  return problem === undefined ? { ok: true, vendor, class: klass } : { ok: false, problem };
}

/**
 * The CDI rule for device names: alphanumeric first and last, `_-.:` between (the reference parser
 * accepts `:`, which PCI addresses need). Undefined when valid. Pure.
 */
export function cdiDeviceNameProblem(name: string): string | undefined {
  if (name === "") return "device name is empty";
  if (!ALNUM.test(name[0]!) || !ALNUM.test(name[name.length - 1]!)) {
    return `device name '${name}' must start and end with a letter or digit`;
  }
  if (!/^[A-Za-z0-9_.:-]*$/.test(name)) {
    return `device name '${name}' may hold only letters, digits, '_', '-', '.', ':'`;
  }
  return undefined;
}

/** The name a container asks for: `<kind>=<device>`. Pure. */
export function qualifiedCdiName(kind: string, device: string): string {
  return `${kind}=${device}`;
}

/** `<vendor>-<class>.json`, the CDI naming convention for a kind's spec file. Throws on an invalid kind. */
export function cdiSpecFileName(kind: string): string {
  const parsed = parseCdiKind(kind);
  if (!parsed.ok) throw new Error(`CDI ${parsed.problem}`);
  return `${parsed.vendor}-${parsed.class}.json`;
}

/**
 * `<vendor>-<class>_<id>.json`: the CDI convention for a transient spec, one whose life is tied to
 * something else (a container, a claim), so several files of one kind can sit side by side; `/` in the
 * id becomes `_` (the reference library's GenerateTransientSpecName). Throws on an invalid kind. Pure.
 */
export function cdiTransientSpecFileName(kind: string, transientId: string): string {
  const parsed = parseCdiKind(kind);
  if (!parsed.ok) throw new Error(`CDI ${parsed.problem}`);
  return `${parsed.vendor}-${parsed.class}_${transientId.replaceAll("/", "_")}.json`;
}

function editsAreEmpty(edits: CdiContainerEdits): boolean {
  return (edits.env?.length ?? 0) + (edits.deviceNodes?.length ?? 0) + (edits.mounts?.length ?? 0) === 0;
}

/** Why runtimes would refuse these edits (and with them the whole spec file), or undefined. */
function editsProblem(edits: CdiContainerEdits): string | undefined {
  if (editsAreEmpty(edits)) return "no container edits (runtimes refuse a device that changes nothing)";
  for (const env of edits.env ?? []) {
    if (env.indexOf("=") <= 0) return `env entry '${env}' is not NAME=value`;
  }
  for (const node of edits.deviceNodes ?? []) {
    if (node.path === "") return "a device node has an empty path";
    if (node.permissions !== undefined && !/^[rwm]*$/.test(node.permissions)) {
      return `device node ${node.path}: permissions '${node.permissions}' are not a combination of r, w, m`;
    }
  }
  for (const mount of edits.mounts ?? []) {
    if (mount.hostPath === "" || mount.containerPath === "") return "a mount has an empty path";
  }
  return undefined;
}

/** The lowest CDI version that has every feature the spec uses, so older runtimes can read it. Pure. */
export function requiredCdiVersion(kind: string, devices: readonly CdiDevice[]): CdiVersion {
  const klass = kind.slice(kind.indexOf("/") + 1);
  if (klass.includes(".")) return "0.6.0";
  const usesV050 = devices.some(
    (d) =>
      /^[0-9]/.test(d.name) || (d.containerEdits.deviceNodes ?? []).some((n) => n.hostPath !== undefined),
  );
  return usesV050 ? "0.5.0" : "0.3.0";
}

export interface CdiSpecBuild {
  /** Undefined when no device is left to describe (a spec must list at least one). */
  readonly spec: CdiSpec | undefined;
  /** Devices left out, with why: one bad device must not make runtimes refuse the whole file. */
  readonly skipped: readonly { readonly name: string; readonly problem: string }[];
}

/**
 * The spec document for a kind's devices: devices sorted by name, duplicates and devices a runtime would
 * refuse left out (and reported), the lowest sufficient `cdiVersion`. Throws on an invalid kind. Pure.
 */
export function buildCdiSpec(kind: string, devices: readonly CdiDevice[]): CdiSpecBuild {
  const parsed = parseCdiKind(kind);
  if (!parsed.ok) throw new Error(`CDI ${parsed.problem}`);
  const kept: CdiDevice[] = [];
  const skipped: { name: string; problem: string }[] = [];
  const seen = new Set<string>();
  for (const device of devices) {
    const problem =
      cdiDeviceNameProblem(device.name) ??
      (seen.has(device.name) ? "listed twice" : undefined) ??
      editsProblem(device.containerEdits);
    if (problem !== undefined) {
      skipped.push({ name: device.name, problem });
      continue;
    }
    seen.add(device.name);
    kept.push(device);
  }
  kept.sort((a, b) => a.name.localeCompare(b.name, "en", { numeric: true }));
  if (kept.length === 0) return { spec: undefined, skipped };
  return { spec: { cdiVersion: requiredCdiVersion(kind, kept), kind, devices: kept }, skipped };
}

/** An env name from a device id: upper case, anything outside [A-Z0-9_] as `_`. Pure. */
export function cdiEnvName(prefix: string, id: string): string {
  return `${prefix}${id.toUpperCase().replace(/[^A-Z0-9_]/g, "_")}`;
}
