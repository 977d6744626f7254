// A DeviceNodeState's bounds on its devices' attributes, apart from the schema that enforces them: the
// long-running plugin cuts its reports to them without loading zod (devicenodestate.ts re-exports them).

/**
 * Most attributes per device. The NVIDIA backend reports 9, PCI 6, Mock at most 64 (63 configured and its
 * index): twice the largest, so a backend that grows keeps room, while one report stays far below the
 * API server's request limit and the operator's cache cannot be flooded through it.
 */
export const MAX_ATTRIBUTES_PER_DEVICE = 128;
/**
 * Longest attribute name: Mock's configured names are at most 63 characters, a ResourceSlice's qualified
 * attribute names at most 96 (a 63-character domain, '/', 32 characters).
 */
export const MAX_ATTRIBUTE_KEY = 128;
/**
 * Longest attribute value: Mock's configured values are at most 256 characters; the longest a real backend
 * writes is NVIDIA's lastXid (a 200-character detail and its code).
 */
export const MAX_ATTRIBUTE_VALUE = 1024;
