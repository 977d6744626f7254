// Kubelet versions: parsing what nodes report, surge support by release line, the minimum kubelet.
import { describe, expect, it } from "vitest";
import {
  type FixedReleases,
  type KubeletVersion,
  MINIMUM_KUBELET,
  PER_SOCKET_ENDPOINTS,
  kubeletTooOld,
  parseKubeletVersion,
  supportsSurge,
} from "../../../../src/operator/model/kubelet-version.js";

function v(text: string): KubeletVersion {
  const parsed = parseKubeletVersion(text);
  if (parsed === undefined) throw new Error(`test version ${text} does not parse`);
  return parsed;
}

describe("parseKubeletVersion", () => {
  it.each<{ text: string; want: [number, number, number, (string | number)[]] }>([
    { text: "v1.35.0", want: [1, 35, 0, []] },
    { text: "1.35.0", want: [1, 35, 0, []] },
    { text: " v1.35.2\n", want: [1, 35, 2, []] },
    // Vendor builds of a release: the suffix is not a pre-release.
    { text: "v1.33.4-eks-1234", want: [1, 33, 4, []] },
    { text: "v1.31.2-eks-7f9249a", want: [1, 31, 2, []] },
    { text: "v1.30.0-gke.1000", want: [1, 30, 0, []] },
    { text: "v1.34.1+k3s1", want: [1, 34, 1, []] },
    { text: "v1.32.5+rke2r1", want: [1, 32, 5, []] },
    { text: "v1.29.5+3e8fbb3", want: [1, 29, 5, []] },
    // Upstream pre-releases, and builds from a checkout after one.
    { text: "v1.29.3-rc.0", want: [1, 29, 3, ["rc", 0]] },
    { text: "v1.35.0-rc.1", want: [1, 35, 0, ["rc", 1]] },
    { text: "v1.37.0-alpha.2", want: [1, 37, 0, ["alpha", 2]] },
    { text: "v1.36.0-beta.0", want: [1, 36, 0, ["beta", 0]] },
    { text: "v1.37.0-alpha.2.145+0123abcd", want: [1, 37, 0, ["alpha", 2, 145]] },
  ])("$text", ({ text, want }) => {
    const [major, minor, patch, prerelease] = want;
    expect(parseKubeletVersion(text)).toEqual({ major, minor, patch, prerelease, raw: text });
  });

  it.each([
    "",
    "   ",
    "latest",
    "v1.33",
    "1.33",
    "v1",
    "v1.33.4.5",
    "v01.33.4",
    "V1.33.4",
    "=1.33.4",
    "kubelet v1.33.4",
    "v1.33.x",
    "v1.33.4-",
    "vv1.33.4",
    "1.33.4 extra",
  ])("refuses %j", (text) => {
    expect(parseKubeletVersion(text)).toBeUndefined();
  });
});

describe("supportsSurge with the release table", () => {
  it("the table is the one the ADR records", () => {
    expect(PER_SOCKET_ENDPOINTS).toEqual([{ major: 1, minor: 37, patch: 0 }]);
  });

  it.each<{ text: string; want: boolean }>([
    // Every 1.32–1.36 patch release that could be read keeps endpoints per resource name.
    { text: "v1.28.15", want: false },
    { text: "v1.32.13", want: false },
    { text: "v1.33.13", want: false },
    { text: "v1.34.12", want: false },
    { text: "v1.35.8", want: false },
    { text: "v1.36.0", want: false },
    { text: "v1.36.5", want: false },
    { text: "v1.36.99", want: false },
    { text: "v1.36.5-eks-1234", want: false },
    // The pre-releases of 1.37.0 count as before it, though alpha.2 and rc.1 already have the fix.
    { text: "v1.37.0-alpha.2", want: false },
    { text: "v1.37.0-rc.1", want: false },
    { text: "v1.37.0", want: true },
    { text: "v1.37.0-gke.1000", want: true },
    { text: "v1.37.1+k3s1", want: true },
    { text: "v1.37.2", want: true },
    { text: "v1.37.3-rc.0", want: true },
    { text: "v1.38.0-alpha.1", want: true },
    { text: "v1.40.3", want: true },
    { text: "v2.0.0", want: true },
  ])("$text → $want", ({ text, want }) => {
    expect(supportsSurge(v(text))).toBe(want);
    expect(supportsSurge(v(text), PER_SOCKET_ENDPOINTS)).toBe(want);
  });
});

describe("supportsSurge with backported lines", () => {
  // A made-up table: on main from 1.36.0, backported to 1.34.9 and 1.35.4, never to 1.33.
  const facts: FixedReleases = [
    { major: 1, minor: 34, patch: 9 },
    { major: 1, minor: 35, patch: 4 },
    { major: 1, minor: 36, patch: 0 },
  ];

  it.each<{ text: string; want: boolean }>([
    { text: "v1.33.20", want: false },
    { text: "v1.34.8", want: false },
    { text: "v1.34.9-rc.0", want: false },
    { text: "v1.34.9", want: true },
    { text: "v1.34.10-eks-1", want: true },
    { text: "v1.35.3", want: false },
    { text: "v1.35.4", want: true },
    { text: "v1.35.5+k3s1", want: true },
    { text: "v1.36.0-rc.0", want: false },
    { text: "v1.36.0", want: true },
    { text: "v1.37.0-alpha.1", want: true },
  ])("$text → $want", ({ text, want }) => {
    expect(supportsSurge(v(text), facts)).toBe(want);
  });

  it("the order of the table does not matter", () => {
    const reversed = [...facts].reverse();
    for (const text of ["v1.34.8", "v1.34.9", "v1.35.3", "v1.35.4", "v1.36.0", "v1.37.0"]) {
      expect(supportsSurge(v(text), reversed)).toBe(supportsSurge(v(text), facts));
    }
  });

  it("an empty table means no kubelet has the fix", () => {
    expect(supportsSurge(v("v1.99.0"), [])).toBe(false);
  });
});

describe("kubeletTooOld", () => {
  it("the minimum is 1.29.0, for CDI device names", () => {
    expect(MINIMUM_KUBELET).toEqual({
      minimum: { major: 1, minor: 29, patch: 0 },
      needs: "CDI device names",
    });
  });

  it.each<{ text: string; message: string | undefined }>([
    { text: "v1.26.3", message: "kubelet v1.26.3 is older than v1.29.0, which CDI device names need" },
    { text: "v1.28.15", message: "kubelet v1.28.15 is older than v1.29.0, which CDI device names need" },
    {
      text: "v1.28.9-eks-036c24b",
      message: "kubelet v1.28.9-eks-036c24b is older than v1.29.0, which CDI device names need",
    },
    {
      text: "v1.29.0-rc.2",
      message: "kubelet v1.29.0-rc.2 is older than v1.29.0, which CDI device names need",
    },
    { text: "v1.29.0", message: undefined },
    { text: "v1.29.0-gke.1000", message: undefined },
    { text: "v1.29.1+k3s1", message: undefined },
    { text: "v1.37.2", message: undefined },
  ])("$text", ({ text, message }) => {
    const got = kubeletTooOld(v(text));
    expect(got).toEqual(message === undefined ? undefined : { reason: "KubeletTooOld", message });
  });

  it("takes another requirement", () => {
    const requirement = { minimum: { major: 1, minor: 37, patch: 0 }, needs: "surge upgrades" };
    expect(kubeletTooOld(v("v1.36.5"), requirement)).toEqual({
      reason: "KubeletTooOld",
      message: "kubelet v1.36.5 is older than v1.37.0, which surge upgrades need",
    });
    expect(kubeletTooOld(v("v1.37.0"), requirement)).toBeUndefined();
  });

  it("the message shows the reported text without surrounding space", () => {
    expect(kubeletTooOld(v(" v1.27.1 "))?.message).toBe(
      "kubelet v1.27.1 is older than v1.29.0, which CDI device names need",
    );
  });
});
