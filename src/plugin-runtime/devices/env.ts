// Names of the environment variables an Allocate response sets, derived from the resource name so two
// resources in one container never overwrite each other's variables.

/**
 * The variable that lists a container's allocated device ids for a resource: `DPO_` plus the resource
 * name in upper case with every character outside A-Z and 0-9 turned into `_`
 * (`hardware-vendor.example/foo` → `DPO_HARDWARE_VENDOR_EXAMPLE_FOO`).
 */
export function resourceEnvName(resourceName: string): string {
  return `DPO_${resourceName.toUpperCase().replace(/[^A-Z0-9]/g, "_")}`;
}
