// Pure: a device's string attributes (as backends report them) in the typed form resource.k8s.io/v1
// publishes them — attribute IDs that are C identifiers (or standard resource.kubernetes.io/ names), values typed as int, bool, version or string,
// and quantities as capacities. One function, so the ResourceSlice and the DeviceNodeState say the same.
import { createHash } from "node:crypto";
import { QUANTITY_SUFFIX_FACTOR } from "../../api/quantity.js";

/**
 * Most attributes plus capacities one device may carry (ResourceSliceMaxAttributesAndCapacitiesPerDevice
 * in k8s.io/api resource/v1); the API server refuses a slice with a device beyond it.
 */
export const MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE = 32;
/** Longest attribute or capacity ID, the part after the optional domain (DeviceMaxIDLength). */
export const MAX_ATTRIBUTE_ID_LENGTH = 32;
/** Longest string or version value in bytes (DeviceAttributeMaxValueLength). */
export const MAX_ATTRIBUTE_VALUE_LENGTH = 64;
/** The attribute a device's NUMA node is published under when the backend knows it. */
export const NUMA_NODE_ATTRIBUTE = "numaNode";
/**
 * The domain of the attributes Kubernetes standardises across drivers (StandardDeviceAttributePrefix in
 * k8s.io/dynamic-resource-allocation/deviceattribute), so one claim can ask for devices of several
 * drivers that sit together: `matchAttribute: resource.kubernetes.io/pcieRoot`.
 */
export const STANDARD_ATTRIBUTE_PREFIX = "resource.kubernetes.io/";
/** The device's NUMA node as an int, published whenever the backend knows it (never for -1). */
export const STANDARD_NUMA_NODE_ATTRIBUTE = `${STANDARD_ATTRIBUTE_PREFIX}numaNode`;
/** The PCIe root complex of a PCI device as a string `pci<domain>:<bus>`, e.g. `pci0000:00`. */
export const STANDARD_PCIE_ROOT_ATTRIBUTE = `${STANDARD_ATTRIBUTE_PREFIX}pcieRoot`;

/** resource.k8s.io/v1 DeviceAttribute: exactly one member set. */
export type DraAttributeValue =
  | { readonly int: number }
  | { readonly bool: boolean }
  | { readonly string: string }
  | { readonly version: string };

/** resource.k8s.io/v1 DeviceCapacity (without requestPolicy: devices are allocated whole). */
export interface DraCapacityValue {
  readonly value: string;
}

export interface DraTypedAttributes {
  readonly attributes: Readonly<Record<string, DraAttributeValue>>;
  readonly capacity: Readonly<Record<string, DraCapacityValue>>;
  /** Backend keys left out because the device already had the most the API allows, sorted. */
  readonly dropped: readonly string[];
}

export interface DraAttributeInput {
  /** The backend's attributes, key → value. */
  readonly attributes: Readonly<Record<string, string>>;
  /** Published as the int attribute `numaNode` unless the backend has an attribute of that name. */
  readonly numaNode?: number | undefined;
}

export interface DraAttributeOptions {
  /**
   * Keys the backend says are quantities: published as capacities when the value parses as a
   * Kubernetes quantity. Without it, only values with a binary suffix (`80Gi`, `512Mi`) are.
   */
  readonly capacityKeys?: ReadonlySet<string>;
}

const C_IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const INTEGER = /^-?(0|[1-9][0-9]*)$/;
// semver.org 2.0.0, as the API server checks version attributes (semverRe in pkg/apis/resource/validation).
const NUMERIC_ID = "(0|[1-9]\\d*)";
const PRERELEASE_ID = "(0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*)";
const BUILD_ID = "[0-9a-zA-Z-]+";
const SEMVER = new RegExp(
  `^${NUMERIC_ID}\\.${NUMERIC_ID}\\.${NUMERIC_ID}` +
    `(-${PRERELEASE_ID}(\\.${PRERELEASE_ID})*)?` +
    `(\\+${BUILD_ID}(\\.${BUILD_ID})*)?$`,
);
// A resource.Quantity's canonical text: signed decimal number with an optional suffix.
const QUANTITY = /^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkMGTPE])?$/;
const BINARY_QUANTITY = /^([0-9]+(\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei)$/;

/** Whether `id` may name an attribute or capacity without a domain. Pure. */
export function isAttributeId(id: string): boolean {
  return id.length <= MAX_ATTRIBUTE_ID_LENGTH && C_IDENTIFIER.test(id);
}

/**
 * Whether a backend key is a standard attribute (`resource.kubernetes.io/<id>`): published under that
 * qualified name as it is, and kept before any other when a device has more than the API allows. Pure.
 */
export function isStandardAttribute(key: string): boolean {
  return (
    key.startsWith(STANDARD_ATTRIBUTE_PREFIX) && isAttributeId(key.slice(STANDARD_ATTRIBUTE_PREFIX.length))
  );
}

/**
 * The attribute ID a backend key is published under before collisions are settled: the key itself
 * when it is a C identifier of at most 32 characters, else every other character becomes `_`, a
 * leading digit gets a `_` in front, and the result is cut to 32. Pure.
 */
export function attributeIdBase(key: string): string {
  if (isAttributeId(key)) return key;
  let id = key.replace(/[^A-Za-z0-9_]/g, "_");
  if (id === "" || /^[0-9]/.test(id)) id = `_${id}`;
  return id.slice(0, MAX_ATTRIBUTE_ID_LENGTH);
}

/** `base` cut so that `_<8 hex of sha256(key)>` fits, with that suffix: unique per original key. */
function hashedId(base: string, key: string): string {
  const hash = createHash("sha256").update(key).digest("hex").slice(0, 8);
  return `${base.slice(0, MAX_ATTRIBUTE_ID_LENGTH - hash.length - 1)}_${hash}`;
}

/**
 * Backend key → attribute ID for a set of keys. A key that is already a valid ID keeps it; a rewritten
 * key takes its base unless another key has it, then its base with a hash of the key, so two keys never
 * share an ID and the same keys always get the same IDs. Pure.
 */
export function attributeIds(keys: Iterable<string>): Map<string, string> {
  const sorted = [...new Set(keys)].sort();
  const out = new Map<string, string>();
  const taken = new Set<string>();
  for (const key of sorted) {
    if (isAttributeId(key) || isStandardAttribute(key)) {
      out.set(key, key);
      taken.add(key);
    }
  }
  for (const key of sorted) {
    if (out.has(key)) continue;
    const base = attributeIdBase(key);
    let id = taken.has(base) ? hashedId(base, key) : base;
    // A hash colliding as well is next to impossible; walk on deterministically rather than fail.
    for (let i = 1; taken.has(id); i++) id = hashedId(base, `${key}#${i}`);
    out.set(key, id);
    taken.add(id);
  }
  return out;
}

/** The value cut to at most `max` UTF-8 bytes, never inside a character. Pure. */
export function truncateUtf8(value: string, max = MAX_ATTRIBUTE_VALUE_LENGTH): string {
  if (Buffer.byteLength(value, "utf8") <= max) return value;
  let out = "";
  let bytes = 0;
  for (const char of value) {
    const size = Buffer.byteLength(char, "utf8");
    if (bytes + size > max) break;
    out += char;
    bytes += size;
  }
  return out;
}

/**
 * One value typed as the API types attributes: a decimal integer without leading zeros that fits a
 * JSON number exactly → int; `true`/`false` → bool; semver 2.0.0 of at most 64 bytes → version; anything
 * else → string, cut to 64 bytes. Pure.
 */
export function typeAttributeValue(value: string): DraAttributeValue {
  if (INTEGER.test(value)) {
    const n = Number(value);
    if (Number.isSafeInteger(n)) return { int: n };
  }
  if (value === "true") return { bool: true };
  if (value === "false") return { bool: false };
  if (value.length <= MAX_ATTRIBUTE_VALUE_LENGTH && SEMVER.test(value)) return { version: value };
  return { string: truncateUtf8(value) };
}

/** Whether `value` is a Kubernetes quantity (the text resource.ParseQuantity accepts). Pure. */
export function isQuantity(value: string): boolean {
  return QUANTITY.test(value);
}

/**
 * The amount a quantity stands for, as a number (NaN when `value` is no quantity). The API server
 * returns quantities in canonical form (`1024Mi` comes back as `1Gi`, `1.5` as `1500m`): comparing
 * amounts, not texts, keeps the publisher from rewriting a slice that already says the same. Pure.
 */
export function quantityAmount(value: string): number {
  const match = QUANTITY.exec(value);
  if (match === null) return NaN;
  const suffix = match[3];
  const number = suffix === undefined ? value : value.slice(0, value.length - suffix.length);
  if (suffix === undefined) return Number(number);
  if (/^[eE]/.test(suffix)) return Number(value);
  return Number(number) * (QUANTITY_SUFFIX_FACTOR[suffix] ?? NaN);
}

/**
 * A device's attributes and capacities as resource.k8s.io/v1 publishes them (see the module comment).
 * A known NUMA node is published twice: as `numaNode` and as the standard `resource.kubernetes.io/numaNode`.
 * At most MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE entries: when a backend reports more, the standard
 * attributes are kept and of the others the IDs that sort last are left out (and listed in `dropped`), so
 * the same input always publishes the same subset. Pure.
 */
export function draTypedAttributes(
  input: DraAttributeInput,
  options: DraAttributeOptions = {},
): DraTypedAttributes {
  const entries = Object.entries(input.attributes);
  if (input.numaNode !== undefined && Number.isSafeInteger(input.numaNode) && input.numaNode >= 0) {
    for (const name of [NUMA_NODE_ATTRIBUTE, STANDARD_NUMA_NODE_ATTRIBUTE]) {
      const taken = entries.some(([key]) => key === name);
      if (!taken) entries.push([name, String(input.numaNode)]);
    }
  }
  const ids = attributeIds(entries.map(([key]) => key));
  // Standard attributes first, so a device with too many keeps the ones claims use across drivers.
  const rank = (id: string): number => (isStandardAttribute(id) ? 0 : 1);
  const typed = entries
    .map(([key, value]) => ({ key, id: ids.get(key)!, value }))
    .sort((a, b) => rank(a.id) - rank(b.id) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));

  const attributes: Record<string, DraAttributeValue> = {};
  const capacity: Record<string, DraCapacityValue> = {};
  const dropped: string[] = [];
  for (const [index, { key, id, value }] of typed.entries()) {
    if (index >= MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE) {
      dropped.push(key);
      continue;
    }
    const asCapacity = options.capacityKeys?.has(key) ? isQuantity(value) : BINARY_QUANTITY.test(value);
    if (asCapacity) capacity[id] = { value };
    else attributes[id] = typeAttributeValue(value);
  }
  return { attributes, capacity, dropped: dropped.sort() };
}
