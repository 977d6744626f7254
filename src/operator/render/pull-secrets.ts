// The image pull Secrets of plugin pods: the config's spec.plugin.imagePullSecrets, then the operator's own list
// (its --plugin-image-pull-secrets flag, which the chart's imagePullSecrets value fills), so plugins pull a
// config's own image and the same private image the operator did.
import type { V1LocalObjectReference } from "@kubernetes/client-node";
import type { RenderContext } from "./context.js";

/** A Secret's name: a DNS subdomain (RFC 1123), at most 253 characters. */
const SECRET_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * The Secret names of a comma-separated list (blanks around names and empty entries ignored), in order,
 * each once. Throws naming `field` and the bad entry when one is not a Secret name.
 */
export function parseImagePullSecretNames(list: string, field: string): string[] {
  const names: string[] = [];
  for (const entry of list.split(",")) {
    const name = entry.trim();
    if (name === "") continue;
    if (name.length > 253 || !SECRET_NAME.test(name)) {
      throw new Error(
        `${field}: '${name}' is not a Secret name (lowercase letters, digits, '-' and '.', at most 253 characters)`,
      );
    }
    if (!names.includes(name)) names.push(name);
  }
  return names;
}

/**
 * The pod's `imagePullSecrets`: the union of the config's (first, in their order) and the operator's, each
 * name once, or undefined when there are none (the field is then left out, so a config without any renders
 * as before the spec field existed). The kubelet tries every Secret whose registry matches the image, so
 * the order only decides which of two Secrets for one registry is tried first: the config's, which was
 * written for its own image.
 */
export function pluginImagePullSecrets(
  ctx: RenderContext,
  fromSpec: readonly { name: string }[] = [],
): V1LocalObjectReference[] | undefined {
  const names = [...new Set([...fromSpec.map((s) => s.name), ...(ctx.pluginImagePullSecrets ?? [])])];
  return names.length > 0 ? names.map((name) => ({ name })) : undefined;
}
