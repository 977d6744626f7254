// bench-upgrade's environment knobs: node counts, maxUnavailable as a count or a share, the plugin mode,
// and a clear error naming the variable for anything else.
import { describe, expect, it } from "vitest";
import { intKnob, maxUnavailableKnob, pluginModeKnob } from "../../bench/upgrade/knobs.js";

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
