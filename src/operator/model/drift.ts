// Deciding whether an applied object already holds what the operator wants, so an idle operator makes no
// writes: every field the operator sets must be present and equal; fields the server or others add are fine.

/**
 * True when `actual` contains `desired`: objects key by key (extra keys in `actual` allowed), arrays
 * element by element with the same length, scalars by equality. Empty objects, empty arrays and zero
 * scalars in `desired` match an absent field (the API server drops empty values).
 */
export function containsDesired(desired: unknown, actual: unknown): boolean {
  if (desired === undefined || desired === null) return true;
  if (Array.isArray(desired)) {
    if (actual === undefined || actual === null) return desired.length === 0;
    if (!Array.isArray(actual) || actual.length !== desired.length) return false;
    return desired.every((d, i) => containsDesired(d, actual[i]));
  }
  if (typeof desired === "object") {
    const entries = Object.entries(desired as Record<string, unknown>);
    if (actual === undefined || actual === null) {
      return entries.every(([, v]) => containsDesired(v, undefined));
    }
    if (typeof actual !== "object" || Array.isArray(actual)) return false;
    const act = actual as Record<string, unknown>;
    return entries.every(([k, v]) => containsDesired(v, act[k]));
  }
  // Go's omitempty drops zero values (false, 0, ""), so an absent field holds them too.
  if (actual === undefined) return desired === false || desired === 0 || desired === "";
  if (desired === actual) return true;
  // An int-or-string field may come back as the other form (8080 vs "8080").
  const scalar = (v: unknown): string | undefined =>
    typeof v === "number" || typeof v === "string" || typeof v === "boolean" ? String(v) : undefined;
  return scalar(desired) !== undefined && scalar(desired) === scalar(actual);
}

/** Pod-spec fields a user may add by hand that the operator renders only when it means them. */
const POD_FIELDS_OWNED_WHOLE = [
  "tolerations",
  "nodeSelector",
  "affinity",
  "hostNetwork",
  "hostPID",
  "hostIPC",
  "runtimeClassName",
  "priorityClassName",
  "imagePullSecrets",
  "initContainers",
] as const;
/** Container fields likewise: absent from the render means absent from the live object. */
const CONTAINER_FIELDS_OWNED_WHOLE = [
  "command",
  "args",
  "env",
  "envFrom",
  "volumeMounts",
  "securityContext",
  "lifecycle",
] as const;

function isEmpty(value: unknown): boolean {
  if (value === undefined || value === null || value === false || value === "") return true;
  if (Array.isArray(value)) return value.length === 0;
  if (typeof value === "object") return Object.keys(value).length === 0;
  return false;
}

export interface PodSpecLike {
  containers?: Record<string, unknown>[];
  [key: string]: unknown;
}

/**
 * True when a live pod spec holds the rendered one (containsDesired) and adds nothing of its own to the
 * fields the operator owns whole: a toleration, host namespace, or container argument added by hand
 * counts as an edit, while the defaults the API server fills in (terminationMessagePath, dnsPolicy,
 * schedulerName, an empty securityContext) do not.
 */
export function podSpecHoldsRendered(
  desired: PodSpecLike | undefined,
  actual: PodSpecLike | undefined,
): boolean {
  if (!containsDesired(desired, actual)) return false;
  if (desired === undefined || actual === undefined) return true;
  for (const field of POD_FIELDS_OWNED_WHOLE) {
    if (isEmpty(desired[field]) && !isEmpty(actual[field])) return false;
  }
  const want = desired.containers ?? [];
  const have = actual.containers ?? [];
  return want.every((c, i) =>
    CONTAINER_FIELDS_OWNED_WHOLE.every((field) => !(isEmpty(c[field]) && !isEmpty(have[i]?.[field]))),
  );
}
