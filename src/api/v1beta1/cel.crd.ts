// Kubernetes schema extensions (CEL rules, list types) attached to the zod schemas with `.meta()` for the CRDs.

/** How the API server reports a failed rule; the default is FieldValueInvalid ("Invalid value"). */
export type CelReason =
  "FieldValueInvalid" | "FieldValueForbidden" | "FieldValueRequired" | "FieldValueDuplicate";

/**
 * One `x-kubernetes-validations` entry. `fieldPath` (relative to the node carrying the rule, e.g.
 * `.replicas`) makes the API server name the same field as `dpo validate` does.
 */
export interface CelRule {
  rule: string;
  message?: string;
  messageExpression?: string;
  fieldPath?: string;
  reason?: CelReason;
  /** Transition rules (`oldSelf`) also run on create when set, with oldSelf an optional. */
  optionalOldSelf?: boolean;
}

export const CEL_RULES_KEY = "x-kubernetes-validations";

/** Metadata carrying CEL rules; zod's JSON Schema output copies it onto the schema node. */
export function celRules(...rules: CelRule[]): { [CEL_RULES_KEY]: CelRule[] } {
  return { [CEL_RULES_KEY]: rules };
}

/**
 * Metadata making a list of objects a map keyed by `keys`, so server-side apply merges its items by
 * key (several writers can own different conditions) and duplicates are refused.
 */
export function listMapKeys(...keys: [string, ...string[]]): {
  "x-kubernetes-list-type": "map";
  "x-kubernetes-list-map-keys": string[];
} {
  return { "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": keys };
}
