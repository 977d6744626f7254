// The bound on names and label values both sides apply: 63 characters, stable, distinct, valid.
import { describe, expect, it } from "vitest";
import { boundedName, configLabelValue } from "../../../src/contract/names.js";

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

describe("boundedName", () => {
  const long = "a".repeat(70);
  it.each([
    { prefix: "dpo", name: "example-foo", want: "dpo-example-foo" },
    { prefix: "dpo", name: "x".repeat(59), want: `dpo-${"x".repeat(59)}` },
  ])("keeps $prefix-$name when it fits", ({ prefix, name, want }) => {
    expect(boundedName(prefix, name)).toBe(want);
  });

  it.each([
    { name: "x".repeat(60) },
    { name: long },
    { name: `${"b".repeat(53)}-tail-that-does-not-fit` },
    { name: `${"c".repeat(53)}.dotted.name.beyond.the.limit` },
  ])("truncates $name to 63 characters with a hash suffix and a valid end", ({ name }) => {
    const bounded = boundedName("dpo", name);
    expect(bounded.length).toBeLessThanOrEqual(63);
    expect(bounded).toMatch(/-[0-9a-f]{8}$/);
    expect(bounded).toMatch(DNS_LABEL);
    expect(bounded.startsWith("dpo-")).toBe(true);
  });

  it("gives the same name every time and different names to long names that share a head", () => {
    expect(boundedName("dpo", `${long}-one`)).toBe(boundedName("dpo", `${long}-one`));
    expect(boundedName("dpo", `${long}-one`)).not.toBe(boundedName("dpo", `${long}-two`));
  });
});

describe("configLabelValue", () => {
  it("keeps label values valid for config names longer than a label value allows", () => {
    const name = `${"d".repeat(60)}.example.com`;
    const value = configLabelValue(name);
    expect(value.length).toBeLessThanOrEqual(63);
    expect(value).toMatch(LABEL_VALUE);
  });
});
