// Converts a zod schema into the structural OpenAPI v3 schema a CustomResourceDefinition carries, refusing
// what the API server would reject rather than emitting a CRD whose schema differs from zod's.
import { z } from "zod";
import { CEL_RULES_KEY, type CelRule } from "../v1beta1/cel.crd.js";
import { re2Incompatibility } from "./re2.js";

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

/** A schema node with its keys in code-point order, so equal schemas render as equal YAML. */
export function sortKeys(schema: StructuralSchema): StructuralSchema {
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
