// Names, labels and owner of the objects the operator renders for a config.
import { describe, expect, it } from "vitest";
import {
  configOwnerReference,
  pluginLabels,
  pluginObjectName,
} from "../../../../src/operator/model/names.js";

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

describe("labels", () => {
  it("labels a config's objects with the app, instance, manager and config labels", () => {
    expect(pluginLabels("example-foo")).toEqual({
      "app.kubernetes.io/name": "dpo-plugin",
      "app.kubernetes.io/instance": "example-foo",
      "app.kubernetes.io/managed-by": "dpo-operator",
      "dpo.dev/config": "example-foo",
    });
    expect(pluginObjectName("example-foo")).toBe("dpo-example-foo");
  });

  it("keeps label values valid for config names longer than a label value allows", () => {
    const name = `${"d".repeat(60)}.example.com`;
    expect(Object.values(pluginLabels(name)).every((v) => LABEL_VALUE.test(v) && v.length <= 63)).toBe(true);
  });
});

describe("configOwnerReference", () => {
  it("makes the config the controlling owner", () => {
    expect(configOwnerReference({ metadata: { name: "example-foo", uid: "u-1" } })).toEqual({
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      name: "example-foo",
      uid: "u-1",
      controller: true,
      blockOwnerDeletion: true,
    });
  });

  it("refuses a config that was never stored (no uid)", () => {
    expect(() => configOwnerReference({ metadata: { name: "example-foo" } })).toThrow(/metadata\.uid/);
  });
});
