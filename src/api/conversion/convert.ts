// Pure conversion of whole DevicePluginConfig objects between dpo.dev/v1alpha1 and dpo.dev/v1beta1.
//
// The field mapping (toAlphaCore/toBetaCore) covers what both versions can say. Whatever v1beta1 says
// that v1alpha1 cannot (sharing.failRequestsGreaterThanOne, cdi, plugin resources, an empty `topology: {}`,
// fields added later) is found generically, as the merge patch from "the up-conversion of the
// down-converted object" to the original, and kept as canonical JSON in one annotation on the v1alpha1
// object, the way Cluster API keeps hub-only fields. The up-conversion applies it and removes it, so
// beta → alpha → beta is the identity by construction, whatever later work adds to v1beta1.
import type { DevicePluginConfigInput } from "../v1beta1/config.js";
import { API_VERSION, KIND } from "../v1beta1/config.js";
import type { AllocationPolicy, DevicePluginConfigSpecInput } from "../v1beta1/spec.js";
import { V1ALPHA1_API_VERSION, type DevicePluginConfigV1alpha1Input } from "../v1alpha1/config.js";
import type { DevicePluginConfigSpecV1alpha1Input, V1alpha1AllocationPolicy } from "../v1alpha1/spec.js";
import {
  applyMergePatch,
  canonicalJson,
  diffMergePatch,
  isJsonObject,
  jsonEqual,
  leafPatch,
  patchLeaves,
  type JsonObject,
} from "./merge-patch.js";

/** The annotation on a v1alpha1 object holding the v1beta1 fields it cannot express. */
export const LOST_FIELDS_ANNOTATION = "dpo.dev/v1beta1-fields";

/** How validation and errors name the annotation, as the API server names a map key. */
export const LOST_FIELDS_PATH = `metadata.annotations[${LOST_FIELDS_ANNOTATION}]`;

export type AlphaObject = DevicePluginConfigV1alpha1Input;
export type BetaObject = DevicePluginConfigInput;
type AlphaSpec = DevicePluginConfigSpecV1alpha1Input;
type BetaSpec = DevicePluginConfigSpecInput;
type Metadata = BetaObject["metadata"];

/** A field of the annotation that an up-conversion did not restore, and why. */
export interface IgnoredField {
  /** The field path the annotation would have set, e.g. `spec.sharing.replicas`. */
  field: string;
  reason: string;
}

export type ConversionResult<T> =
  | {
      ok: true;
      value: T;
      /** Parts of the annotation that were not restored. */
      ignored: IgnoredField[];
      /** The same, as messages naming the object, the annotation and the field. */
      warnings: string[];
    }
  | {
      ok: false;
      /** The whole message, naming the object and the annotation. */
      error: string;
      /** What is wrong with the annotation, for messages that name it already. */
      problem: string;
    };

const ALPHA_POLICY: Record<AllocationPolicy, V1alpha1AllocationPolicy> = {
  None: "none",
  Packed: "packed",
  Spread: "balanced",
  NUMAAligned: "numa",
};
const BETA_POLICY: Record<V1alpha1AllocationPolicy, AllocationPolicy> = {
  none: "None",
  packed: "Packed",
  balanced: "Spread",
  numa: "NUMAAligned",
};

/** Looks a value up in a mapping table; an unknown (invalid) value passes through, so it stays invalid. */
function mapped<K extends string, V extends string>(table: Record<K, V>, value: K): V {
  return (Object.hasOwn(table, value) ? table[value] : value) as V;
}

/** The keys of an object whose value is not undefined, so absent stays absent in the output. */
function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

function objectOrEmpty<T extends object>(value: T | undefined): Partial<T> {
  return isJsonObject(value) ? value : {};
}

/**
 * v1alpha1's `sharedDevNum` as v1beta1's `sharing`: unset stays unset, 1 is `{strategy: None}`, more is
 * TimeSlicing with that many replicas. Below 1 (invalid) becomes `{strategy: None, replicas: n}`, which
 * v1beta1 refuses too, so both versions agree on validity.
 */
function sharingOf(sharedDevNum: number | undefined): BetaSpec["sharing"] {
  if (sharedDevNum === undefined) return undefined;
  if (sharedDevNum === 1) return { strategy: "None" };
  if (sharedDevNum > 1) return { strategy: "TimeSlicing", replicas: sharedDevNum };
  return { strategy: "None", replicas: sharedDevNum };
}

/**
 * v1beta1's `sharing` as `sharedDevNum`: TimeSlicing gives its replicas; None (spelled out or defaulted)
 * gives 1 unless neither strategy nor replicas is set, which gives unset. Replicas set with None (1, or
 * an invalid 4) cannot be said in v1alpha1 and travel in the annotation. Enum fields are expected to
 * hold their version's values (the structural schema checks them before any conversion).
 */
function sharedDevNumOf(sharing: BetaSpec["sharing"]): number | undefined {
  if (!isJsonObject(sharing)) return undefined;
  if (sharing.strategy === "TimeSlicing") return sharing.replicas;
  if (sharing.strategy === undefined && sharing.replicas === undefined) return undefined;
  // Replicas below 1 are invalid in both versions: keep them so the v1alpha1 object is refused too.
  if (sharing.replicas !== undefined && sharing.replicas < 1) return sharing.replicas;
  return 1;
}

/** Removes the annotation; an annotations map left empty by that is removed too. */
function withoutLostFields(metadata: Metadata): Metadata {
  const annotations = metadata.annotations;
  if (!isJsonObject(annotations) || !Object.hasOwn(annotations, LOST_FIELDS_ANNOTATION)) {
    return structuredClone(metadata);
  }
  const { [LOST_FIELDS_ANNOTATION]: _lost, ...rest } = annotations;
  const { annotations: _all, ...others } = structuredClone(metadata);
  return Object.keys(rest).length > 0 ? { ...others, annotations: rest } : others;
}

function withLostFields(metadata: Metadata, value: string): Metadata {
  const out = structuredClone(metadata);
  out.annotations = { ...objectOrEmpty(out.annotations), [LOST_FIELDS_ANNOTATION]: value };
  return out;
}

/** The v1beta1 spec that says what a v1alpha1 spec says, without the annotation. */
function betaSpecOf(spec: AlphaSpec): BetaSpec {
  const plugin = defined({ image: spec.image, logLevel: spec.logLevel });
  return defined({
    resourceName: spec.resourceName,
    backend: defined({ type: spec.backend, mock: spec.mock, devFS: spec.devfs, pci: spec.pci }),
    sharing: sharingOf(spec.sharedDevNum),
    topology:
      spec.preferredAllocationPolicy === undefined
        ? undefined
        : { allocationPolicy: mapped(BETA_POLICY, spec.preferredAllocationPolicy) },
    nodeSelector: spec.nodeSelector,
    tolerations: spec.tolerations,
    plugin: Object.keys(plugin).length > 0 ? plugin : undefined,
    upgrade: spec.upgrade === undefined ? undefined : structuredClone(spec.upgrade),
    publish: spec.publish,
    dra: spec.dra === undefined ? undefined : structuredClone(spec.dra),
    takeover: spec.takeover === undefined ? undefined : structuredClone(spec.takeover),
    nodeLabels: spec.nodeLabels === undefined ? undefined : structuredClone(spec.nodeLabels),
  });
}

/** DevFS fields v1alpha1 lacks (ADR 0010): they travel in the annotation. */
const V1BETA1_ONLY_DEVFS_FIELDS = ["sysfsRoot", "pciVendor", "groupBy", "sharedPaths"] as const;
/** PCI selectors v1alpha1 lacks: they travel in the annotation. */
const V1BETA1_ONLY_PCI_FIELDS = ["drivers", "physicalFunctions"] as const;

/** A backend member without the fields only v1beta1 has; anything not an object passes as it is. */
function alphaMember<T>(member: T, betaOnly: readonly string[]): T {
  if (!isJsonObject(member)) return member;
  return Object.fromEntries(Object.entries(member).filter(([key]) => !betaOnly.includes(key))) as T;
}

/** The v1alpha1 spec that says as much of a v1beta1 spec as it can. Total over odd shapes too. */
function alphaSpecOf(spec: BetaSpec): AlphaSpec {
  const backend = objectOrEmpty(spec.backend);
  const topology = objectOrEmpty(spec.topology);
  const plugin = objectOrEmpty(spec.plugin);
  return defined({
    resourceName: spec.resourceName,
    backend: backend.type as AlphaSpec["backend"],
    mock: backend.mock,
    devfs: alphaMember(backend.devFS, V1BETA1_ONLY_DEVFS_FIELDS),
    pci: alphaMember(backend.pci, V1BETA1_ONLY_PCI_FIELDS),
    sharedDevNum: sharedDevNumOf(spec.sharing),
    preferredAllocationPolicy:
      topology.allocationPolicy === undefined ? undefined : mapped(ALPHA_POLICY, topology.allocationPolicy),
    nodeSelector: spec.nodeSelector,
    tolerations: spec.tolerations,
    image: plugin.image,
    logLevel: plugin.logLevel,
    upgrade: isJsonObject(spec.upgrade) ? (structuredClone(spec.upgrade) as AlphaSpec["upgrade"]) : undefined,
    publish: spec.publish,
    dra: isJsonObject(spec.dra) ? (structuredClone(spec.dra) as AlphaSpec["dra"]) : undefined,
    takeover: isJsonObject(spec.takeover)
      ? (structuredClone(spec.takeover) as AlphaSpec["takeover"])
      : undefined,
    nodeLabels: isJsonObject(spec.nodeLabels)
      ? (structuredClone(spec.nodeLabels) as AlphaSpec["nodeLabels"])
      : undefined,
  });
}

/** Up-conversion of the fields both versions share; the annotation is dropped, not applied. */
function toBetaCore(alpha: AlphaObject): BetaObject {
  return defined({
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: withoutLostFields(alpha.metadata),
    spec: betaSpecOf(alpha.spec),
    status: structuredClone(alpha.status),
  });
}

/** Down-conversion of the fields both versions share; metadata is copied as it is. */
function toAlphaCore(beta: BetaObject): AlphaObject {
  return defined({
    apiVersion: V1ALPHA1_API_VERSION,
    kind: KIND,
    metadata: structuredClone(objectOrEmpty(beta.metadata)) as Metadata,
    spec: alphaSpecOf(objectOrEmpty(beta.spec) as BetaSpec),
    status: structuredClone(beta.status),
  });
}

/** The parts of an object the annotation may restore: never apiVersion or kind. */
const RESTORABLE_KEYS: ReadonlySet<string> = new Set(["metadata", "spec", "status"]);

/** The restorable parts of an object as plain JSON. */
function restorable(obj: { metadata?: unknown; spec?: unknown; status?: unknown }): JsonObject {
  return JSON.parse(
    JSON.stringify({ metadata: obj.metadata, spec: obj.spec, status: obj.status }),
  ) as JsonObject;
}

function fromRestorable(restored: unknown): BetaObject {
  const { metadata, spec, status } = objectOrEmpty(restored as JsonObject);
  return defined({ apiVersion: API_VERSION, kind: KIND, metadata, spec, status }) as unknown as BetaObject;
}

/**
 * What a v1alpha1 object says, for comparing two of them: everything but the annotation, and an empty
 * annotations map counts as none (whether v1beta1 had one is for the annotation to restore).
 */
function alphaMeaning(alpha: AlphaObject): AlphaObject {
  const metadata = withoutLostFields(alpha.metadata);
  if (isJsonObject(metadata.annotations) && Object.keys(metadata.annotations).length === 0) {
    delete metadata.annotations;
  }
  return { ...alpha, metadata };
}

/** The down-conversion of a restored object, or undefined when the annotation broke its shape. */
function safeAlphaMeaning(beta: BetaObject): AlphaObject | undefined {
  try {
    return alphaMeaning(toAlphaCore(beta));
  } catch {
    return undefined;
  }
}

/**
 * v1beta1 → v1alpha1. Never fails: what v1alpha1 cannot say goes into the annotation `dpo.dev/v1beta1-fields`
 * (absent when nothing is lost). A v1beta1 object that itself carries that annotation keeps it too.
 */
export function toV1alpha1(beta: BetaObject): AlphaObject {
  const core = toAlphaCore(beta);
  // A copy of the annotation on the v1beta1 object is data like any other: the lost fields restore it.
  const annotations = core.metadata.annotations;
  if (isJsonObject(annotations)) delete annotations[LOST_FIELDS_ANNOTATION];
  if (diffMergePatch(restorable(toBetaCore(core)), restorable(beta)) === undefined) return core;
  // Something is lost. Diff against what the up-conversion will start from: an object that carries the
  // annotation, whose annotations map goes away with it when it was the only key (so an empty map on the
  // v1beta1 object is recorded and comes back).
  const carrying = { ...core, metadata: withLostFields(core.metadata, "") };
  const lost = diffMergePatch(restorable(toBetaCore(carrying)), restorable(beta)) ?? {};
  return { ...core, metadata: withLostFields(core.metadata, canonicalJson(lost)) };
}

function objectName(obj: { metadata?: { name?: unknown } }): string {
  const name = obj.metadata?.name;
  return `DevicePluginConfig ${typeof name === "string" && name !== "" ? name : "<unnamed>"}`;
}

/** Parses the annotation: a JSON object, or a message saying why not. */
export function parseLostFields(
  value: string,
): { ok: true; patch: JsonObject } | { ok: false; error: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (err) {
    return { ok: false, error: `is not JSON (${(err as Error).message})` };
  }
  if (!isJsonObject(parsed)) return { ok: false, error: "is not a JSON object" };
  return { ok: true, patch: parsed };
}

/**
 * v1alpha1 → v1beta1: the mapped fields, then the annotation's fields restored and the annotation removed.
 * Fails, naming the object and the annotation, only when the annotation is not a JSON object. A restored
 * field that would change what the v1alpha1 fields say (a stale or copied annotation) is skipped with a
 * warning: the v1alpha1 fields win.
 */
export function toV1beta1(alpha: AlphaObject): ConversionResult<BetaObject> {
  const core = toBetaCore(alpha);
  const annotations = alpha.metadata.annotations;
  const raw = isJsonObject(annotations) ? annotations[LOST_FIELDS_ANNOTATION] : undefined;
  if (raw === undefined) return { ok: true, value: core, ignored: [], warnings: [] };
  const parsed = parseLostFields(raw);
  if (!parsed.ok) {
    const problem = `${parsed.error}; it must be the JSON object a conversion to v1alpha1 writes`;
    return {
      ok: false,
      error: `${objectName(alpha)}: annotation ${LOST_FIELDS_ANNOTATION} ${problem}`,
      problem,
    };
  }
  const meaning = alphaMeaning(alpha);
  const base = restorable(core);
  const whole = fromRestorable(applyMergePatch(base, parsed.patch));
  if (
    Object.keys(parsed.patch).every((k) => RESTORABLE_KEYS.has(k)) &&
    jsonEqual(safeAlphaMeaning(whole), meaning)
  ) {
    return { ok: true, value: whole, ignored: [], warnings: [] };
  }
  // Restore field by field, keeping only what leaves the v1alpha1 fields as they are.
  const ignored: IgnoredField[] = [];
  let restored: unknown = base;
  for (const leaf of patchLeaves(parsed.patch)) {
    const field = leaf.path.join(".");
    if (!RESTORABLE_KEYS.has(leaf.path[0] ?? "")) {
      ignored.push({ field, reason: "only metadata, spec and status are restored" });
      continue;
    }
    const next = applyMergePatch(restored, leafPatch(leaf));
    if (jsonEqual(safeAlphaMeaning(fromRestorable(next)), meaning)) restored = next;
    else ignored.push({ field, reason: "it contradicts the v1alpha1 fields" });
  }
  const warnings = ignored.map(
    (i) => `${objectName(alpha)}: annotation ${LOST_FIELDS_ANNOTATION}: ignored ${i.field} (${i.reason})`,
  );
  return { ok: true, value: fromRestorable(restored), ignored, warnings };
}
