// A publish switch's per-node events and its message.
import { describe, expect, it } from "vitest";
import { switchEvents, switchMessage } from "../../../../src/operator/dra-switch/events.js";

describe("switch events and message", () => {
  it("say which node is where, in both directions", () => {
    const events = switchEvents(
      [
        { node: "a", kind: "RecordStart" },
        { node: "a", kind: "RemoveFromOld" },
        { node: "b", kind: "AddToNew" },
        { node: "c", kind: "RemoveFromNew" },
        { node: "d", kind: "AddToOld" },
      ],
      { from: "DevicePlugin", to: "DRA" },
      "example.com/gpu",
    );
    expect(events.map((e) => `${e.reason} ${e.message}`)).toEqual([
      "SwitchNodeStopping node a: switching example.com/gpu from DevicePlugin to DRA; stopping the device plugin",
      "SwitchNodeStarting node b: the device plugin is gone and its allocatable example.com/gpu is 0 or absent; starting the DRA plugin",
      "SwitchNodeStopping node c: rolling the switch back to DevicePlugin; stopping the DRA plugin",
      "SwitchNodeStarting node d: the DRA plugin is gone and its ResourceSlices of the driver are gone; starting the device plugin again",
    ]);
  });

  it("names the nodes in flight and a wait, bounded", () => {
    expect(switchMessage({ from: "DRA", to: "DevicePlugin" }, ["a"], undefined)).toBe(
      "switching spec.publish from DRA to DevicePlugin node by node, each node replaced: in flight (neither path or starting): a",
    );
    expect(switchMessage({ from: "DevicePlugin", to: "DRA" }, ["a", "b"], undefined, true)).toBe(
      "rolling the switch back from DRA to DevicePlugin node by node, each node replaced: in flight (neither path or starting): a, b",
    );
    const long = switchMessage({ from: "DevicePlugin", to: "DRA" }, [], "x".repeat(2000));
    expect(long.length).toBe(1024);
    expect(
      long.startsWith(
        "switching spec.publish from DevicePlugin to DRA node by node, each node replaced: no node in flight; x",
      ),
    ).toBe(true);
  });
});
