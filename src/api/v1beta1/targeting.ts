// Node targeting beyond equality labels: one node selector term (matchExpressions, as in node affinity)
// and the priority that decides which of several configs of one resource name serves a node both match.
import { z } from "zod";
import { celRules } from "./cel.crd.js";
import { DNS_SUBDOMAIN, listOf } from "./fields.js";

export const NODE_SELECTOR_OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"] as const;
export type NodeSelectorOperator = (typeof NODE_SELECTOR_OPERATORS)[number];

/** The name part of a label key; the optional prefix before '/' is a DNS subdomain of at most 253. */
const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
export const LABEL_KEY_PATTERN =
  "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$";
/**
 * A Gt/Lt value: an integer of at most 18 digits. Kubernetes takes any int64; 18 digits keep the CEL rule
 * a pattern and let the operator negate a bound (x+1, x-1) without leaving int64.
 */
export const INTEGER_VALUE = /^-?[0-9]{1,18}$/;

/** A label key as ValidateLabelName checks it; a message for the first rule broken, else undefined. */
export function checkLabelKey(key: string): string | undefined {
  const slash = key.lastIndexOf("/");
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) {
    return `prefix '${prefix}' must be a lowercase DNS subdomain of at most 253 characters`;
  }
  if (name.length > 63 || !LABEL_NAME.test(name)) {
    return `name '${name}' must be at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric`;
  }
  return undefined;
}

const VALUES_REQUIRED = "must be non-empty when operator is In or NotIn";
const VALUES_FORBIDDEN = "must be empty when operator is Exists or DoesNotExist";
const ONE_INTEGER = "must be a single integer of at most 18 digits when operator is Gt or Lt";

/** The CEL rules of a requirement (exported for the config fuzzer, which satisfies and breaks each). */
export const VALUES_REQUIRED_RULE =
  "!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)";
export const VALUES_FORBIDDEN_RULE =
  "!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || size(self.values) == 0";
export const ONE_INTEGER_RULE = `!(self.operator in ['Gt', 'Lt']) || (has(self.values) && size(self.values) == 1 && self.values[0].matches('${INTEGER_VALUE.source}'))`;

/** One requirement of a node selector term, as `NodeSelectorRequirement` in node affinity. */
export const NodeSelectorRequirementSchema = z
  .object({
    key: z
      .string()
      .max(317)
      .superRefine((key, ctx) => {
        const problem = checkLabelKey(key);
        if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
      })
      // The pattern cannot bound the prefix's length; the rule does, as checkLabelKey does.
      .meta({
        pattern: LABEL_KEY_PATTERN,
        ...celRules({
          rule: "!self.contains('/') || self.indexOf('/') <= 253",
          message: "prefix must be a DNS subdomain of at most 253 characters",
        }),
      })
      .describe("The node label key the requirement is about."),
    operator: z
      .enum(NODE_SELECTOR_OPERATORS)
      .describe(
        "In, NotIn: the label's value is (not) one of values; NotIn and DoesNotExist also match nodes without the label. Exists, DoesNotExist: the label is there (or not). Gt, Lt: the value, read as an integer, is greater (less) than the one in values.",
      ),
    values: listOf(z.string().max(63), 64)
      .optional()
      .describe(
        "With In and NotIn: at least one value. With Exists and DoesNotExist: none. With Gt and Lt: one integer.",
      ),
  })
  .strict()
  .superRefine((req, ctx) => {
    const n = req.values?.length ?? 0;
    if ((req.operator === "In" || req.operator === "NotIn") && n === 0) {
      ctx.addIssue({ code: "custom", path: ["values"], message: VALUES_REQUIRED });
    }
    if ((req.operator === "Exists" || req.operator === "DoesNotExist") && n > 0) {
      ctx.addIssue({ code: "custom", path: ["values"], message: VALUES_FORBIDDEN });
    }
    if (
      (req.operator === "Gt" || req.operator === "Lt") &&
      (n !== 1 || !INTEGER_VALUE.test(req.values![0]!))
    ) {
      ctx.addIssue({ code: "custom", path: ["values"], message: ONE_INTEGER });
    }
  })
  .meta(
    celRules(
      {
        rule: VALUES_REQUIRED_RULE,
        message: VALUES_REQUIRED,
        fieldPath: ".values",
        reason: "FieldValueRequired",
      },
      {
        rule: VALUES_FORBIDDEN_RULE,
        message: VALUES_FORBIDDEN,
        fieldPath: ".values",
        reason: "FieldValueForbidden",
      },
      {
        rule: ONE_INTEGER_RULE,
        message: ONE_INTEGER,
        fieldPath: ".values",
      },
    ),
  );
export type NodeSelectorRequirement = z.infer<typeof NodeSelectorRequirementSchema>;

export const NODE_SELECTOR_TERM_DESCRIPTION =
  "A node selector term as in node affinity: the plugin runs only on nodes that meet every one of matchExpressions, on top of nodeSelector. Empty: no constraint.";

export const NodeSelectorTermSchema = z
  .object({
    matchExpressions: listOf(NodeSelectorRequirementSchema, 32)
      .default([])
      .describe("Requirements on node labels, all of which a node must meet."),
  })
  .strict();
export type NodeSelectorTerm = z.infer<typeof NodeSelectorTermSchema>;

export const PRIORITY_DESCRIPTION =
  "Where configs of one resource name both select a node, the one of higher priority serves it and the others step back there; equal priorities on shared nodes are a ResourceNameConflict.";

export const PrioritySchema = z.number().int().min(-1000).max(1000);
