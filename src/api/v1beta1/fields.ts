// Field schemas the parts of the v1beta1 spec share: absolute paths, bounded lists and maps, DNS subdomains.
import { z } from "zod";
import { celRules } from "./cel.crd.js";

/** A lowercase DNS subdomain (RFC 1123), as Kubernetes names and resource-name domains are. */
export const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** An absolute path without `..` segments. */
export const absolutePath = z
  .string()
  .min(1)
  .max(4096)
  .regex(/^\//, "must be an absolute path")
  .refine((p) => !p.split("/").includes(".."), "must not contain '..'")
  .meta(
    celRules({
      rule: "!(self == '..' || self.startsWith('../') || self.contains('/../') || self.endsWith('/..'))",
      message: "must not contain '..'",
    }),
  );

/**
 * A list of at most `max` items whose items are checked even when there are too many, as the API server
 * checks them: zod's own `.max()` on an array stops at the size and says nothing about the items, so
 * `dpo validate` would name fewer problems than admission does. `maxItems` still goes into the CRD. (A
 * non-integer number among the items still ends every check around it: zod's `.int()` aborts.)
 */
export function listOf<T extends z.ZodType>(item: T, max: number) {
  return z
    .array(item)
    .refine((items) => items.length <= max, {
      message: `must have at most ${max} items`,
      when: (payload) => Array.isArray(payload.value),
    })
    .meta({ maxItems: max });
}

/**
 * The uniqueness check of a list keyed by one field (`x-kubernetes-list-type: map`), as the API server makes
 * it, for `.superRefine(...uniqueKeys(...))`: it runs even when items are invalid (the API server checks the
 * keys beside every other problem), an item without the key counts as one more key value, and only the
 * second appearance of a value is named. When an item is not an object, the API server names that item
 * alone, and so does the item schema: no duplicates are named then.
 */
export function uniqueKeys(
  key: string,
  message: (value: unknown) => string,
): [
  (items: unknown[], ctx: z.RefinementCtx<unknown[]>) => void,
  { when: (payload: z.core.ParsePayload) => boolean },
] {
  const unspecified = Symbol("unspecified");
  const check = (items: unknown[], ctx: z.RefinementCtx<unknown[]>): void => {
    if (items.some((item) => item !== null && (typeof item !== "object" || Array.isArray(item)))) return;
    const times = new Map<unknown, number>();
    items.forEach((item, index) => {
      const record = item as Record<string, unknown> | null;
      const raw = record !== null && Object.hasOwn(record, key) ? record[key] : unspecified;
      // Compound values compare by their JSON, as the API server compares them.
      const value = typeof raw === "object" && raw !== null ? `\u0000${JSON.stringify(raw)}` : raw;
      const seen = times.get(value) ?? 0;
      times.set(value, seen + 1);
      if (seen !== 1) return;
      const shown = raw === unspecified ? `(no ${key})` : raw;
      ctx.addIssue({ code: "custom", path: [index], message: message(shown) });
    });
  };
  return [check, { when: (payload) => Array.isArray(payload.value) }];
}

/**
 * A map whose keys are at most `maxKey` characters. A structural schema cannot bound map keys, so the CRD
 * carries a CEL rule over them, which names the map and lets every other check run; a zod key schema
 * would name the key as a field and stop the checks of the enclosing object, so the keys are checked here
 * the way the rule checks them.
 */
export function mapOf<T extends z.ZodType>(value: T, maxKey: number) {
  return z
    .record(z.string(), value)
    .superRefine((map, ctx) => {
      for (const key of Object.keys(map)) {
        if ([...key].length <= maxKey) continue;
        const shown = key.length > 40 ? `${key.slice(0, 40)}...` : key;
        ctx.addIssue({
          code: "custom",
          message: `key ${JSON.stringify(shown)} is longer than ${maxKey} characters`,
        });
      }
    })
    .meta(
      celRules({
        rule: `self.all(k, size(k) <= ${maxKey})`,
        message: `keys must be at most ${maxKey} characters`,
      }),
    );
}
