// Extended resource names (`<domain>/<name>`) with the rules of the kubelet and the API server, shared by
// both API versions.
import { z } from "zod";
import { celRules } from "./cel.crd.js";
import { DNS_SUBDOMAIN } from "./fields.js";

/** The name part of a qualified name, as of a label key or an extended resource name. */
const QUALIFIED_NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

/**
 * The shape of an extended resource name for the CRD schema (RE2, no lookarounds): one DNS
 * subdomain, one '/', a qualified name part of at most 63 characters. The CEL rules on
 * `resourceName` carry the rest of checkExtendedResourceName.
 */
export const EXTENDED_RESOURCE_NAME_PATTERN =
  "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$";

/** EXTENDED_RESOURCE_NAME_PATTERN, or the empty string. */
export const EXTENDED_RESOURCE_NAME_OR_EMPTY_PATTERN = `^$|${EXTENDED_RESOURCE_NAME_PATTERN}`;

/**
 * Checks an extended resource name the way the kubelet's device manager and the API server do:
 * `<domain>/<name>`, the domain a DNS subdomain outside `kubernetes.io`, the name a qualified name
 * part of at most 63 characters, and `requests.<resourceName>` must stay a qualified name.
 * Returns a message for the first rule broken, or undefined when the name is valid.
 */
export function checkExtendedResourceName(name: string): string | undefined {
  const slash = name.indexOf("/");
  if (slash <= 0 || slash !== name.lastIndexOf("/") || slash === name.length - 1) {
    return "must be <domain>/<name> with exactly one '/'";
  }
  const domain = name.slice(0, slash);
  const short = name.slice(slash + 1);
  // requests.<domain> must itself be a DNS subdomain of at most 253 characters, so 244 for the domain.
  if (domain.length > 244 || !DNS_SUBDOMAIN.test(domain)) {
    return `domain '${domain}' must be a lowercase DNS subdomain (RFC 1123) of at most 244 characters`;
  }
  if (domain === "kubernetes.io" || domain.endsWith(".kubernetes.io") || name.includes("kubernetes.io/")) {
    return "must not be in the kubernetes.io domain (reserved for Kubernetes resources)";
  }
  if (name.startsWith("requests.")) {
    return "must not start with 'requests.'";
  }
  if (short.length > 63 || !QUALIFIED_NAME_PART.test(short)) {
    return `name '${short}' must be at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric`;
  }
  return undefined;
}

/** checkExtendedResourceName as a zod refinement; `allowEmpty`: "" passes. */
function refineName(allowEmpty: boolean): (name: string, ctx: z.RefinementCtx) => void {
  return (name, ctx) => {
    if (allowEmpty && name === "") return;
    const problem = checkExtendedResourceName(name);
    if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
  };
}

/** The CEL side of checkExtendedResourceName, beside EXTENDED_RESOURCE_NAME_PATTERN (an empty name passes). */
const EXTENDED_RESOURCE_NAME_RULES = [
  {
    rule: "!self.contains('/') || self.indexOf('/') <= 244",
    message:
      "domain must be a DNS subdomain of at most 244 characters (requests.<domain> must stay a DNS subdomain)",
  },
  {
    rule: "!self.contains('kubernetes.io/')",
    message: "must not be in the kubernetes.io domain (reserved for Kubernetes resources)",
  },
  { rule: "!self.startsWith('requests.')", message: "must not start with 'requests.'" },
];

/** An extended resource name, with the rules of the kubelet and the API server; shared by both API versions. */
export const ResourceNameSchema = z
  .string()
  .max(316)
  .superRefine(refineName(false))
  .describe("Extended resource name the kubelet advertises, <domain>/<name>. Immutable.")
  // For the API server only: a zod .regex() here would report each bad name twice in `dpo validate`.
  .meta({
    pattern: EXTENDED_RESOURCE_NAME_PATTERN,
    ...celRules(...EXTENDED_RESOURCE_NAME_RULES, { rule: "self == oldSelf", message: "is immutable" }),
  });

/**
 * The extended resource a DRA DeviceClass maps, or "" for none (as `storageClassName: ""` means no
 * class): the rules of resourceName, without its immutability (changing the mapping is a new DeviceClass
 * spec, nothing more).
 */
export const ExtendedResourceNameSchema = z
  .string()
  .max(316)
  .superRefine(refineName(true))
  .meta({
    pattern: EXTENDED_RESOURCE_NAME_OR_EMPTY_PATTERN,
    ...celRules(...EXTENDED_RESOURCE_NAME_RULES),
  });
