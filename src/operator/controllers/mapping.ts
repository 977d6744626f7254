// Which DevicePluginConfigs an event concerns: pure functions from watched objects to config names.
import type { V1Node, V1ObjectMeta, V1OwnerReference } from "@kubernetes/client-node";
import { KIND } from "../../api/v1beta1/config.js";
import { draDeviceClassName } from "../../api/v1beta1/spec.js";
import { configLabelValue, LABEL_CONFIG } from "../../contract/names.js";
import type { SlimResourceSlice } from "../status/published-devices.js";
import { nodeMeetsAll, type Requirement } from "../model/node-terms.js";
import { nodeMatchesSelector } from "../model/targeting.js";
import { configsMarkedOn } from "../upgrade/node-marks.js";
import type { CachedDeviceClass, StoredConfig } from "./reconciler-deps.js";

/** The owner reference to a DevicePluginConfig on an object, if any. */
function configOwner(meta: V1ObjectMeta | undefined): V1OwnerReference | undefined {
  return meta?.ownerReferences?.find((o) => o.kind === KIND && o.apiVersion.startsWith("dpo.dev/"));
}

/** The uid of the DevicePluginConfig that owns an object, if any. */
export function ownerUid(object: { metadata?: V1ObjectMeta | undefined }): string | undefined {
  return configOwner(object.metadata)?.uid;
}

/** The DevicePluginConfig that owns an object (ConfigMap, DaemonSet, DeviceNodeState), if any. */
export function ownerConfigName(meta: V1ObjectMeta | undefined): string | undefined {
  return configOwner(meta)?.name;
}

function readyStatus(node: V1Node | undefined): string | undefined {
  return node?.status?.conditions?.find((c) => c.type === "Ready")?.status;
}

function sameJSON(a: unknown, b: unknown): boolean {
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
}

/**
 * True when a Node update can change a config's status or placement: labels, taints, schedulability,
 * the Ready condition, or capacity/allocatable of an extended resource. Heartbeats (condition times,
 * images, addresses) are not, and at 1000 nodes they are most of the updates.
 */
export function nodeChangeMatters(old: V1Node | undefined, cur: V1Node | undefined): boolean {
  if (!old || !cur) return true;
  return (
    !sameJSON(old.metadata?.labels, cur.metadata?.labels) ||
    !sameJSON(old.spec?.taints, cur.spec?.taints) ||
    old.spec?.unschedulable !== cur.spec?.unschedulable ||
    old.status?.nodeInfo?.kubeletVersion !== cur.status?.nodeInfo?.kubeletVersion ||
    readyStatus(old) !== readyStatus(cur) ||
    !sameJSON(old.status?.capacity, cur.status?.capacity) ||
    !sameJSON(old.status?.allocatable, cur.status?.allocatable)
  );
}

/** The configs the mapping reads: the config informer's cache, or anything that looks the same. */
export interface ConfigLookup {
  get(name: string): StoredConfig | undefined;
  list(): StoredConfig[];
}

/** The stored spec's nodeSelector, read without validating the whole spec (this runs per node event). */
export function specNodeSelector(obj: StoredConfig): Record<string, string> {
  const selector = (obj.spec as { nodeSelector?: unknown } | undefined)?.nodeSelector;
  return selector !== null && typeof selector === "object" ? (selector as Record<string, string>) : {};
}

/**
 * The stored spec's nodeSelectorTerm expressions that are well formed, read without validating the whole
 * spec; a malformed one is left out, which only widens the nodes the config is woken for.
 */
export function specMatchExpressions(obj: StoredConfig): Requirement[] {
  const term = (obj.spec as { nodeSelectorTerm?: { matchExpressions?: unknown } } | undefined)
    ?.nodeSelectorTerm;
  const list = term?.matchExpressions;
  if (!Array.isArray(list)) return [];
  return list.filter(
    (r): r is Requirement =>
      typeof r === "object" &&
      r !== null &&
      typeof (r as Requirement).key === "string" &&
      typeof (r as Requirement).operator === "string" &&
      ((r as Requirement).values === undefined ||
        (Array.isArray((r as Requirement).values) &&
          (r as Requirement).values!.every((v) => typeof v === "string"))),
  );
}

/** The stored spec's resourceName, read without validating the whole spec. */
export function specResourceName(obj: StoredConfig | undefined): string | undefined {
  const spec = obj?.spec as { resourceName?: unknown } | undefined;
  return typeof spec?.resourceName === "string" ? spec.resourceName : undefined;
}

/** The DeviceClass name a stored spec asks for in DRA mode, read without validating the whole spec. */
export function specDeviceClassName(obj: StoredConfig): string | undefined {
  const spec = obj.spec as
    | {
        publish?: unknown;
        resourceName?: unknown;
        dra?: { driverName?: string; deviceClass?: { name?: string; selectors?: [] } };
      }
    | undefined;
  if (spec?.publish !== "DRA" || typeof spec.resourceName !== "string") return undefined;
  return draDeviceClassName({
    resourceName: spec.resourceName,
    dra: {
      ...(spec.dra?.driverName !== undefined ? { driverName: spec.dra.driverName } : {}),
      deviceClass: {
        ...(spec.dra?.deviceClass?.name !== undefined ? { name: spec.dra.deviceClass.name } : {}),
        selectors: [],
      },
    },
  });
}

function names(configs: readonly StoredConfig[]): string[] {
  return configs.flatMap((c) => (c.metadata?.name ? [c.metadata.name] : []));
}

/** Configs sharing a resource name decide conflicts together: a change to one concerns them all. */
export function configsSharingResource(configs: ConfigLookup, resourceName: string | undefined): string[] {
  if (!resourceName) return [];
  return names(configs.list().filter((c) => specResourceName(c) === resourceName));
}

/**
 * The kind of the CDI spec a stored spec's plugin writes (cdiSpecKindOf), read without validating the
 * whole spec; undefined when it writes none.
 */
export function specCdiKind(obj: StoredConfig | undefined): string | undefined {
  const spec = obj?.spec as {
    publish?: unknown;
    resourceName?: unknown;
    cdi?: { enabled?: unknown; kind?: unknown };
  };
  if (spec?.publish === "DRA" || spec?.cdi?.enabled !== true) return undefined;
  const kind = spec.cdi.kind ?? spec.resourceName;
  return typeof kind === "string" ? kind : undefined;
}

/** Configs writing CDI specs of one kind decide the kind's conflicts together (cdiKindConflict). */
export function configsSharingCdiKind(configs: ConfigLookup, kind: string | undefined): string[] {
  if (!kind) return [];
  return names(configs.list().filter((c) => specCdiKind(c) === kind));
}

/**
 * A config and those sharing its resource name or its CDI kind: what a change to that config concerns.
 * With many configs, not every change wakes every config.
 */
export function configsForConfig(configs: ConfigLookup, config: StoredConfig): string[] {
  return [
    ...names([config]),
    ...configsSharingResource(configs, specResourceName(config)),
    ...configsSharingCdiKind(configs, specCdiKind(config)),
  ];
}

/**
 * A node change concerns the configs that select the node before or after it (and, for conflicts, the
 * configs sharing their resource name); with many configs, not every node event wakes every config.
 */
export function configsForNode(
  configs: ConfigLookup,
  old: V1Node | undefined,
  cur: V1Node | undefined,
): string[] {
  const concerned: string[] = [];
  for (const config of configs.list()) {
    const selector = specNodeSelector(config);
    const expressions = specMatchExpressions(config);
    const selects = (node: V1Node | undefined) =>
      node !== undefined && nodeMatchesSelector(node, selector) && nodeMeetsAll(node, expressions);
    if (selects(old) || selects(cur)) {
      concerned.push(...configsForConfig(configs, config));
    }
  }
  // The configs the node carries any mark of (NODE_MARKS: labels, the upgrade record, the Replace fence), a
  // deleted one's included (for names up to 63 characters the key's end is the name), whose reconcile takes
  // the marks off.
  for (const value of cur ? configsMarkedOn(cur) : [])
    concerned.push(configForLabel(configs, value) ?? value);
  return concerned;
}

/**
 * The config whose `dpo.dev/config` label value this is: the config of that name when its label is its
 * name, else the one whose (long, hashed) name gives the value.
 */
export function configForLabel(configs: ConfigLookup, value: string | undefined): string | undefined {
  if (!value) return undefined;
  if (configs.get(value) && configLabelValue(value) === value) return value;
  return configs.list().find((c) => configLabelValue(c.metadata?.name ?? "") === value)?.metadata?.name;
}

/**
 * A slice concerns the config of its label; a label no config has is a deleted config's (for names up to
 * 63 characters the label is the name), whose reconcile deletes the slice.
 */
export function configForSlice(configs: ConfigLookup, slice: SlimResourceSlice): string | undefined {
  const label = slice.metadata.labels?.[LABEL_CONFIG];
  if (!label) return undefined;
  return configForLabel(configs, label) ?? label;
}

/** A DeviceClass concerns its owner, and the configs that want its name (a namesake came or went). */
export function configsForDeviceClass(configs: ConfigLookup, cls: CachedDeviceClass): string[] {
  const owner = ownerConfigName(cls.metadata);
  const name = cls.metadata?.name;
  const wanting =
    name === undefined ? [] : names(configs.list().filter((c) => specDeviceClassName(c) === name));
  return [...(owner ? [owner] : []), ...wanting];
}

/**
 * Whether a config update needs a reconcile. Our own status writes come back as updates and change
 * nothing; the spec (generation), labels, deletion, or a status someone else wrote do.
 */
export function configUpdateMatters(
  old: StoredConfig,
  cur: StoredConfig,
  isOwnStatus: (name: string, status: unknown) => boolean,
): boolean {
  const specChanged = old.metadata?.generation !== cur.metadata?.generation;
  const labelsChanged = JSON.stringify(old.metadata?.labels) !== JSON.stringify(cur.metadata?.labels);
  const foreignStatus =
    JSON.stringify(old.status) !== JSON.stringify(cur.status) &&
    !isOwnStatus(cur.metadata?.name ?? "", cur.status);
  return (
    specChanged ||
    labelsChanged ||
    foreignStatus ||
    old.metadata?.deletionTimestamp !== cur.metadata?.deletionTimestamp
  );
}
