// The simulated kubelet keeps DRA driver instances the way the kubelet of its version does: from v1.33
// every instance, using the newest and falling back when it goes; before, only the last registration,
// removed whichever instance deregisters.
import { afterEach, describe, expect, it } from "vitest";
import type { PluginInfo } from "../../src/plugin-runtime/proto/index.js";
import { SimulatedDraManager } from "../../tools/kubelet-sim/dra-manager.js";

const info = (endpoint: string): PluginInfo => ({
  type: "DRAPlugin",
  name: "gpu.example.com",
  endpoint,
  supportedVersions: ["v1.DRAPlugin", "v1beta1.DRAPlugin"],
});

const managers: SimulatedDraManager[] = [];
afterEach(() => {
  for (const m of managers.splice(0)) m.close();
});

async function registerTwo(kubeletVersion: string): Promise<SimulatedDraManager> {
  const m = new SimulatedDraManager(kubeletVersion);
  managers.push(m);
  await m.register(info("/plugins/gpu/dra-old.sock"), "/reg/old-reg.sock");
  await m.register(info("/plugins/gpu/dra-new.sock"), "/reg/new-reg.sock");
  return m;
}

describe("SimulatedDraManager instances", () => {
  it.each(["v1.33.0", "v1.34.4", "v1.37.2+k3s1"])(
    "%s uses the newest and falls back to the older one",
    async (v) => {
      const m = await registerTwo(v);
      expect(m.driver("gpu.example.com")?.endpoint).toBe("/plugins/gpu/dra-new.sock");
      expect(m.instances("gpu.example.com")).toHaveLength(2);
      // The new one goes (a rollback): the old one serves again.
      m.deregister(info("/plugins/gpu/dra-new.sock"), "/reg/new-reg.sock");
      expect(m.driver("gpu.example.com")?.endpoint).toBe("/plugins/gpu/dra-old.sock");
      m.deregister(info("/plugins/gpu/dra-old.sock"), "/reg/old-reg.sock");
      expect(m.driver("gpu.example.com")).toBeUndefined();
    },
  );

  it.each(["v1.33.0", "v1.34.4"])(
    "%s keeps the new one when the old one goes (a surge upgrade)",
    async (v) => {
      const m = await registerTwo(v);
      m.deregister(info("/plugins/gpu/dra-old.sock"), "/reg/old-reg.sock");
      expect(m.driver("gpu.example.com")?.endpoint).toBe("/plugins/gpu/dra-new.sock");
    },
  );

  it("v1.32 loses the driver when the old instance goes after the new one registered", async () => {
    const m = await registerTwo("v1.32.13");
    expect(m.instances("gpu.example.com").map((d) => d.endpoint)).toEqual(["/plugins/gpu/dra-new.sock"]);
    m.deregister(info("/plugins/gpu/dra-old.sock"), "/reg/old-reg.sock");
    expect(m.driver("gpu.example.com")).toBeUndefined();
  });

  it("refuses an endpoint registered twice", async () => {
    const m = await registerTwo("v1.34.4");
    await expect(m.register(info("/plugins/gpu/dra-new.sock"), "/reg/again-reg.sock")).rejects.toThrow(
      "endpoint /plugins/gpu/dra-new.sock already registered for plugin gpu.example.com",
    );
  });
});
