// The kubelet's own rules for device-plugin registration, written for the simulator from the kubelet's
// sources (v1.34) and sharing no code with the plugin, so the simulator can catch the plugin's mistakes.
import semver from "semver";

/** `pluginapi.SupportedVersions` of the kubelet's device manager. */
export const KUBELET_DEVICE_PLUGIN_VERSIONS: readonly string[] = ["v1beta1"];

/** `errInvalidResourceName` in pkg/kubelet/cm/devicemanager/plugin/v1beta1/api.go. */
export function invalidResourceNameMessage(name: string): string {
  return `the ResourceName ${JSON.stringify(name)} is invalid`;
}

/** `errUnsupportedVersion`, same file; Go's %q of the SupportedVersions array quotes each entry. */
export function unsupportedVersionMessage(version: string): string {
  const supported = KUBELET_DEVICE_PLUGIN_VERSIONS.map((v) => JSON.stringify(v)).join(" ");
  return `requested API version ${JSON.stringify(version)} is not supported by kubelet. Supported version is [${supported}]`;
}

/** `isVersionCompatibleWithPlugin`: any offered version the kubelet speaks. */
export function kubeletSpeaksAny(versions: readonly string[]): boolean {
  return versions.some((version) => KUBELET_DEVICE_PLUGIN_VERSIONS.includes(version));
}

// k8s.io/apimachinery/pkg/util/validation: IsDNS1123Subdomain and IsQualifiedName.
const DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN = new RegExp(`^${DNS1123_LABEL}(\\.${DNS1123_LABEL})*$`);
const DNS1123_SUBDOMAIN_MAX_LENGTH = 253;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const QUALIFIED_NAME_MAX_LENGTH = 63;

function isDNS1123Subdomain(value: string): boolean {
  return value.length <= DNS1123_SUBDOMAIN_MAX_LENGTH && DNS1123_SUBDOMAIN.test(value);
}

/** IsQualifiedName: `[prefix/]name`, the prefix a DNS subdomain, the name at most 63 characters. */
export function isQualifiedName(value: string): boolean {
  const parts = value.split("/");
  if (parts.length > 2) return false;
  const name = parts.length === 2 ? parts[1]! : parts[0]!;
  if (parts.length === 2 && !isDNS1123Subdomain(parts[0]!)) return false;
  return name.length > 0 && name.length <= QUALIFIED_NAME_MAX_LENGTH && QUALIFIED_NAME.test(name);
}

/** pkg/apis/core/v1/helper IsNativeResource: no `/`, or anywhere in a `*kubernetes.io/` domain. */
export function isNativeResource(name: string): boolean {
  return !name.includes("/") || name.includes("kubernetes.io/");
}

/**
 * pkg/apis/core/v1/helper IsExtendedResourceName, which both Register and the plugin watcher's
 * ValidatePlugin apply: not native, not `requests.*`, and `requests.<name>` a qualified name (so the
 * domain may be at most 244 characters, as `requests.` takes 9 of the subdomain's 253).
 */
export function isExtendedResourceName(name: string): boolean {
  if (isNativeResource(name) || name.startsWith("requests.")) return false;
  return isQualifiedName(`requests.${name}`);
}

/**
 * Whether a kubelet of this version writes its containers' device health into pod status
 * (`allocatedResourcesStatus`): the ResourceHealthStatus feature gate, alpha and off until 1.35, beta and on
 * by default from 1.36 (pkg/features/kube_features.go). An unreadable version is taken for the newest.
 */
export function reportsDeviceHealthInPodStatus(kubeletVersion: string): boolean {
  const match = /^v?1\.(\d+)\./.exec(kubeletVersion.trim());
  return match?.[1] === undefined || Number(match[1]) >= 36;
}

/**
 * Whether a kubelet of this version keeps one device-plugin endpoint per socket: v1.37.0 and later
 * (kubernetes PR #135437). Written here from the kubelet's history, not shared with the operator's
 * own check, so a mistake there shows up against this one. A version that cannot be read gets the
 * older behaviour, the one that loses devices.
 */
export function endpointPerSocket(kubeletVersion: string): boolean {
  const version = semver.coerce(kubeletVersion, { includePrerelease: false });
  return version !== null && semver.gte(version, "1.37.0");
}
