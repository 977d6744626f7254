// Whether a DRA config's DeviceClass maps its extended resource name (KEP-5004), and the condition that
// says so: the name to render into spec.extendedResourceName, or why none is, and whether a switch from
// the device plugin path to DRA may start. Pure: the caller passes in what the API server showed.
import { checkExtendedResourceName } from "../../api/v1beta1/resource-name.js";
import type { FeatureCondition } from "./features.js";

/** True when pods asking for the config's extended resource are served through its DeviceClass. */
export const EXTENDED_RESOURCE_MAPPING = "ExtendedResourceMapping";

/** The condition's reasons, for users to grep and tests to name. */
export const EXTENDED_RESOURCE_REASONS = {
  mapped: "ExtendedResourceMapped",
  /** The API server drops DeviceClass spec.extendedResourceName: DRAExtendedResource is off (1.35 default). */
  unsupported: "ExtendedResourceUnsupported",
  /** Not known yet whether the API server keeps the field (no probe answered so far). */
  unknown: "ExtendedResourceSupportUnknown",
  /** resource.k8s.io/v1 is not served at all. */
  resourceApiUnavailable: "ResourceAPIUnavailable",
  /** The user turned the mapping off. */
  disabled: "ExtendedResourceMappingDisabled",
  invalidName: "InvalidExtendedResourceName",
} as const;

/**
 * The user's choice, `spec.dra.deviceClass.extendedResourceName`: undefined maps the config's
 * resourceName, a name maps that name instead, "" turns the mapping off.
 */
export type ExtendedResourceNameChoice = string | undefined;

/** The field that holds the choice, for messages. */
const CHOICE_FIELD = "spec.dra.deviceClass.extendedResourceName";

/** The user's choice in a spec. */
export function extendedResourceNameChoice(spec: {
  dra?: { deviceClass?: { extendedResourceName?: string | undefined } | undefined } | undefined;
}): ExtendedResourceNameChoice {
  return spec.dra?.deviceClass?.extendedResourceName;
}

export interface ExtendedResourceFacts {
  resourceName: string;
  /**
   * The config's publish mode. In DevicePlugin mode the condition says whether a switch to DRA could map
   * the name (no class exists yet); the default is DRA.
   */
  publish?: "DevicePlugin" | "DRA";
  choice?: ExtendedResourceNameChoice;
  /** Whether the API server serves resource.k8s.io/v1 (DeviceClasses). */
  resourceApiServed: boolean;
  /**
   * Whether the API server keeps DeviceClass spec.extendedResourceName when it is written: true or false
   * from a probe (extendedResourceNameKept), undefined while no probe has answered.
   */
  fieldKept: boolean | undefined;
}

export interface ExtendedResourceMapping {
  /** The name to render into the DeviceClass, or undefined to render none. */
  name: string | undefined;
  condition: FeatureCondition;
  /** Whether a switch of spec.publish to DRA may start: pods asking for the name need the mapping. */
  switchToDraMayStart: boolean;
}

const FIELD = "DeviceClass spec.extendedResourceName";

/**
 * What the DeviceClass maps, and the ExtendedResourceMapping condition. A switch to DRA may start only
 * when the mapping is in place (True): without it every pod asking for `<resourceName>: N` would stay
 * Pending on the nodes already switched. Turning the mapping off is the user's call and lets the switch
 * start (pods must then use ResourceClaims).
 */
export function extendedResourceMapping(facts: ExtendedResourceFacts): ExtendedResourceMapping {
  if (facts.choice === "") {
    return {
      name: undefined,
      switchToDraMayStart: true,
      condition: {
        type: EXTENDED_RESOURCE_MAPPING,
        status: "False",
        reason: EXTENDED_RESOURCE_REASONS.disabled,
        message: `${CHOICE_FIELD} is empty: the DeviceClass maps no extended resource, so pods must ask for these devices with ResourceClaims`,
      },
    };
  }
  const name = facts.choice ?? facts.resourceName;
  const problem = checkExtendedResourceName(name);
  if (problem !== undefined) {
    const field = facts.choice === undefined ? "spec.resourceName" : CHOICE_FIELD;
    return {
      name: undefined,
      switchToDraMayStart: false,
      condition: {
        type: EXTENDED_RESOURCE_MAPPING,
        status: "False",
        reason: EXTENDED_RESOURCE_REASONS.invalidName,
        message: `${field}: ${JSON.stringify(name)} ${problem}`,
      },
    };
  }
  if (!facts.resourceApiServed) {
    return {
      name: undefined,
      switchToDraMayStart: false,
      condition: {
        type: EXTENDED_RESOURCE_MAPPING,
        status: "False",
        reason: EXTENDED_RESOURCE_REASONS.resourceApiUnavailable,
        message: `the API server does not serve resource.k8s.io/v1, so no DeviceClass can map ${name}; the device plugin path keeps serving it`,
      },
    };
  }
  if (facts.fieldKept === undefined) {
    return {
      name: undefined,
      switchToDraMayStart: false,
      condition: {
        type: EXTENDED_RESOURCE_MAPPING,
        status: "Unknown",
        reason: EXTENDED_RESOURCE_REASONS.unknown,
        message: `not known yet whether the API server keeps ${FIELD}; a switch to DRA waits`,
      },
    };
  }
  if (!facts.fieldKept) {
    return {
      name: undefined,
      switchToDraMayStart: false,
      condition: {
        type: EXTENDED_RESOURCE_MAPPING,
        status: "False",
        reason: EXTENDED_RESOURCE_REASONS.unsupported,
        message:
          `the API server drops ${FIELD} (feature gate DRAExtendedResource is off: alpha and off by default in Kubernetes 1.35, ` +
          `on by default from 1.36, locked on in 1.37), so pods asking for ${name} cannot be served through DRA; ` +
          `the switch to DRA does not start and the device plugin path keeps serving`,
      },
    };
  }
  return {
    name,
    switchToDraMayStart: true,
    condition: {
      type: EXTENDED_RESOURCE_MAPPING,
      status: "True",
      reason: EXTENDED_RESOURCE_REASONS.mapped,
      message:
        facts.publish === "DevicePlugin"
          ? `spec.publish is DevicePlugin, so the device plugin serves ${name}; the API server keeps ${FIELD}, so after a switch to DRA the DeviceClass maps it and pods asking for it keep working`
          : `the DeviceClass maps ${name}: pods asking for it are given devices through DRA`,
    },
  };
}

/** The DeviceClass spec as far as this probe reads it. */
interface ClassWithName {
  spec?: { extendedResourceName?: unknown };
}

/**
 * What a write of a DeviceClass shows about the API server: `sent` is what was written, `stored` what it
 * answered (a create, an update, or a server-side dry run). The server drops the field silently when its
 * DRAExtendedResource gate is off, so the answer is the only evidence. Undefined when `sent` carried no
 * name (nothing learnt).
 */
export function extendedResourceNameKept(sent: ClassWithName, stored: ClassWithName): boolean | undefined {
  const wanted = sent.spec?.extendedResourceName;
  if (typeof wanted !== "string") return undefined;
  return stored.spec?.extendedResourceName === wanted;
}
