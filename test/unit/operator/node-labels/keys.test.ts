// The device label keys: valid label keys whatever the config's name, told apart from every other key, and
// each one the admission policy lets the operator write (and no other nvidia.com/ key).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  configOfDeviceLabel,
  configOfLabelManager,
  DEVICE_LABEL_ATTRIBUTES,
  deviceLabelKey,
  GFD_LABEL_KEYS,
  isDeviceLabelKey,
  labelFieldManager,
} from "../../../../src/operator/node-labels/keys.js";

const POLICY = readFileSync(
  join(import.meta.dirname, "../../../../config/policy/operator_node_policy.yaml"),
  "utf8",
);
/** A label key as the API server checks one: an optional DNS-subdomain prefix, a name of at most 63. */
const QUALIFIED_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

describe("device label keys", () => {
  it("are valid label keys for the longest config names, and name their config back", () => {
    for (const name of ["gpus", "a".repeat(253), `${"b".repeat(100)}.example.${"c".repeat(100)}`]) {
      for (const attribute of DEVICE_LABEL_ATTRIBUTES) {
        const key = deviceLabelKey(attribute, name);
        const [prefix, label] = key.split("/") as [string, string];
        expect(prefix.length).toBeLessThanOrEqual(253);
        expect(label.length).toBeLessThanOrEqual(63);
        expect(label).toMatch(QUALIFIED_NAME);
        expect(configOfDeviceLabel(key)).toBe(label);
        expect(isDeviceLabelKey(key)).toBe(true);
      }
      const manager = labelFieldManager(name);
      expect(manager.length).toBeLessThanOrEqual(128);
      expect(configOfLabelManager(manager)).toBe(deviceLabelKey("count", name).split("/")[1]);
    }
  });

  it("tell the operator's keys and managers from everyone else's", () => {
    for (const key of ["nvidia.com/mig.config", "nvidia.com/gpu.machine", "revision.dpo.dev/gpus", "x/y"])
      expect(isDeviceLabelKey(key)).toBe(false);
    expect(configOfLabelManager("dpo-operator")).toBeUndefined();
    expect(configOfLabelManager("nfd-master")).toBeUndefined();
  });

  it("are each allowed by the admission policy, and no other nvidia.com/ key is", () => {
    for (const key of GFD_LABEL_KEYS) expect(POLICY).toContain(`'${key}'`);
    for (const attribute of DEVICE_LABEL_ATTRIBUTES)
      expect(POLICY).toContain(`k.startsWith('${attribute}.device.dpo.dev/')`);
    const listed = [...POLICY.matchAll(/'(nvidia\.com\/[^']+)'/g)].map((m) => m[1]);
    expect(new Set(listed)).toEqual(new Set(GFD_LABEL_KEYS));
    expect(POLICY).not.toContain("startsWith('nvidia.com/");
  });
});
