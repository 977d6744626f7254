// The names a config's DRA driver and DeviceClass get. No schemas: the long-running plugin imports this
// without loading zod (publish.ts re-exports it for everyone else).

/**
 * The fields of a spec that name its DRA driver and DeviceClass: spec.dra (publish.ts's DRA) as far as
 * the names go, its other fields allowed.
 */
export interface DRANaming {
  resourceName: string;
  dra?:
    | ({
        driverName?: string | undefined;
        deviceClass: { name?: string | undefined } & Record<string, unknown>;
      } & Record<string, unknown>)
    | undefined;
}

/**
 * The driver name a resource name gives when `spec.dra.driverName` is unset: `<name>.<domain>`, as DRA
 * drivers are named (`gpu.nvidia.com` for `nvidia.com/gpu`). It may not be a valid driver name (upper
 * case, `_`, too long): `checkDefaultDriverName` says so, and the spec must name one then. Pure.
 */
export function defaultDriverName(resourceName: string): string {
  const slash = resourceName.indexOf("/");
  return `${resourceName.slice(slash + 1)}.${resourceName.slice(0, slash)}`;
}

/** The DRA driver name a spec publishes under. */
export function draDriverName(spec: DRANaming): string {
  return spec.dra?.driverName ?? defaultDriverName(spec.resourceName);
}

/** The DeviceClass a spec's operator owns. */
export function draDeviceClassName(spec: DRANaming): string {
  return spec.dra?.deviceClass.name ?? draDriverName(spec);
}
