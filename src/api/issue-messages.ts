// The sentences dpo validate gives for zod's own checks (types, enums, bounds, patterns), written as the
// CRD's CEL rules write theirs ("must be >= 2 when strategy is TimeSlicing"): lower case, after the path.
import type { z } from "zod";

const TYPE_NAMES: Readonly<Record<string, string>> = {
  string: "a string",
  number: "a number",
  int: "an integer",
  boolean: "a boolean",
  object: "an object",
  record: "an object",
  array: "a list",
  tuple: "a list",
  null: "null",
};

function plural(n: number | bigint, one: string, many: string): string {
  return `${n} ${n === 1 || n === 1n ? one : many}`;
}

function listed(values: readonly unknown[]): string {
  return values.map((v) => (typeof v === "string" ? v : JSON.stringify(v))).join(", ");
}

function tooSmall(issue: z.core.$ZodRawIssue<z.core.$ZodIssueTooSmall>): string {
  const { origin, minimum, inclusive } = issue;
  if (origin === "string") {
    return minimum === 1
      ? "must not be empty"
      : `must be at least ${plural(minimum, "character", "characters")}`;
  }
  if (origin === "array" || origin === "set") {
    return minimum === 1 ? "must not be empty" : `must have at least ${plural(minimum, "item", "items")}`;
  }
  return `must be ${inclusive === false ? ">" : ">="} ${minimum}`;
}

function tooBig(issue: z.core.$ZodRawIssue<z.core.$ZodIssueTooBig>): string {
  const { origin, maximum, inclusive } = issue;
  if (origin === "string") return `must be at most ${plural(maximum, "character", "characters")}`;
  if (origin === "array" || origin === "set") return `must have at most ${plural(maximum, "item", "items")}`;
  return `must be ${inclusive === false ? "<" : "<="} ${maximum}`;
}

/**
 * zod's error map for the dpo.dev schemas, used per parse: a schema's own message (a refinement's, a
 * pattern's) outranks it, so only zod's generic wording is replaced. Undefined leaves zod's.
 */
export function celStyleMessage(issue: z.core.$ZodRawIssue): string | undefined {
  switch (issue.code) {
    case "invalid_type":
      if (issue.input === undefined) return "must be set";
      return `must be ${TYPE_NAMES[issue.expected] ?? issue.expected}`;
    case "invalid_value": {
      const set = issue.input === undefined ? "must be set to" : "must be";
      return issue.values.length === 1
        ? `${set} ${listed(issue.values)}`
        : `${set} one of ${listed(issue.values)}`;
    }
    case "too_small":
      return tooSmall(issue);
    case "too_big":
      return tooBig(issue);
    case "invalid_format":
      return issue.format === "regex" && issue.pattern !== undefined
        ? `must match ${issue.pattern}`
        : `must be a valid ${issue.format}`;
    case "not_multiple_of":
      return `must be a multiple of ${issue.divisor}`;
    case "invalid_key":
      return "has an invalid key";
    case "invalid_union":
      return "matches none of the allowed forms";
    default:
      return undefined;
  }
}
