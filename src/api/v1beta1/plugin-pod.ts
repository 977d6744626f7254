// The plugin pod's own settings in spec.plugin: image pull Secrets and policy, RuntimeClass, annotations, env.
import { z } from "zod";
import { celRules, listMapKeys } from "./cel.crd.js";
import { DNS_SUBDOMAIN, listOf, uniqueKeys } from "./fields.js";

/** A Secret or RuntimeClass name: a lowercase DNS subdomain of at most 253 characters. */
const dnsSubdomainName = (example: string) =>
  z.string().min(1).max(253).regex(DNS_SUBDOMAIN, `must be a lowercase RFC 1123 subdomain, e.g. ${example}`);

export const MAX_IMAGE_PULL_SECRETS = 32;

export const ImagePullSecretSchema = z
  .object({
    name: dnsSubdomainName("regcred").describe(
      "Name of a Secret of type kubernetes.io/dockerconfigjson in the operator's namespace, where the plugin pods run.",
    ),
  })
  .strict();

export const IMAGE_PULL_POLICIES = ["Always", "IfNotPresent", "Never"] as const;
export type ImagePullPolicy = (typeof IMAGE_PULL_POLICIES)[number];
/** What the plugin container gets when spec.plugin.imagePullPolicy is unset (as before the field existed). */
export const DEFAULT_IMAGE_PULL_POLICY: ImagePullPolicy = "IfNotPresent";

export const RuntimeClassNameSchema = dnsSubdomainName("nvidia");

/**
 * Pod annotations: at most 32, each value at most 4096 characters, so that with the operator's own
 * they stay far below the API server's 256 KiB for all annotations of an object.
 */
export const MAX_POD_ANNOTATIONS = 32;
export const MAX_POD_ANNOTATION_VALUE = 4096;
/** The operator's own annotation and label domain; the pods' annotations there are the operator's. */
export const RESERVED_ANNOTATION_DOMAIN = "dpo.dev";

/**
 * An annotation key as the API server checks one (a qualified name): an optional DNS-subdomain prefix
 * of at most 253 characters and a '/', then a name of at most 63 characters. RE2, no lookarounds: the
 * prefix's length is checked apart.
 */
const QUALIFIED_NAME_PATTERN =
  "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";
const QUALIFIED_NAME = new RegExp(QUALIFIED_NAME_PATTERN);
export const ANNOTATION_KEY_MESSAGE =
  "keys must be qualified names: an optional DNS subdomain of at most 253 characters and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit";
export const RESERVED_ANNOTATION_MESSAGE = `keys must not be in the ${RESERVED_ANNOTATION_DOMAIN} domain: the operator sets those annotations itself`;

export function isAnnotationKey(key: string): boolean {
  const slash = key.indexOf("/");
  return key.length <= 317 && slash <= 253 && QUALIFIED_NAME.test(key);
}

export function isReservedAnnotationKey(key: string): boolean {
  return key.startsWith(`${RESERVED_ANNOTATION_DOMAIN}/`) || key.includes(`.${RESERVED_ANNOTATION_DOMAIN}/`);
}

function shownKey(key: string): string {
  return JSON.stringify(key.length > 40 ? `${key.slice(0, 40)}...` : key);
}

/** The CEL rules on spec.plugin.podAnnotations, as the CRD carries them. */
export const POD_ANNOTATION_KEY_RULE = `self.all(k, size(k) <= 317 && (!k.contains('/') || k.indexOf('/') <= 253) && k.matches('${QUALIFIED_NAME_PATTERN.replaceAll("\\", "\\\\")}'))`;
export const POD_ANNOTATION_RESERVED_RULE = `self.all(k, !k.startsWith('${RESERVED_ANNOTATION_DOMAIN}/') && !k.contains('.${RESERVED_ANNOTATION_DOMAIN}/'))`;

export const PodAnnotationsSchema = z
  .record(z.string(), z.string().max(MAX_POD_ANNOTATION_VALUE))
  .superRefine((annotations, ctx) => {
    const keys = Object.keys(annotations);
    if (keys.length > MAX_POD_ANNOTATIONS) {
      ctx.addIssue({ code: "custom", message: `must have at most ${MAX_POD_ANNOTATIONS} entries` });
    }
    for (const key of keys) {
      if (!isAnnotationKey(key)) {
        ctx.addIssue({ code: "custom", message: `key ${shownKey(key)}: ${ANNOTATION_KEY_MESSAGE}` });
      }
      // Both checks, as the CRD's two rules each report.
      if (isReservedAnnotationKey(key)) {
        ctx.addIssue({ code: "custom", message: `key ${shownKey(key)}: ${RESERVED_ANNOTATION_MESSAGE}` });
      }
    }
  })
  .meta({
    maxProperties: MAX_POD_ANNOTATIONS,
    ...celRules(
      { rule: POD_ANNOTATION_KEY_RULE, message: ANNOTATION_KEY_MESSAGE },
      { rule: POD_ANNOTATION_RESERVED_RULE, message: RESERVED_ANNOTATION_MESSAGE },
    ),
  });

/**
 * Env names the operator sets in the plugin container: the downward API values the plugin reads, the
 * NVIDIA Container Toolkit's variables of the NVIDIA backend, and every `DPO_` name (the plugin's flags
 * read their `DPO_` twins, and the operator passes its own values for them), so a config can neither
 * override nor shadow them.
 */
export const RESERVED_ENV_NAMES = [
  "NODE_NAME",
  "POD_NAMESPACE",
  "POD_UID",
  "NVIDIA_VISIBLE_DEVICES",
  "NVIDIA_DRIVER_CAPABILITIES",
] as const;
export const RESERVED_ENV_PREFIX = "DPO_";
export const RESERVED_ENV_MESSAGE = `must not be ${RESERVED_ENV_NAMES.join(", ")} or start with ${RESERVED_ENV_PREFIX}: the operator sets those in the plugin container itself`;

export function isReservedEnvName(name: string): boolean {
  return (RESERVED_ENV_NAMES as readonly string[]).includes(name) || name.startsWith(RESERVED_ENV_PREFIX);
}

/**
 * Env names that change what code the plugin's runtime loads or whom it trusts, refused because
 * spec.plugin.env is the config author's while the plugin runs as root on the node with the node's
 * mounts: the dynamic loader's `LD_*` (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, ...) and glibc's tunables;
 * Node's `NODE_*` (NODE_OPTIONS --require/--import/--inspect, NODE_PATH, NODE_EXTRA_CA_CERTS, NODE_TLS_*,
 * NODE_COMPILE_CACHE, NODE_USE_ENV_PROXY, ...), a prefix rather than a list so a new Node release's
 * variable is refused too (the plugin reads none: NODE_NAME is the operator's, reserved above);
 * OpenSSL's configuration, which loads engines and providers (shared objects) and trust anchors; and the
 * proxy variables, which would send the plugin's API-server traffic, with its token, through a host of
 * the author's choosing. NODE_EXTRA_CA_CERTS is refused with the rest of NODE_*: the plugin's only TLS
 * peer is the API server, verified against the ServiceAccount's CA, so an extra anchor can only widen
 * whom the plugin trusts.
 */
export const LOADER_ENV_NAMES = [
  "GLIBC_TUNABLES",
  "OPENSSL_CONF",
  "OPENSSL_ENGINES",
  "OPENSSL_MODULES",
  "SSL_CERT_DIR",
  "SSL_CERT_FILE",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "ALL_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "all_proxy",
  "no_proxy",
] as const;
export const LOADER_ENV_PREFIXES = ["LD_", "NODE_"] as const;
export const LOADER_ENV_MESSAGE =
  "changes what code the plugin loads or whom it trusts (LD_*, NODE_*, GLIBC_TUNABLES, OPENSSL_*, SSL_CERT_*, proxy variables), and the plugin runs as root on its nodes";

/** Whether a spec.plugin.env name is one of the loader's or runtime's (and not one the operator sets). */
export function isLoaderEnvName(name: string): boolean {
  if (isReservedEnvName(name)) return false;
  return (
    (LOADER_ENV_NAMES as readonly string[]).includes(name) ||
    LOADER_ENV_PREFIXES.some((prefix) => name.startsWith(prefix))
  );
}

/** The CEL rule on each spec.plugin.env item, as the CRD carries it. */
export const ENV_RESERVED_RULE = `!(self.name in [${RESERVED_ENV_NAMES.map((n) => `'${n}'`).join(", ")}]) && !self.name.startsWith('${RESERVED_ENV_PREFIX}')`;
/**
 * The loader rule as CEL. It leaves a name the operator sets to ENV_RESERVED_RULE (one message per name,
 * as dpo validate gives); its message names the variable, as dpo validate's does.
 */
export const ENV_LOADER_RULE = `self.name in [${RESERVED_ENV_NAMES.map((n) => `'${n}'`).join(", ")}] || self.name.startsWith('${RESERVED_ENV_PREFIX}') || !(self.name in [${LOADER_ENV_NAMES.map((n) => `'${n}'`).join(", ")}] || ${LOADER_ENV_PREFIXES.map((p) => `self.name.startsWith('${p}')`).join(" || ")})`;
// No quote in the message, so it needs no escaping inside the CEL string.
export const ENV_LOADER_MESSAGE_EXPRESSION = `self.name + ' ${LOADER_ENV_MESSAGE}'`;

/** An env name as Kubernetes checked them before 1.34's relaxed rule, which every supported version accepts. */
export const ENV_NAME_PATTERN = "^[-._a-zA-Z][-._a-zA-Z0-9]*$";

export const MAX_ENV = 64;
export const MAX_ENV_VALUE = 4096;

/**
 * One extra variable of the plugin container: a literal value only. No `valueFrom`: the plugin pods run
 * in the operator's namespace, whose Secrets and ConfigMaps (the webhook's CA key among them) a
 * config's author should not be able to read through it, and the downward API values the plugin needs
 * the operator sets already.
 */
export const EnvVarSchema = z
  .object({
    name: z
      .string()
      .min(1)
      .max(256)
      .regex(
        new RegExp(ENV_NAME_PATTERN),
        "must consist of letters, digits, '_', '-' and '.', and not start with a digit",
      )
      .describe("Name of the environment variable."),
    value: z
      .string()
      .max(MAX_ENV_VALUE)
      .optional()
      .describe("Its value, taken literally ($(VAR) references are expanded as in any pod); unset: empty."),
  })
  .strict()
  .superRefine((env, ctx) => {
    if (isReservedEnvName(env.name)) {
      ctx.addIssue({ code: "custom", path: ["name"], message: RESERVED_ENV_MESSAGE });
    }
    if (isLoaderEnvName(env.name)) {
      ctx.addIssue({ code: "custom", path: ["name"], message: `${env.name} ${LOADER_ENV_MESSAGE}` });
    }
  })
  .meta(
    celRules(
      {
        rule: ENV_RESERVED_RULE,
        message: RESERVED_ENV_MESSAGE,
        fieldPath: ".name",
      },
      {
        rule: ENV_LOADER_RULE,
        messageExpression: ENV_LOADER_MESSAGE_EXPRESSION,
        fieldPath: ".name",
        reason: "FieldValueForbidden",
      },
    ),
  );

/** The plugin container's extra env: a list keyed by name (a name once), so server-side apply merges it by name. */
export const EnvSchema = listOf(EnvVarSchema, MAX_ENV)
  .superRefine(...uniqueKeys("name", (name) => `must not repeat the name ${String(name)}`))
  .meta(listMapKeys("name"));

export const IMAGE_PULL_SECRETS_DESCRIPTION =
  "Secrets in the operator's namespace the plugin pods pull their image with, before those of the operator's --plugin-image-pull-secrets (each name once).";
export const IMAGE_PULL_POLICY_DESCRIPTION =
  "Always, IfNotPresent or Never: when the kubelet pulls the plugin image; unset: IfNotPresent.";
export const RUNTIME_CLASS_NAME_DESCRIPTION =
  "RuntimeClass of the plugin pods, e.g. nvidia for the NVIDIA Container Toolkit's runtime where it is not the node's default; unset: the node's default runtime.";
export const POD_ANNOTATIONS_DESCRIPTION =
  "Annotations of the plugin pods (at most 32; not in the dpo.dev domain). A change rolls the plugin out as a new revision.";
export const ENV_DESCRIPTION =
  "Extra environment variables of the plugin container, literal values only (at most 64, each name once); names the operator sets (NODE_NAME, POD_NAMESPACE, POD_UID, NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES, DPO_*) are refused, and so are those that change how the runtime loads code or whom it trusts (LD_*, NODE_*, GLIBC_TUNABLES, OPENSSL_*, SSL_CERT_*, proxy variables).";

/** The pod fields of spec.plugin, each optional: unset renders the pod as before the field existed. */
export const pluginPodFields = {
  imagePullSecrets: listOf(ImagePullSecretSchema, MAX_IMAGE_PULL_SECRETS)
    .optional()
    .describe(IMAGE_PULL_SECRETS_DESCRIPTION),
  imagePullPolicy: z.enum(IMAGE_PULL_POLICIES).optional().describe(IMAGE_PULL_POLICY_DESCRIPTION),
  runtimeClassName: RuntimeClassNameSchema.optional().describe(RUNTIME_CLASS_NAME_DESCRIPTION),
  podAnnotations: PodAnnotationsSchema.optional().describe(POD_ANNOTATIONS_DESCRIPTION),
  env: EnvSchema.optional().describe(ENV_DESCRIPTION),
};
