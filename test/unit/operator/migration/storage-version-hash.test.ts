// The storage version hash the API server shows in discovery, which gates the storage migration: the
// expected values are what a v1.34 kube-apiserver's discovery shows for these resources.
import { describe, expect, it } from "vitest";
import { storageVersionHash } from "../../../../src/operator/migration/runner.js";

describe("storageVersionHash", () => {
  it.each([
    ["apps", "v1", "Deployment", "8aSe+NMegvE="],
    ["", "v1", "Pod", "xPOwRZ+Yhw8="],
  ])("%s/%s %s is %s", (group, version, kind, hash) => {
    expect(storageVersionHash(group, version, kind)).toBe(hash);
  });

  it("differs between the versions of one kind", () => {
    expect(storageVersionHash("dpo.dev", "v1alpha1", "DevicePluginConfig")).not.toBe(
      storageVersionHash("dpo.dev", "v1beta1", "DevicePluginConfig"),
    );
  });
});
