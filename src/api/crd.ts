// Generates the apiextensions.k8s.io/v1 CustomResourceDefinitions of the dpo.dev API from its zod schemas.
import { stringify } from "yaml";
import { z } from "zod";
import { CEL_RULES_KEY, type CelRule } from "./v1beta1/cel.crd.js";
import { GROUP, KIND, PLURAL, VERSION } from "./v1beta1/config.js";
import {
  DEVICE_NODE_STATE_KIND,
  DEVICE_NODE_STATE_PLURAL,
  DeviceNodeStateSpecSchema,
  DeviceNodeStateStatusSchema,
} from "./v1beta1/devicenodestate.js";
import { DevicePluginConfigSpecSchema } from "./v1beta1/spec.js";
import { DevicePluginConfigStatusSchema } from "./v1beta1/status.js";
import { DevicePluginConfigStatusV1alpha1Schema, V1ALPHA1 } from "./v1alpha1/config.js";
import { DevicePluginConfigSpecV1alpha1Schema } from "./v1alpha1/spec.js";

export type SchemaType = "object" | "array" | "string" | "integer" | "number" | "boolean";

/**
 * A node of a structural OpenAPI v3 schema as the API server accepts it in a CRD: a type on every
 * node, no unions or references, and either `properties` or `additionalProperties`, never both.
 */
export interface StructuralSchema {
  /** Absent only with `x-kubernetes-int-or-string`. */
  type?: SchemaType;
  "x-kubernetes-int-or-string"?: true;
  description?: string;
  format?: string;
  nullable?: boolean;
  default?: unknown;
  enum?: unknown[];
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  multipleOf?: number;
  minItems?: number;
  maxItems?: number;
  minProperties?: number;
  maxProperties?: number;
  properties?: Record<string, StructuralSchema>;
  required?: string[];
  additionalProperties?: StructuralSchema;
  items?: StructuralSchema;
  "x-kubernetes-list-type"?: "atomic" | "set" | "map";
  "x-kubernetes-list-map-keys"?: string[];
  "x-kubernetes-map-type"?: "granular" | "atomic";
  "x-kubernetes-validations"?: CelRule[];
}

export interface PrinterColumn {
  name: string;
  type: "string" | "integer" | "number" | "boolean" | "date";
  jsonPath: string;
  description?: string;
  priority?: number;
}

export interface CustomResourceDefinitionVersion {
  name: string;
  served: boolean;
  storage: boolean;
  schema: { openAPIV3Schema: StructuralSchema };
  subresources?: { status?: Record<string, never> };
  additionalPrinterColumns?: PrinterColumn[];
}

/** Where the API server sends ConversionReviews: a Service in the cluster, or a URL (local runs, tests). */
export type WebhookClientConfig =
  | { service: { namespace: string; name: string; path: string; port: number }; caBundle?: string }
  | { url: string; caBundle?: string };

export interface CustomResourceConversion {
  strategy: "None" | "Webhook";
  webhook?: { conversionReviewVersions: string[]; clientConfig: WebhookClientConfig };
}

export interface CustomResourceDefinition {
  apiVersion: "apiextensions.k8s.io/v1";
  kind: "CustomResourceDefinition";
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: {
    group: string;
    names: {
      kind: string;
      listKind: string;
      plural: string;
      singular: string;
      shortNames?: string[];
      categories?: string[];
    };
    scope: "Cluster" | "Namespaced";
    versions: CustomResourceDefinitionVersion[];
    conversion?: CustomResourceConversion;
  };
}

/** A zod construct the generator cannot express as a structural schema, located by its path. */
export class CrdSchemaError extends Error {
  constructor(
    readonly schemaPath: string,
    problem: string,
  ) {
    super(`${schemaPath}: ${problem}`);
    this.name = "CrdSchemaError";
  }
}

/** Formats the API server validates `format` against; anything else is refused or ignored by it. */
const KUBERNETES_FORMATS = new Set([
  "int32",
  "int64",
  "float",
  "double",
  "byte",
  "date",
  "date-time",
  "datetime",
  "duration",
  "uri",
  "email",
  "hostname",
  "ipv4",
  "ipv6",
  "cidr",
  "mac",
  "uuid",
]);

/** RE2 (Go regexp) escapes; JS escapes outside this set (\u, \c, \k, backreferences) do not compile there. */
const RE2_ESCAPE_LETTERS = new Set("aAbBdDfnrsStvwWzxpPQE".split(""));
/** RE2 refuses repetition counts above this. */
const RE2_MAX_REPEAT = 1000;

/**
 * Why a pattern would not compile with Go's regexp (RE2), which the API server uses for `pattern`
 * and CEL `matches()`, or undefined when it does: no lookarounds, atomic groups, backreferences or
 * JS-only escapes, and no repetition counts above 1000.
 */
export function re2Incompatibility(pattern: string): string | undefined {
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "\\") {
      const next = pattern[i + 1] ?? "";
      if (/[1-9]/.test(next) && !inClass) return `backreference \\${next} at ${i}`;
      if (/[A-Za-z]/.test(next) && !RE2_ESCAPE_LETTERS.has(next)) return `escape \\${next} at ${i}`;
      i++;
    } else if (inClass) {
      if (c === "]") inClass = false;
    } else if (c === "[") {
      inClass = true;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (pattern[i + 1] === "^") i++;
      if (pattern[i + 1] === "]") i++;
    } else if (c === "(" && pattern[i + 1] === "?") {
      const rest = pattern.slice(i + 2);
      if (rest.startsWith("=") || rest.startsWith("!")) return `lookahead at ${i}`;
      if (rest.startsWith("<=") || rest.startsWith("<!")) return `lookbehind at ${i}`;
      if (rest.startsWith(">")) return `atomic group at ${i}`;
    } else if (c === "{") {
      const repeat = /^\{(\d+)(,(\d*))?\}/.exec(pattern.slice(i));
      const counts = [repeat?.[1], repeat?.[3]].filter((n): n is string => n !== undefined && n !== "");
      if (counts.some((n) => Number(n) > RE2_MAX_REPEAT))
        return `repetition count above ${RE2_MAX_REPEAT} at ${i}`;
    }
  }
  return undefined;
}

type JsonObject = Record<string, unknown>;

function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function celString(text: string): string {
  return `'${text.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
}

function numberAt(node: JsonObject, key: string, path: string): number {
  const value = node[key];
  if (typeof value !== "number") throw new CrdSchemaError(path, `${key} is not a number`);
  return value;
}

/** Map keys cannot be constrained by a structural schema; zod's key checks become CEL rules over the keys. */
function keyRules(propertyNames: unknown, path: string): CelRule[] {
  if (!isJsonObject(propertyNames)) throw new CrdSchemaError(path, "propertyNames is not a schema");
  const rules: CelRule[] = [];
  for (const [key, value] of Object.entries(propertyNames)) {
    if (key === "type" && value === "string") continue;
    if (key === "maxLength") {
      const max = numberAt(propertyNames, key, path);
      rules.push({
        rule: `self.all(k, size(k) <= ${max})`,
        message: `keys must be at most ${max} characters`,
      });
    } else if (key === "minLength") {
      const min = numberAt(propertyNames, key, path);
      rules.push({
        rule: `self.all(k, size(k) >= ${min})`,
        message: `keys must be at least ${min} characters`,
      });
    } else if (key === "pattern" && typeof value === "string") {
      const problem = re2Incompatibility(value);
      if (problem) throw new CrdSchemaError(path, `key pattern ${value} is not RE2: ${problem}`);
      rules.push({
        rule: `self.all(k, k.matches(${celString(value)}))`,
        message: `keys must match ${value}`,
      });
    } else {
      throw new CrdSchemaError(path, `propertyNames.${key} has no structural equivalent`);
    }
  }
  return rules;
}

function jsonTypeOf(value: unknown): SchemaType | "null" | undefined {
  if (value === null) return "null";
  if (typeof value === "string") return "string";
  if (typeof value === "boolean") return "boolean";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  if (Array.isArray(value)) return "array";
  if (isJsonObject(value)) return "object";
  return undefined;
}

const SCHEMA_TYPES: readonly string[] = ["object", "array", "string", "integer", "number", "boolean"];

function isSchemaType(value: unknown): value is SchemaType {
  return typeof value === "string" && SCHEMA_TYPES.includes(value);
}

/** Type of a node: its own, or for `const`/`enum` without one, the type of its values. */
function nodeType(node: JsonObject, path: string): { type: SchemaType; nullable: boolean } {
  const declared = node.type;
  if (isSchemaType(declared)) return { type: declared, nullable: false };
  if (Array.isArray(declared)) {
    const types = (declared as unknown[]).filter((t) => t !== "null");
    const [only] = types;
    if (types.length === 1 && isSchemaType(only))
      return { type: only, nullable: types.length < declared.length };
    throw new CrdSchemaError(path, `type ${JSON.stringify(declared)}: ${UNION_PROBLEM}`);
  }
  if (declared !== undefined)
    throw new CrdSchemaError(path, `type ${JSON.stringify(declared)} is not supported`);
  const values = "const" in node ? [node.const] : Array.isArray(node.enum) ? node.enum : [];
  const types = new Set(values.map(jsonTypeOf).filter((t) => t !== "null"));
  const [only] = [...types];
  if (types.size === 1 && isSchemaType(only)) return { type: only, nullable: values.includes(null) };
  throw new CrdSchemaError(path, "has no type (z.unknown() and z.any() are not structural)");
}

const UNION_PROBLEM = "unions are not structural: use a `type` discriminator with optional members";

/** `anyOf: [X, {type: null}]` is how zod writes `.nullable()` on some schemas; other unions are refused. */
function unwrapNullable(node: JsonObject, path: string): { node: JsonObject; nullable: boolean } {
  const branches = node.anyOf;
  if (branches === undefined) return { node, nullable: node.nullable === true };
  if (!Array.isArray(branches)) throw new CrdSchemaError(path, "anyOf is not a list");
  const nonNull = (branches as unknown[]).filter((b) => !(isJsonObject(b) && b.type === "null"));
  const [inner] = nonNull;
  if (nonNull.length !== 1 || nonNull.length === branches.length || !isJsonObject(inner)) {
    throw new CrdSchemaError(path, UNION_PROBLEM);
  }
  const outer = Object.fromEntries(Object.entries(node).filter(([key]) => key !== "anyOf"));
  return { node: { ...inner, ...outer }, nullable: true };
}

/** Keys zod emits that a CRD does not carry: the dialect marker, and `additionalProperties: false` (unknown fields are pruned, or refused with fieldValidation=Strict). */
const IGNORED_KEYS = new Set([
  "$schema",
  "anyOf",
  "nullable",
  "type",
  "const",
  "enum",
  "additionalProperties",
]);

function sortKeys(schema: StructuralSchema): StructuralSchema {
  const entries = Object.entries(schema).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(entries);
}

const INT_OR_STRING = "x-kubernetes-int-or-string";

/**
 * A union of an integer and a string marked `x-kubernetes-int-or-string` (like a DaemonSet's
 * maxUnavailable): the one union a structural schema allows. The branches' own bounds cannot be said
 * without a type, so the marked schema must carry CEL rules that check them.
 */
function intOrString(node: JsonObject, path: string): StructuralSchema {
  const branches = node.anyOf;
  const types = Array.isArray(branches)
    ? (branches as unknown[]).map((b) => (isJsonObject(b) ? b.type : undefined)).sort()
    : [];
  if (JSON.stringify(types) !== JSON.stringify(["integer", "string"])) {
    throw new CrdSchemaError(path, `${INT_OR_STRING} needs a union of an integer and a string`);
  }
  const rules = node[CEL_RULES_KEY];
  if (!Array.isArray(rules) || rules.length === 0) {
    throw new CrdSchemaError(path, `${INT_OR_STRING} needs CEL rules for the bounds of its branches`);
  }
  const out: StructuralSchema = {
    [INT_OR_STRING]: true,
    [CEL_RULES_KEY]: (rules as CelRule[]).map((rule) => ({ ...rule })),
  };
  if (typeof node.description === "string") out.description = node.description;
  if ("default" in node) out.default = structuredClone(node.default);
  return sortKeys(out);
}

/**
 * Converts one node of zod's JSON Schema (draft 2020-12) output into a structural schema node,
 * refusing what the API server would reject rather than emitting a CRD that differs from zod.
 */
function toStructural(raw: unknown, path: string): StructuralSchema {
  if (!isJsonObject(raw)) throw new CrdSchemaError(path, "is not a schema object");
  if ("$ref" in raw) throw new CrdSchemaError(path, "$ref is not allowed: the schema must be inlined");
  if (raw[INT_OR_STRING] === true) return intOrString(raw, path);
  const { node, nullable: unionNullable } = unwrapNullable(raw, path);
  const { type, nullable: typeNullable } = nodeType(node, path);
  const out: StructuralSchema = { type };
  if (unionNullable || typeNullable) out.nullable = true;
  if ("const" in node) out.enum = [structuredClone(node.const)];
  if (Array.isArray(node.enum)) {
    out.enum = (node.enum as unknown[]).filter((v) => v !== null).map((v) => structuredClone(v));
  }

  for (const [key, value] of Object.entries(node)) {
    if (IGNORED_KEYS.has(key)) continue;
    switch (key) {
      case "description":
      case "format":
        if (typeof value !== "string") throw new CrdSchemaError(path, `${key} is not a string`);
        if (key === "format" && !KUBERNETES_FORMATS.has(value)) {
          throw new CrdSchemaError(path, `format ${value} is not one the API server knows`);
        }
        out[key] = value;
        break;
      case "pattern": {
        if (typeof value !== "string") throw new CrdSchemaError(path, "pattern is not a string");
        const problem = re2Incompatibility(value);
        if (problem) throw new CrdSchemaError(path, `pattern ${value} is not RE2 (Go regexp): ${problem}`);
        out.pattern = value;
        break;
      }
      case "minimum":
      case "maximum":
        // Kept even when it is only zod's `.int()` bound, ±(2^53 - 1): the API server would take any int64,
        // and a larger integer read by the operator (JSON.parse) is no longer the one that was written.
        out[key] = numberAt(node, key, path);
        break;
      case "exclusiveMinimum":
      case "exclusiveMaximum": {
        const bound = numberAt(node, key, path);
        out[key === "exclusiveMinimum" ? "minimum" : "maximum"] = bound;
        out[key] = true;
        break;
      }
      case "minLength":
      case "maxLength":
      case "minItems":
      case "maxItems":
      case "minProperties":
      case "maxProperties":
      case "multipleOf":
        out[key] = numberAt(node, key, path);
        break;
      case "default":
        out.default = structuredClone(value);
        break;
      case "properties": {
        if (!isJsonObject(value)) throw new CrdSchemaError(path, "properties is not an object");
        const properties: Record<string, StructuralSchema> = {};
        for (const [name, child] of Object.entries(value)) {
          properties[name] = toStructural(child, `${path}.${name}`);
        }
        // An empty object stays empty: the API server prunes every field, as zod strips them.
        if (Object.keys(properties).length > 0) out.properties = properties;
        break;
      }
      case "required":
        if (!Array.isArray(value) || !value.every((v) => typeof v === "string")) {
          throw new CrdSchemaError(path, "required is not a list of names");
        }
        if (value.length > 0) out.required = [...value];
        break;
      case "prefixItems":
        throw new CrdSchemaError(path, "tuples are not structural");
      case "items":
        if (Array.isArray(value)) throw new CrdSchemaError(path, "tuples are not structural");
        out.items = toStructural(value, `${path}[*]`);
        break;
      case "propertyNames": {
        const rules = keyRules(value, path);
        if (rules.length > 0) out[CEL_RULES_KEY] = [...(out[CEL_RULES_KEY] ?? []), ...rules];
        break;
      }
      case CEL_RULES_KEY:
        if (!Array.isArray(value)) throw new CrdSchemaError(path, `${CEL_RULES_KEY} is not a list`);
        out[CEL_RULES_KEY] = [
          ...(value as CelRule[]).map((rule) => ({ ...rule })),
          ...(out[CEL_RULES_KEY] ?? []),
        ];
        break;
      case "x-kubernetes-list-type":
      case "x-kubernetes-map-type":
        out[key] = value as never;
        break;
      case "x-kubernetes-list-map-keys":
        out[key] = [...(value as string[])];
        break;
      default:
        throw new CrdSchemaError(path, `keyword ${key} has no structural equivalent`);
    }
  }

  const additional = node.additionalProperties;
  if (additional === true || (isJsonObject(additional) && Object.keys(additional).length === 0)) {
    throw new CrdSchemaError(
      path,
      "an open object (additionalProperties: true) would need x-kubernetes-preserve-unknown-fields",
    );
  }
  if (isJsonObject(additional)) {
    if (out.properties) throw new CrdSchemaError(path, "has both properties and additionalProperties");
    out.additionalProperties = toStructural(additional, `${path}.*`);
  }
  if (type === "array" && out.items === undefined) throw new CrdSchemaError(path, "an array needs items");
  return sortKeys(out);
}

/** The structural schema of a zod schema as the API server sees input: defaults filled in, not required. */
export function structuralSchemaOf(schema: z.ZodType, path: string): StructuralSchema {
  const jsonSchema = z.toJSONSchema(schema, {
    io: "input",
    target: "draft-2020-12",
    reused: "inline",
    cycles: "throw",
    unrepresentable: "throw",
  });
  return toStructural(jsonSchema, path);
}

/** The root of a CRD schema, following the conventions kubectl explain and other tools expect. */
function objectSchema(
  description: string,
  spec: StructuralSchema,
  status: StructuralSchema,
): StructuralSchema {
  return sortKeys({
    type: "object",
    description,
    required: ["spec"],
    properties: {
      apiVersion: sortKeys({
        type: "string",
        description:
          "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values.",
      }),
      kind: sortKeys({
        type: "string",
        description:
          "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. In CamelCase.",
      }),
      metadata: { type: "object" },
      spec,
      status,
    },
  });
}

function withDescription(schema: StructuralSchema, description: string): StructuralSchema {
  return sortKeys({ ...schema, description: schema.description ?? description });
}

/**
 * The status a config has until the operator first writes one. The API server applies schema defaults
 * whenever it reads an object from etcd, so a config nobody has reconciled yet is served with
 * observedGeneration 0, below its generation: kstatus (what Flux reads) then says InProgress ("generation
 * is 1, but latest observed generation is 0"), as config/argocd/health.lua says Progressing. Without it
 * kstatus finds no status and no conditions and calls the config Current ("Resource is current").
 */
export const UNOBSERVED_STATUS = { observedGeneration: 0 } as const;

function configStatusSchema(schema: z.ZodType): StructuralSchema {
  return sortKeys({
    ...withDescription(structuralSchemaOf(schema, "status"), STATUS_DESCRIPTION),
    default: { ...UNOBSERVED_STATUS },
  });
}

const READY = `.status.conditions[?(@.type=="Ready")]`;

/** The columns both versions show from the status, which they share. */
const STATUS_COLUMNS: readonly PrinterColumn[] = [
  {
    name: "Nodes",
    type: "string",
    jsonPath: ".status.nodes.summary",
    description: "Nodes with a ready plugin / nodes the config targets.",
  },
  {
    name: "Devices",
    type: "string",
    jsonPath: ".status.devices.summary",
    description: "Allocatable / capacity, summed over the nodes as the kubelets advertise them.",
  },
  { name: "Unhealthy", type: "integer", jsonPath: ".status.devices.unhealthy" },
  {
    name: "Updated",
    type: "string",
    jsonPath: ".status.upgrade.summary",
    description: "Nodes whose kubelet advertises the current plugin revision / nodes the upgrade targets.",
  },
  { name: "Ready", type: "string", jsonPath: `${READY}.status` },
  { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
];

/** In `-o wide` of both versions: the status is shared, so is the column. */
const ALLOCATED_COLUMN: PrinterColumn = {
  name: "Allocated",
  type: "integer",
  jsonPath: ".status.devices.allocated",
  description: "Devices the kubelets have given to containers, summed over the nodes.",
  priority: 1,
};

/** In `-o wide` of both versions: how the devices are offered (empty on an old v1alpha1 object: DevicePlugin). */
const PUBLISH_COLUMN: PrinterColumn = {
  name: "Mode",
  type: "string",
  jsonPath: ".spec.publish",
  description: "DevicePlugin (extended resource) or DRA (ResourceSlices).",
  priority: 1,
};

const REASON_COLUMN: PrinterColumn = {
  name: "Reason",
  type: "string",
  jsonPath: `${READY}.reason`,
  priority: 1,
};

const CONFIG_DESCRIPTION =
  "DevicePluginConfig describes one extended resource, the backend that discovers its devices on the nodes, and how the bundled plugin advertises and shares them.";
const STATUS_DESCRIPTION =
  "What the operator observed: conditions, node counts, device totals and problem nodes.";

/** The CRD whose versions the operator's webhook converts. */
export const DEVICE_PLUGIN_CONFIG_CRD_NAME = `${PLURAL}.${GROUP}`;

/** The Service the conversion webhook is reached through in a cluster (config/webhook), before kustomize sets its namespace. */
export const CONVERSION_SERVICE = {
  namespace: "dpo-system",
  name: "dpo-webhook",
  path: "/convert",
  port: 443,
} as const;

/** The API server converts between the versions through the operator's webhook; only `v1` reviews are spoken. */
export function webhookConversion(clientConfig: WebhookClientConfig): CustomResourceConversion {
  return { strategy: "Webhook", webhook: { conversionReviewVersions: ["v1"], clientConfig } };
}

function v1beta1Version(): CustomResourceDefinitionVersion {
  return {
    name: VERSION,
    served: true,
    storage: true,
    subresources: { status: {} },
    additionalPrinterColumns: [
      { name: "Resource", type: "string", jsonPath: ".spec.resourceName" },
      { name: "Backend", type: "string", jsonPath: ".spec.backend.type" },
      ...STATUS_COLUMNS,
      ALLOCATED_COLUMN,
      { name: "Sharing", type: "string", jsonPath: ".spec.sharing.strategy", priority: 1 },
      { name: "Policy", type: "string", jsonPath: ".spec.topology.allocationPolicy", priority: 1 },
      PUBLISH_COLUMN,
      REASON_COLUMN,
    ],
    schema: {
      openAPIV3Schema: objectSchema(
        CONFIG_DESCRIPTION,
        withDescription(
          structuralSchemaOf(DevicePluginConfigSpecSchema, "spec"),
          "The desired plugin: resource name, backend, sharing, topology, the nodes it runs on.",
        ),
        configStatusSchema(DevicePluginConfigStatusSchema),
      ),
    },
  };
}

/**
 * The older, flatter v1alpha1: served so manifests written against it keep applying, never stored. Its
 * columns read its own field names; the status is v1beta1's.
 */
function v1alpha1Version(): CustomResourceDefinitionVersion {
  return {
    name: V1ALPHA1,
    served: true,
    storage: false,
    subresources: { status: {} },
    additionalPrinterColumns: [
      { name: "Resource", type: "string", jsonPath: ".spec.resourceName" },
      { name: "Backend", type: "string", jsonPath: ".spec.backend" },
      ...STATUS_COLUMNS,
      ALLOCATED_COLUMN,
      {
        name: "Shared",
        type: "integer",
        jsonPath: ".spec.sharedDevNum",
        description: "Containers per device.",
        priority: 1,
      },
      { name: "Policy", type: "string", jsonPath: ".spec.preferredAllocationPolicy", priority: 1 },
      PUBLISH_COLUMN,
      REASON_COLUMN,
    ],
    schema: {
      openAPIV3Schema: objectSchema(
        `${CONFIG_DESCRIPTION} v1alpha1 is the older API, converted to and stored as v1beta1; fields only v1beta1 has travel in the annotation dpo.dev/v1beta1-fields.`,
        withDescription(
          structuralSchemaOf(DevicePluginConfigSpecV1alpha1Schema, "spec"),
          "The desired plugin in the v1alpha1 shape: backend and its member at spec level, sharedDevNum, preferredAllocationPolicy.",
        ),
        configStatusSchema(DevicePluginConfigStatusV1alpha1Schema),
      ),
    },
  };
}

/**
 * The DevicePluginConfig CRD: cluster-scoped, `kubectl get dpc` shows what a user checks first. Served as
 * v1beta1 (stored) and v1alpha1, converted by the operator's webhook at `clientConfig` (the in-cluster
 * Service by default; the operator keeps its caBundle current).
 */
export function devicePluginConfigCrd(
  clientConfig: WebhookClientConfig = { service: { ...CONVERSION_SERVICE } },
): CustomResourceDefinition {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: DEVICE_PLUGIN_CONFIG_CRD_NAME },
    spec: {
      group: GROUP,
      names: {
        kind: KIND,
        listKind: `${KIND}List`,
        plural: PLURAL,
        singular: KIND.toLowerCase(),
        shortNames: ["dpc"],
        categories: ["devices"],
      },
      scope: "Cluster",
      versions: [v1beta1Version(), v1alpha1Version()],
      conversion: webhookConversion(clientConfig),
    },
  };
}

/** The DeviceNodeState CRD: one per config and node in the operator's namespace, written by the plugin. */
export function deviceNodeStateCrd(): CustomResourceDefinition {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${DEVICE_NODE_STATE_PLURAL}.${GROUP}` },
    spec: {
      group: GROUP,
      names: {
        kind: DEVICE_NODE_STATE_KIND,
        listKind: `${DEVICE_NODE_STATE_KIND}List`,
        plural: DEVICE_NODE_STATE_PLURAL,
        singular: DEVICE_NODE_STATE_KIND.toLowerCase(),
        shortNames: ["dnstate"],
        categories: ["devices"],
      },
      scope: "Namespaced",
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [
            { name: "Config", type: "string", jsonPath: ".spec.configName" },
            { name: "Node", type: "string", jsonPath: ".spec.nodeName" },
            { name: "Registration", type: "string", jsonPath: ".status.registration.state" },
            { name: "Healthy", type: "integer", jsonPath: ".status.healthy" },
            { name: "Advertised", type: "integer", jsonPath: ".status.advertised" },
            {
              name: "Allocated",
              type: "integer",
              jsonPath: ".status.allocated",
              description: "Devices the kubelet has given to containers (its PodResources API).",
            },
            { name: "Version", type: "string", jsonPath: ".status.pluginVersion" },
            { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
          ],
          schema: {
            openAPIV3Schema: objectSchema(
              "DeviceNodeState is the plugin's report of its node: registration with the kubelet and every device with its health.",
              withDescription(
                structuralSchemaOf(DeviceNodeStateSpecSchema, "spec"),
                "Which config and node this report is about.",
              ),
              withDescription(
                structuralSchemaOf(DeviceNodeStateStatusSchema, "status"),
                "The plugin's view of its node, written with server-side apply on /status.",
              ),
            ),
          },
        },
      ],
    },
  };
}

/** Every CRD of the API, in a fixed order. */
export function allCrds(): CustomResourceDefinition[] {
  return [devicePluginConfigCrd(), deviceNodeStateCrd()];
}

/** The conventional file name, `<group>_<plural>.yaml`. */
export function crdFileName(crd: CustomResourceDefinition): string {
  return `${crd.spec.group}_${crd.spec.names.plural}.yaml`;
}

/** One CRD as a YAML document; key order is the construction order, so output is byte-for-byte stable. */
export function renderCrdYaml(crd: CustomResourceDefinition): string {
  return stringify(crd, { lineWidth: 0, aliasDuplicateObjects: false });
}

/** Every CRD as one YAML stream, for `dpo crds | kubectl apply -f -`. */
export function renderCrdsYamlStream(): string {
  return allCrds()
    .map((crd) => `---\n${renderCrdYaml(crd)}`)
    .join("");
}
