// bench-upgrade's environment knobs: node counts, maxUnavailable as a count or a share, the plugin mode,
// and a clear error naming the variable for anything else.
import { describe, expect, it } from "vitest";
import {
  intKnob,
  kubeletVersionKnob,
  maxUnavailableKnob,
  pluginModeKnob,
  scenariosKnob,
} from "../../../../bench/upgrade/knobs.js";

describe("intKnob", () => {
  it.each([
    { text: undefined, want: 100 },
    { text: "", want: 100 },
    { text: "5000", want: 5000 },
  ])("$text → $want", ({ text, want }) => {
    expect(intKnob({ DPO_BENCH_NODES: text }, "DPO_BENCH_NODES", 100, 1)).toBe(want);
  });
  it.each(["0", "1.5", "ten", "-3"])("refuses %j, naming the variable", (text) => {
    expect(() => intKnob({ DPO_BENCH_NODES: text }, "DPO_BENCH_NODES", 100, 1)).toThrow(
      `DPO_BENCH_NODES: want a whole number >= 1, got ${JSON.stringify(text)}`,
    );
  });
});

describe("maxUnavailableKnob", () => {
  it.each([
    { text: undefined, nodes: 100, want: { dpo: 1, nodes: 1 } },
    { text: "3", nodes: 100, want: { dpo: 3, nodes: 3 } },
    { text: "10%", nodes: 1000, want: { dpo: "10%", nodes: 100 } },
    { text: "1%", nodes: 5000, want: { dpo: "1%", nodes: 50 } },
    { text: "1%", nodes: 20, want: { dpo: "1%", nodes: 1 } },
    { text: "10%", nodes: 15, want: { dpo: "10%", nodes: 2 } },
  ])("$text of $nodes nodes → $want", ({ text, nodes, want }) => {
    expect(maxUnavailableKnob({ DPO_BENCH_MAX_UNAVAILABLE: text }, nodes)).toEqual(want);
  });
  it.each(["0", "0%", "101%", "ten", "5.5%"])("refuses %j, naming the variable", (text) => {
    expect(() => maxUnavailableKnob({ DPO_BENCH_MAX_UNAVAILABLE: text }, 100)).toThrow(
      /^DPO_BENCH_MAX_UNAVAILABLE: /,
    );
  });
});

describe("pluginModeKnob", () => {
  it.each([
    { text: undefined, want: "process" },
    { text: "process", want: "process" },
    { text: "processless", want: "processless" },
  ])("$text → $want", ({ text, want }) => {
    expect(pluginModeKnob({ DPO_BENCH_PLUGIN_MODE: text })).toBe(want);
  });
  it("refuses anything else, naming the variable and the choices", () => {
    expect(() => pluginModeKnob({ DPO_BENCH_PLUGIN_MODE: "none" })).toThrow(
      'DPO_BENCH_PLUGIN_MODE: want process or processless, got "none"',
    );
  });
});

describe("scenariosKnob", () => {
  it.each([
    { text: undefined, want: ["baseline", "surge", "replace"] },
    { text: "standby,replace", want: ["standby", "replace"] },
    { text: "surge,takeover", want: ["surge", "takeover"] },
  ])("$text → $want", ({ text, want }) => {
    expect(scenariosKnob({ DPO_BENCH_SCENARIOS: text })).toEqual(want);
  });
  it("refuses a scenario it does not run, naming the variable", () => {
    expect(() => scenariosKnob({ DPO_BENCH_SCENARIOS: "surge,warm" })).toThrow(
      'DPO_BENCH_SCENARIOS: want a subset of baseline,surge,replace,standby,takeover, got "warm"',
    );
  });
});

describe("kubeletVersionKnob", () => {
  it.each([
    { text: undefined, scenarios: ["surge"], want: "v1.37.0" },
    { text: "v1.35.4", scenarios: ["standby", "replace"], want: "v1.35.4" },
  ])("$text with $scenarios → $want", ({ text, scenarios, want }) => {
    expect(kubeletVersionKnob({ DPO_BENCH_KUBELET_VERSION: text }, scenarios)).toBe(want);
  });
  it("refuses the standby scenario on a kubelet that keeps a registration per socket", () => {
    expect(() => kubeletVersionKnob({}, ["standby"])).toThrow(
      /^DPO_BENCH_KUBELET_VERSION: the standby scenario needs a kubelet before v1\.37\.0/,
    );
  });
  it("refuses the takeover scenario on a kubelet that keeps one registration per resource", () => {
    expect(kubeletVersionKnob({}, ["surge", "takeover"])).toBe("v1.37.0");
    expect(() => kubeletVersionKnob({ DPO_BENCH_KUBELET_VERSION: "v1.36.3" }, ["takeover"])).toThrow(
      /^DPO_BENCH_KUBELET_VERSION: the takeover scenario needs a kubelet from v1\.37\.0/,
    );
  });
  it("refuses a version it cannot read, naming the variable", () => {
    expect(() => kubeletVersionKnob({ DPO_BENCH_KUBELET_VERSION: "1.35" }, [])).toThrow(
      'DPO_BENCH_KUBELET_VERSION: want v1.<minor>.<patch>, got "1.35"',
    );
  });
});
