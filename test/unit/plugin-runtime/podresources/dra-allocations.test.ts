// Which container holds which of a DRA plugin's devices, from the dynamic resources of the kubelet's
// PodResources List: claimed devices resolved by driver, pool and device name to the plugin's device ids.
import { describe, expect, it } from "vitest";
import { draDeviceName } from "../../../../src/plugin-runtime/dra/devices.js";
import {
  draAllocationsOf,
  type DraDeviceTable,
} from "../../../../src/plugin-runtime/podresources/allocations.js";
import type { ListPodResourcesResponse } from "../../../../src/plugin-runtime/proto/index.js";

const DRIVER = "gpu.example.com";
const NODE = "node-a";

/** A backend id that is not a DNS label: its DRA device name differs (`ttyusb0-<hash>`). */
const SERIAL = draDeviceName("ttyUSB0");

/** The plugin's devices: DRA device name → backend id. */
const TABLE: DraDeviceTable = {
  driver: DRIVER,
  pool: NODE,
  ids: new Map(["gpu-0", "gpu-1", "ttyUSB0"].map((id) => [draDeviceName(id), id])),
};

/** One claimed device as the kubelet lists it: driver, pool, device name and the CDI ids prepared. */
type Claimed = [driver: string, pool: string, device: string];

interface ContainerRow {
  name: string;
  /** Claim name → its devices. */
  claims?: Record<string, Claimed[]>;
  /** Device-plugin ids of another resource the container also holds. */
  devices?: string[];
}

function list(
  pods: { name: string; namespace: string; containers: ContainerRow[] }[],
): ListPodResourcesResponse {
  return {
    podResources: pods.map((pod) => ({
      name: pod.name,
      namespace: pod.namespace,
      cpuIds: [],
      memory: [],
      containers: pod.containers.map((c) => ({
        name: c.name,
        devices: c.devices ? [{ resourceName: "example.com/foo", deviceIds: c.devices }] : [],
        cpuIds: [],
        memory: [],
        dynamicResources: Object.entries(c.claims ?? {}).map(([claimName, devices]) => ({
          claimName,
          claimNamespace: pod.namespace,
          claimResources: devices.map(([driverName, poolName, deviceName]) => ({
            driverName,
            poolName,
            deviceName,
            cdiDevices: [{ name: `${driverName}/device=${deviceName}` }],
          })),
        })),
      })),
    })),
  };
}

const cases: {
  name: string;
  pods: Parameters<typeof list>[0];
  want: Record<string, string>;
}[] = [
  {
    name: "nothing claimed: every device free",
    pods: [{ name: "web", namespace: "shop", containers: [{ name: "app", devices: ["gpu-0"] }] }],
    want: {},
  },
  {
    name: "several containers of several pods, one claim with two devices",
    pods: [
      {
        name: "trainer",
        namespace: "ml",
        containers: [
          {
            name: "main",
            claims: {
              "trainer-gpus": [
                [DRIVER, NODE, "gpu-0"],
                [DRIVER, NODE, "gpu-1"],
              ],
            },
          },
          { name: "logger" },
        ],
      },
      {
        name: "serial",
        namespace: "lab",
        containers: [{ name: "reader", claims: { "serial-port": [[DRIVER, NODE, SERIAL]] } }],
      },
    ],
    want: { "gpu-0": "ml/trainer/main", "gpu-1": "ml/trainer/main", ttyUSB0: "lab/serial/reader" },
  },
  {
    name: "other drivers' devices, other pools and device-plugin ids are not this plugin's",
    pods: [
      {
        name: "mixed",
        namespace: "ml",
        containers: [
          {
            name: "main",
            devices: ["gpu-1"],
            claims: {
              nic: [["nic.example.com", NODE, "gpu-1"]],
              remote: [[DRIVER, "node-b", "gpu-1"]],
              gpu: [[DRIVER, NODE, "gpu-0"]],
            },
          },
        ],
      },
    ],
    want: { "gpu-0": "ml/mixed/main" },
  },
  {
    name: "a claim shared by two containers and by another pod keeps the first container",
    pods: [
      {
        name: "reader-a",
        namespace: "ml",
        containers: [
          { name: "sidecar", claims: { shared: [[DRIVER, NODE, "gpu-1"]] } },
          { name: "main", claims: { shared: [[DRIVER, NODE, "gpu-1"]] } },
        ],
      },
      {
        name: "reader-b",
        namespace: "ml",
        containers: [{ name: "main", claims: { shared: [[DRIVER, NODE, "gpu-1"]] } }],
      },
    ],
    want: { "gpu-1": "ml/reader-a/sidecar" },
  },
  {
    name: "a device name the plugin does not know (gone from the backend) is left out",
    pods: [
      {
        name: "old",
        namespace: "ml",
        containers: [
          {
            name: "main",
            claims: {
              gpu: [
                [DRIVER, NODE, "gpu-7"],
                [DRIVER, NODE, "gpu-0"],
              ],
            },
          },
        ],
      },
    ],
    want: { "gpu-0": "ml/old/main" },
  },
  {
    name: "the device's id, not its DRA name: a DRA name equal to another device's id is not that device",
    pods: [
      { name: "p", namespace: "ns", containers: [{ name: "c", claims: { x: [[DRIVER, NODE, "ttyUSB0"]] } }] },
    ],
    want: {},
  },
];

describe("draAllocationsOf", () => {
  it.each(cases)("$name", ({ pods, want }) => {
    const held = draAllocationsOf(list(pods), TABLE);
    expect(
      Object.fromEntries([...held].map(([id, h]) => [id, `${h.namespace}/${h.pod}/${h.container}`])),
    ).toEqual(want);
  });

  it("an empty answer (no pods) holds nothing", () => {
    expect(draAllocationsOf({ podResources: [] }, TABLE).size).toBe(0);
  });
});
