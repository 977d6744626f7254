// Which device plugin API version a plugin-watcher registration negotiated, from what GetInfo offered.
import { describe, expect, it } from "vitest";
import { acceptedWatcherVersion } from "../../../../src/plugin-runtime/registration/plugin-watcher.js";

describe("acceptedWatcherVersion", () => {
  const cases: { name: string; offered: string[]; served: string[]; want: string | undefined }[] = [
    { name: "the one version offered", offered: ["v1beta1"], served: ["v1beta1"], want: "v1beta1" },
    {
      name: "first offered that is served",
      offered: ["v1", "v1beta1"],
      served: ["v1beta1"],
      want: "v1beta1",
    },
    {
      name: "offer order wins",
      offered: ["v1beta2", "v1beta1"],
      served: ["v1beta1", "v1beta2"],
      want: "v1beta2",
    },
    { name: "GetInfo never asked", offered: [], served: ["v1beta1"], want: undefined },
    { name: "nothing offered is served", offered: ["v1alpha1"], served: ["v1beta1"], want: undefined },
  ];
  it.each(cases)("$name", ({ offered, served, want }) => {
    expect(acceptedWatcherVersion(offered, served)).toBe(want);
  });
});
