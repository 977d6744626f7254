// The dpo.dev/v1beta1 group, version and kinds, apart from their schemas: the long-running plugin names
// them in its reports without loading zod (config.ts and devicenodestate.ts re-export them).
export const GROUP = "dpo.dev";
export const VERSION = "v1beta1";
export const API_VERSION = `${GROUP}/${VERSION}`;
export const KIND = "DevicePluginConfig";
export const PLURAL = "devicepluginconfigs";

export const DEVICE_NODE_STATE_KIND = "DeviceNodeState";
export const DEVICE_NODE_STATE_PLURAL = "devicenodestates";
