// The simulated device manager against a scripted device plugin over real unix sockets: it refuses what
// the kubelet refuses (by its own rules, not the plugin's), calls PreStartContainer when asked, and builds
// GetPreferredAllocation requests with must_include the way the kubelet does.
import { describe, expect, it } from "vitest";
import { isExtendedResourceName } from "../../tools/kubelet-sim/kubelet-rules.js";
import { DEVICE_IDS, kubelet, register, devicesSeen, useDeviceManager } from "./device-manager-support.js";

useDeviceManager();

const label = (n: number, c: string) => c.repeat(n);
/** A DNS subdomain of exactly `length` characters, in labels of at most 63. */
function domainOf(length: number): string {
  const labels: string[] = [];
  let left = length;
  while (left > 0) {
    const take = Math.min(63, left === 65 ? 62 : left);
    labels.push(label(take, "a"));
    left -= take + 1;
  }
  return labels.join(".");
}

/**
 * Resource names with the kubelet's answer (IsExtendedResourceName in pkg/apis/core/v1/helper, applied by
 * Register in pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go), worked out from its source.
 */
const RESOURCE_NAMES: { name: string; kubelet: "accept" | "refuse"; why: string }[] = [
  { name: "hardware-vendor.example/foo", kubelet: "accept", why: "domain/name" },
  { name: "example.com/Foo_Bar.baz-1", kubelet: "accept", why: "name part may hold upper case, _ and ." },
  {
    name: "example.com/requests.foo",
    kubelet: "accept",
    why: "only the whole name may not start with requests.",
  },
  {
    name: "kubernetes.io.example/foo",
    kubelet: "accept",
    why: "kubernetes.io only counts right before the /",
  },
  { name: `example.com/${label(63, "x")}`, kubelet: "accept", why: "63-character name part" },
  { name: `${domainOf(244)}/foo`, kubelet: "accept", why: "requests.<domain> is exactly 253 characters" },
  { name: "foo", kubelet: "refuse", why: "no / makes it native" },
  { name: "kubernetes.io/foo", kubelet: "refuse", why: "native domain" },
  { name: "example.kubernetes.io/foo", kubelet: "refuse", why: "a *kubernetes.io/ domain is native" },
  { name: "notkubernetes.io/foo", kubelet: "refuse", why: "contains kubernetes.io/" },
  { name: "requests.example/foo", kubelet: "refuse", why: "starts with requests." },
  { name: "Example.com/foo", kubelet: "refuse", why: "domain must be lower case" },
  { name: "example.com/foo/bar", kubelet: "refuse", why: "two slashes" },
  { name: "example.com/", kubelet: "refuse", why: "empty name part" },
  { name: "/foo", kubelet: "refuse", why: "empty domain" },
  { name: "example.com/-foo", kubelet: "refuse", why: "name part must start alphanumeric" },
  { name: "example.com/foo bar", kubelet: "refuse", why: "space in the name part" },
  { name: `example.com/${label(64, "x")}`, kubelet: "refuse", why: "64-character name part" },
  {
    name: `${domainOf(245)}/foo`,
    kubelet: "refuse",
    why: "requests.<domain> exceeds a 253-character subdomain",
  },
  { name: "", kubelet: "refuse", why: "empty" },
];

describe("resource names, by the kubelet's rules", () => {
  it("the table's domains have the lengths it claims", () => {
    expect(domainOf(244)).toHaveLength(244);
    expect(domainOf(245)).toHaveLength(245);
  });

  it.each(RESOURCE_NAMES)("$kubelet $name ($why): the rule", ({ name, kubelet: answer }) => {
    expect(isExtendedResourceName(name)).toBe(answer === "accept");
  });

  it("Register answers every name of the table as the kubelet does, with the kubelet's message", async () => {
    const answers: { name: string; got: string }[] = [];
    for (const { name, kubelet: answer } of RESOURCE_NAMES) {
      const { error } = await register(name, {
        preStartRequired: false,
        getPreferredAllocationAvailable: false,
      });
      if (answer === "accept") {
        if (error === undefined) await devicesSeen(name);
        answers.push({ name, got: error === undefined ? "accept" : `refuse: ${error.details}` });
      } else {
        answers.push({ name, got: error === undefined ? "accept" : error.details });
      }
    }
    expect(answers).toEqual(
      RESOURCE_NAMES.map(({ name, kubelet: answer }) => ({
        name,
        got: answer === "accept" ? "accept" : `the ResourceName ${JSON.stringify(name)} is invalid`,
      })),
    );
  });

  it("refuses a version the kubelet does not speak", async () => {
    const { error } = await register(
      "example.com/foo",
      { preStartRequired: false, getPreferredAllocationAvailable: false },
      "v1alpha1",
    );
    expect(error?.details).toBe(
      'requested API version "v1alpha1" is not supported by kubelet. Supported version is ["v1beta1"]',
    );
  });
});

describe("container start", () => {
  it("calls PreStartContainer with the container's devices and the kubelet's 30 s deadline when the plugin asks", async () => {
    const { plugin } = await register("example.com/pre", {
      preStartRequired: true,
      getPreferredAllocationAvailable: false,
    });
    await devicesSeen("example.com/pre");
    const { deviceIds } = await kubelet.allocate("example.com/pre", 2);
    expect(plugin.preStartCalls.map((c) => c.request.devicesIds)).toEqual([deviceIds]);
    const deadlineMs = plugin.preStartCalls[0]!.deadlineMs;
    expect(deadlineMs).toBeGreaterThan(25_000);
    expect(deadlineMs).toBeLessThanOrEqual(30_000);
  });

  it("does not call PreStartContainer when the plugin does not ask", async () => {
    const { plugin } = await register("example.com/nopre", {
      preStartRequired: false,
      getPreferredAllocationAvailable: false,
    });
    await devicesSeen("example.com/nopre");
    await kubelet.allocate("example.com/nopre", 1);
    expect(plugin.preStartCalls).toEqual([]);
  });
});

describe("GetPreferredAllocation", () => {
  it("sends the devices already chosen as must_include, inside available, with the whole request as the size", async () => {
    const resource = "example.com/pref";
    const { plugin } = await register(resource, {
      preStartRequired: false,
      getPreferredAllocationAvailable: true,
    });
    await devicesSeen(resource);
    // An init container of the pod held d-1 and d-4; the app container may reuse them.
    plugin.preferredAnswer = () => ["d-1", "d-4"];
    const init = await kubelet.allocate(resource, 2);
    const reuse = init.deviceIds;
    expect(reuse).toEqual(["d-1", "d-4"]);

    // The plugin keeps must_include and picks d-5 and d-0, plus an id the kubelet never offered.
    plugin.preferredAnswer = (req) => [
      ...req.containerRequests[0]!.mustIncludeDeviceIDs,
      "d-5",
      "nope",
      "d-0",
    ];
    const app = await kubelet.allocate(resource, 4, { reuse });

    const request = plugin.preferredRequests.at(-1)!.containerRequests[0]!;
    expect(request.mustIncludeDeviceIDs.slice().sort()).toEqual(reuse.slice().sort());
    expect(request.allocationSize).toBe(4);
    const free = DEVICE_IDS.filter((id) => !reuse.includes(id));
    expect(request.availableDeviceIDs.slice().sort()).toEqual([...free, ...reuse].sort());
    // Honoured: the reused devices and the plugin's picks that were available, nothing else.
    expect(app.deviceIds.slice().sort()).toEqual([...reuse, "d-0", "d-5"].sort());
  });

  it("asks nothing when the reused devices cover the request", async () => {
    const resource = "example.com/covered";
    const { plugin } = await register(resource, {
      preStartRequired: false,
      getPreferredAllocationAvailable: true,
    });
    await devicesSeen(resource);
    plugin.preferredAnswer = () => [];
    const init = await kubelet.allocate(resource, 2);
    const asked = plugin.preferredRequests.length;
    const app = await kubelet.allocate(resource, 2, { reuse: init.deviceIds });
    expect(app.deviceIds).toEqual(init.deviceIds);
    expect(plugin.preferredRequests).toHaveLength(asked);
  });
});
