// The plugin config's hash, which the operator puts on the pods and the plugin reports back.
import { describe, expect, it } from "vitest";
import { configHash } from "../../src/contract/plugin-config.js";

describe("configHash", () => {
  it("is a short hex digest that ignores key order and tells keys from values", () => {
    expect(configHash({ a: "1", b: "2" })).toMatch(/^[0-9a-f]{16}$/);
    expect(configHash({ b: "2", a: "1" })).toBe(configHash({ a: "1", b: "2" }));
    expect(configHash({ ab: "c" })).not.toBe(configHash({ a: "bc" }));
  });
});
