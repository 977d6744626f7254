// What a node's kubelet can do, judged from the version it reports in status.nodeInfo.kubeletVersion:
// whether a device-plugin upgrade may surge on it, and whether it is too old for the plugin at all.
// The release facts and how they were found are in docs/adr/0002-surge-needs-kubelet-with-per-socket-endpoints.md.
import semver from "semver";

/** A release number without pre-release or vendor parts, e.g. 1.37.0. */
export interface Release {
  major: number;
  minor: number;
  patch: number;
}

/** A kubelet version as reported by the node. */
export interface KubeletVersion extends Release {
  /**
   * The upstream pre-release identifiers (`["rc", 1]` for v1.35.0-rc.1); empty for a release,
   * including vendor builds of a release (v1.33.4-eks-1234, v1.30.0-gke.1000).
   */
  prerelease: readonly (string | number)[];
  /** The text as the node reported it, for messages. */
  raw: string;
}

/**
 * The pre-release kinds Kubernetes itself tags (v1.37.0-alpha.2, -beta.0, -rc.1; builds from a
 * checkout add commits after them: v1.37.0-alpha.2.145+0123abcd). Vendors put their build numbers in
 * the same semver slot (-eks-1234, -gke.1000) but ship them on top of the final release, so any other
 * identifier is read as a vendor suffix, not as a pre-release.
 */
const UPSTREAM_PRERELEASE = new Set(["alpha", "beta", "rc"]);

/**
 * Parses a kubelet version. Build metadata (+k3s1, +rke2r1) and vendor pre-release suffixes
 * (-eks-1234, -gke.1000) are dropped, upstream pre-releases kept; anything that is not a full
 * major.minor.patch semver (with or without the leading "v") is refused.
 */
export function parseKubeletVersion(text: string): KubeletVersion | undefined {
  const trimmed = text.trim();
  // semver also accepts a leading "=", which no kubelet reports; only "v" is tolerated.
  if (!/^v?\d/.test(trimmed)) return undefined;
  const parsed = semver.parse(trimmed);
  if (parsed === null) return undefined;
  const first = parsed.prerelease[0];
  const upstream = typeof first === "string" && UPSTREAM_PRERELEASE.has(first);
  return {
    major: parsed.major,
    minor: parsed.minor,
    patch: parsed.patch,
    prerelease: upstream ? [...parsed.prerelease] : [],
    raw: text,
  };
}

/** The version in semver's canonical form, so ordering follows semver (a pre-release sorts before its release). */
function canonical(v: Release & { prerelease?: readonly (string | number)[] }): string {
  const base = `${v.major}.${v.minor}.${v.patch}`;
  return v.prerelease !== undefined && v.prerelease.length > 0 ? `${base}-${v.prerelease.join(".")}` : base;
}

/** A release as Kubernetes writes it: v1.37.0. */
export function showRelease(r: Release): string {
  return `v${r.major}.${r.minor}.${r.patch}`;
}

/** Semver order of two parsed kubelet versions (a pre-release before its release; vendor suffixes ignored). */
export function compareKubeletVersions(a: KubeletVersion, b: KubeletVersion): number {
  return semver.compare(canonical(a), canonical(b));
}

/**
 * For each minor line that has a fix, the first release of that line with it. A release has the fix
 * when its line is listed and its patch is at or after the listed one, or when its line is newer than
 * every listed line (the fix is on the main branch from the newest listed line on). A line older than
 * the newest listed one and not itself listed never got the fix.
 */
export type FixedReleases = readonly Release[];

/**
 * First kubelet releases whose device manager keeps one endpoint per plugin socket instead of one per
 * resource name (kubernetes/kubernetes#135437, fixing #121994 and #127803). Before it, a second
 * registration for the same resource replaces the first, and the end of the old plugin's stream then
 * disconnects the new one, so a surge handover leaves the node with no allocatable devices.
 *
 * Found by reading pkg/kubelet/cm/devicemanager in every k8s.io/kubernetes release the module proxy
 * serves; see docs/adr/0002-surge-needs-kubelet-with-per-socket-endpoints.md. No backport to 1.32–1.36
 * was found in the patch releases that could be read; patch releases that could not be read are
 * listed in the ADR. A backport found later is one more entry here.
 */
export const PER_SOCKET_ENDPOINTS: FixedReleases = [{ major: 1, minor: 37, patch: 0 }];

/**
 * First kubelet releases that keep every registered instance of a DRA driver and use the newest, falling
 * back to an older one when the newest goes (kubernetes/kubernetes#129832, "DRA: seamless driver
 * upgrades", in v1.33.0). Before it, a second registration replaced the first and the old instance's
 * deregistration removed the driver whatever instance was current, then wiped the node's ResourceSlices:
 * read in pkg/kubelet/cm/dra/plugin (plugins_store.go, registration.go) of v1.32.13 and v1.33.0.
 */
export const DRA_SEAMLESS_UPGRADES: FixedReleases = [{ major: 1, minor: 33, patch: 0 }];

function compareLine(a: Release, b: Release): number {
  return a.major !== b.major ? a.major - b.major : a.minor - b.minor;
}

/** Whether the kubelet has the fix described by `fixed` (see FixedReleases). */
export function hasFix(version: KubeletVersion, fixed: FixedReleases): boolean {
  const sameLine = fixed.find((r) => compareLine(r, version) === 0);
  // A pre-release sorts before its release, so v1.37.0-rc.1 does not count as v1.37.0: pre-releases
  // are taken not to have a fix, which only costs a surge the node might have managed.
  if (sameLine !== undefined) return semver.gte(canonical(version), canonical(sameLine));
  return fixed.length > 0 && fixed.every((r) => compareLine(version, r) > 0);
}

/**
 * Whether a device plugin on this kubelet may be upgraded by surge: the new plugin registers beside
 * the old one, which stops afterwards. Needs a kubelet with per-socket endpoints.
 */
export function supportsSurge(version: KubeletVersion, facts: FixedReleases = PER_SOCKET_ENDPOINTS): boolean {
  return hasFix(version, facts);
}

/** The oldest kubelet a feature works on, and what for (it ends the TooOld message). */
export interface KubeletRequirement {
  minimum: Release;
  needs: string;
}

/**
 * The oldest kubelet dpo supports. The plugin hands devices to containers as CDI device names in its
 * Allocate answers; the kubelet passes them to the runtime only with the DevicePluginCDIDevices
 * feature gate, alpha and off by default in 1.28, on by default from 1.29 (GA in 1.31). The operator
 * cannot see a kubelet's feature gates, so 1.29.0 is the first version it can rely on.
 */
export const MINIMUM_KUBELET: KubeletRequirement = {
  minimum: { major: 1, minor: 29, patch: 0 },
  needs: "CDI device names",
};

/**
 * The oldest kubelet a config that publishes through DRA runs on: the plugin serves the kubelet's
 * `v1beta1.DRAPlugin` and `v1.DRAPlugin` services, and v1.32.0 is the first kubelet that speaks one of
 * them (older ones know only v1alpha4).
 */
export const MINIMUM_DRA_KUBELET: KubeletRequirement = {
  minimum: { major: 1, minor: 32, patch: 0 },
  needs: "DRA plugins (the kubelet's v1beta1.DRAPlugin service)",
};

/** A node whose kubelet is older than a requirement. */
export interface KubeletTooOld {
  reason: "KubeletTooOld";
  message: string;
}

/** The problem with the kubelet's version for `requirement`, or undefined when it is new enough. */
export function kubeletTooOld(
  version: KubeletVersion,
  requirement: KubeletRequirement = MINIMUM_KUBELET,
): KubeletTooOld | undefined {
  // Semver order here too: v1.29.0-rc.0 is older than v1.29.0. Pre-release kubelets are test builds,
  // and flagging one is the safe side.
  if (semver.gte(canonical(version), canonical(requirement.minimum))) return undefined;
  return {
    reason: "KubeletTooOld",
    message: `kubelet ${version.raw.trim()} is older than ${showRelease(requirement.minimum)}, which ${requirement.needs} need`,
  };
}
