// The chart-wide defaults of every config's plugin pods (the operator's --plugin-pod-defaults): tolerations,
// PriorityClass, labels, annotations and resources, and what a config's own fields do to each.
import { z } from "zod";
import type { DevicePluginConfig } from "../../api/v1beta1/config.js";
import {
  DEFAULT_PLUGIN_PRIORITY_CLASS,
  LabelValueSchema,
  PodAnnotationsSchema,
  ResourceRequirementsSchema,
  TolerationSchema,
  isReservedAnnotationKey,
  type Toleration,
} from "../../api/v1beta1/spec.js";
import { checkLabelKey } from "../../api/v1beta1/targeting.js";
import { DNS_SUBDOMAIN, listOf } from "../../api/v1beta1/fields.js";
import { canonicalJson } from "../../api/conversion/merge-patch.js";
import { LABEL_INSTANCE, LABEL_NAME } from "../model/names.js";
import { LABEL_MANAGED_BY } from "../../contract/names.js";

/** The label keys the operator sets on every plugin pod besides its dpo.dev ones; never a default's. */
const OPERATOR_LABEL_KEYS: readonly string[] = [LABEL_NAME, LABEL_INSTANCE, LABEL_MANAGED_BY];

export const PluginPodDefaultsSchema = z
  .object({
    tolerations: listOf(TolerationSchema, 64).optional(),
    priorityClassName: z
      .string()
      .min(1)
      .max(253)
      .regex(DNS_SUBDOMAIN, "must be a PriorityClass name (a lowercase RFC 1123 subdomain)")
      .optional(),
    labels: z
      .record(z.string(), LabelValueSchema)
      .superRefine((labels, ctx) => {
        for (const key of Object.keys(labels)) {
          const problem = checkLabelKey(key);
          if (problem !== undefined) ctx.addIssue({ code: "custom", path: [key], message: problem });
          else if (OPERATOR_LABEL_KEYS.includes(key) || isReservedAnnotationKey(key)) {
            ctx.addIssue({
              code: "custom",
              path: [key],
              message:
                "the operator sets this label on every plugin pod itself (its name, instance, managed-by and the dpo.dev domain)",
            });
          }
        }
      })
      .optional(),
    annotations: PodAnnotationsSchema.optional(),
    resources: ResourceRequirementsSchema.optional(),
  })
  .strict();

/** What every config's plugin pods get unless the config says otherwise (see each effective* below). */
export type PluginPodDefaults = z.infer<typeof PluginPodDefaultsSchema>;

/**
 * The defaults of `--plugin-pod-defaults`: a JSON object with any of tolerations, priorityClassName, labels,
 * annotations and resources; empty: none. Throws naming `field` and the first bad path.
 */
export function parsePluginPodDefaults(text: string, field: string): PluginPodDefaults | undefined {
  if (text.trim() === "") return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new Error(`${field}: not a JSON object: ${(err as Error).message}`, { cause: err });
  }
  const parsed = PluginPodDefaultsSchema.safeParse(value);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => {
      const path = i.path.map(String).join(".");
      return path === "" ? i.message : `${path}: ${i.message}`;
    });
    throw new Error(`${field}: ${issues.join("; ")}`);
  }
  return parsed.data;
}

/**
 * Tolerations: the union. The config's own, then each default the config does not already carry (the same
 * toleration twice is kept once). A config cannot drop a default toleration: a toleration only lets the pod
 * onto a tainted node, and the config's node selector still decides which nodes it targets.
 */
export function effectiveTolerations(
  own: readonly Toleration[],
  defaults: PluginPodDefaults | undefined,
): Toleration[] {
  const result = own.map((t) => ({ ...t }));
  const seen = new Set(result.map((t) => canonicalJson(t)));
  for (const t of defaults?.tolerations ?? []) {
    const key = canonicalJson(t);
    if (seen.has(key)) continue;
    seen.add(key);
    result.push({ ...t });
  }
  return result;
}

/**
 * PriorityClass: the default replaces the built-in one (system-node-critical). The API server writes the
 * built-in one into every config that names none, so a config naming system-node-critical itself cannot be
 * told apart and gets the default too; a config naming any other class, or "" for none, keeps its own.
 */
export function effectivePriorityClassName(own: string, defaults: PluginPodDefaults | undefined): string {
  return own === DEFAULT_PLUGIN_PRIORITY_CLASS && defaults?.priorityClassName !== undefined
    ? defaults.priorityClassName
    : own;
}

type Resources = z.infer<typeof ResourceRequirementsSchema>;

function hasResources(r: Resources | undefined): r is Resources {
  return r !== undefined && (r.requests !== undefined || r.limits !== undefined);
}

/**
 * Resources: whole, never merged. A config with any requests or limits of its own keeps exactly those;
 * one with none gets the default's.
 */
export function effectiveResources(
  own: Resources,
  defaults: PluginPodDefaults | undefined,
): Resources | undefined {
  const chosen = hasResources(own) ? own : defaults?.resources;
  if (!hasResources(chosen)) return undefined;
  return {
    ...(chosen.requests ? { requests: { ...chosen.requests } } : {}),
    ...(chosen.limits ? { limits: { ...chosen.limits } } : {}),
  };
}

/** Labels: the defaults under the operator's own, which always win (and no default may name one). */
export function effectivePodLabels(
  operatorLabels: Readonly<Record<string, string>>,
  defaults: PluginPodDefaults | undefined,
): Record<string, string> {
  return { ...defaults?.labels, ...operatorLabels };
}

/**
 * Annotations: merged, the config's spec.plugin.podAnnotations winning a key both have; the operator's
 * own (the dpo.dev domain, which neither may use) over both.
 */
export function effectivePodAnnotations(
  own: Readonly<Record<string, string>> | undefined,
  operatorAnnotations: Readonly<Record<string, string>>,
  defaults: PluginPodDefaults | undefined,
): Record<string, string> {
  return { ...defaults?.annotations, ...own, ...operatorAnnotations };
}

/**
 * The config with the default tolerations in its spec, as the rest of the operator must see it: which
 * nodes its plugin runs on (the status's counts, the node labels, the stale reports) follows the pods'
 * tolerations, defaults included.
 */
export function withDefaultTolerations(
  config: DevicePluginConfig,
  defaults: PluginPodDefaults | undefined,
): DevicePluginConfig {
  if ((defaults?.tolerations ?? []).length === 0) return config;
  return {
    ...config,
    spec: { ...config.spec, tolerations: effectiveTolerations(config.spec.tolerations, defaults) },
  };
}
