// Proves the generated TypeScript and the kubelet's own .proto agree on the bytes, in both directions.
import protobuf from "protobufjs";
import { beforeAll, describe, expect, it } from "vitest";
import {
  AllocatableResourcesResponse,
  AllocateRequest,
  AllocateResponse,
  draV1,
  draV1beta1,
  GetPodResourcesRequest,
  GetPodResourcesResponse,
  ListAndWatchResponse,
  ListPodResourcesResponse,
  PluginInfo,
  PreferredAllocationRequest,
  PreferredAllocationResponse,
  PreStartContainerRequest,
  RegisterRequest,
  RegistrationStatus,
} from "../../src/plugin-runtime/proto/index.js";
import { locateUpstreamProtoFiles, readProtoWithoutGogoImport } from "../../tools/proto/upstream.js";

interface GeneratedCodec<T> {
  encode(message: T): { finish(): Uint8Array };
  decode(input: Uint8Array): T;
}

interface WireCase<T> {
  readonly name: string;
  readonly codec: GeneratedCodec<T>;
  /** Fully qualified name in the upstream .proto. */
  readonly upstreamType: string;
  /** The message as the runtime builds it (generated TypeScript field names). */
  readonly value: T;
  /**
   * The same message as the kubelet's schema names it (proto field names); unset message fields
   * read back as null.
   */
  readonly upstreamValue: Record<string, unknown>;
}

// Keeps each case's value checked against its own generated type while the table stays one array.
const wireCase = <T>(testCase: WireCase<T>): WireCase<unknown> => testCase;

const cases: readonly WireCase<unknown>[] = [
  wireCase({
    name: "AllocateResponse with envs, mounts, devices, annotations and CDI devices",
    codec: AllocateResponse,
    upstreamType: "v1beta1.AllocateResponse",
    value: {
      containerResponses: [
        {
          envs: { DPO_HARDWARE_VENDOR_EXAMPLE_FOO: "foo-0::1,foo-1::0", FOO_VISIBLE: "all" },
          mounts: [
            { containerPath: "/usr/local/foo", hostPath: "/opt/foo/lib", readOnly: true },
            { containerPath: "/var/run/foo", hostPath: "/run/foo", readOnly: false },
          ],
          devices: [
            { containerPath: "/dev/foo0", hostPath: "/dev/foo0", permissions: "rw" },
            { containerPath: "/dev/foo-ctl", hostPath: "/dev/foo-ctl", permissions: "rwm" },
          ],
          annotations: { "hardware-vendor.example/foo": "foo-0::1,foo-1::0" },
          cdiDevices: [
            { name: "hardware-vendor.example/foo=foo-0" },
            { name: "hardware-vendor.example/foo=foo-1" },
          ],
        },
        // A container that gets nothing still needs its own, empty, response in its position.
        { envs: {}, mounts: [], devices: [], annotations: {}, cdiDevices: [] },
      ],
    },
    upstreamValue: {
      container_responses: [
        {
          envs: { DPO_HARDWARE_VENDOR_EXAMPLE_FOO: "foo-0::1,foo-1::0", FOO_VISIBLE: "all" },
          mounts: [
            { container_path: "/usr/local/foo", host_path: "/opt/foo/lib", read_only: true },
            { container_path: "/var/run/foo", host_path: "/run/foo", read_only: false },
          ],
          devices: [
            { container_path: "/dev/foo0", host_path: "/dev/foo0", permissions: "rw" },
            { container_path: "/dev/foo-ctl", host_path: "/dev/foo-ctl", permissions: "rwm" },
          ],
          annotations: { "hardware-vendor.example/foo": "foo-0::1,foo-1::0" },
          cdi_devices: [
            { name: "hardware-vendor.example/foo=foo-0" },
            { name: "hardware-vendor.example/foo=foo-1" },
          ],
        },
        { envs: {}, mounts: [], devices: [], annotations: {}, cdi_devices: [] },
      ],
    },
  }),
  wireCase({
    name: "ListAndWatchResponse with NUMA topology",
    codec: ListAndWatchResponse,
    upstreamType: "v1beta1.ListAndWatchResponse",
    value: {
      devices: [
        { ID: "foo-0::0", health: "Healthy", topology: { nodes: [{ ID: 0 }] } },
        // int64 beyond 32 bits, to catch a narrowed integer type on either side.
        { ID: "foo-1::3", health: "Unhealthy", topology: { nodes: [{ ID: 1 }, { ID: 2 ** 40 }] } },
        { ID: "bar", health: "Healthy" },
      ],
    },
    upstreamValue: {
      devices: [
        { ID: "foo-0::0", health: "Healthy", topology: { nodes: [{ ID: 0 }] } },
        { ID: "foo-1::3", health: "Unhealthy", topology: { nodes: [{ ID: 1 }, { ID: 2 ** 40 }] } },
        { ID: "bar", health: "Healthy", topology: null },
      ],
    },
  }),
  wireCase({
    name: "PreferredAllocationRequest",
    codec: PreferredAllocationRequest,
    upstreamType: "v1beta1.PreferredAllocationRequest",
    value: {
      containerRequests: [
        {
          availableDeviceIDs: ["foo-0::0", "foo-0::1", "foo-1::0", "foo-1::1"],
          mustIncludeDeviceIDs: ["foo-1::0"],
          allocationSize: 3,
        },
        { availableDeviceIDs: ["foo-2::0"], mustIncludeDeviceIDs: [], allocationSize: 1 },
      ],
    },
    upstreamValue: {
      container_requests: [
        {
          available_deviceIDs: ["foo-0::0", "foo-0::1", "foo-1::0", "foo-1::1"],
          must_include_deviceIDs: ["foo-1::0"],
          allocation_size: 3,
        },
        { available_deviceIDs: ["foo-2::0"], must_include_deviceIDs: [], allocation_size: 1 },
      ],
    },
  }),
  wireCase({
    name: "PreferredAllocationResponse",
    codec: PreferredAllocationResponse,
    upstreamType: "v1beta1.PreferredAllocationResponse",
    value: {
      containerResponses: [{ deviceIDs: ["foo-1::0", "foo-1::1", "foo-0::0"] }, { deviceIDs: ["foo-2::0"] }],
    },
    upstreamValue: {
      container_responses: [{ deviceIDs: ["foo-1::0", "foo-1::1", "foo-0::0"] }, { deviceIDs: ["foo-2::0"] }],
    },
  }),
  wireCase({
    name: "AllocateRequest",
    codec: AllocateRequest,
    upstreamType: "v1beta1.AllocateRequest",
    value: { containerRequests: [{ devicesIds: ["foo-0::0", "foo-0::1"] }, { devicesIds: ["foo-3::2"] }] },
    upstreamValue: {
      container_requests: [{ devices_ids: ["foo-0::0", "foo-0::1"] }, { devices_ids: ["foo-3::2"] }],
    },
  }),
  wireCase({
    name: "PreStartContainerRequest",
    codec: PreStartContainerRequest,
    upstreamType: "v1beta1.PreStartContainerRequest",
    value: { devicesIds: ["foo-0::0"] },
    upstreamValue: { devices_ids: ["foo-0::0"] },
  }),
  wireCase({
    name: "RegisterRequest with options",
    codec: RegisterRequest,
    upstreamType: "v1beta1.RegisterRequest",
    value: {
      version: "v1beta1",
      endpoint: "dpo-hardware-vendor.example-foo-1700000000000.sock",
      resourceName: "hardware-vendor.example/foo",
      options: { preStartRequired: true, getPreferredAllocationAvailable: true },
    },
    upstreamValue: {
      version: "v1beta1",
      endpoint: "dpo-hardware-vendor.example-foo-1700000000000.sock",
      resource_name: "hardware-vendor.example/foo",
      options: { pre_start_required: true, get_preferred_allocation_available: true },
    },
  }),
  wireCase({
    name: "PluginInfo",
    codec: PluginInfo,
    upstreamType: "pluginregistration.PluginInfo",
    value: {
      type: "DevicePlugin",
      name: "hardware-vendor.example/foo",
      endpoint: "/var/lib/kubelet/device-plugins/dpo-foo.sock",
      supportedVersions: ["v1beta1"],
    },
    upstreamValue: {
      type: "DevicePlugin",
      name: "hardware-vendor.example/foo",
      endpoint: "/var/lib/kubelet/device-plugins/dpo-foo.sock",
      supported_versions: ["v1beta1"],
    },
  }),
  wireCase({
    name: "RegistrationStatus with an error",
    codec: RegistrationStatus,
    upstreamType: "pluginregistration.RegistrationStatus",
    value: { pluginRegistered: false, error: "resource name already registered" },
    upstreamValue: { plugin_registered: false, error: "resource name already registered" },
  }),
  wireCase({
    name: "ListPodResourcesResponse with devices, CPUs, memory and DRA claims",
    codec: ListPodResourcesResponse,
    upstreamType: "v1.ListPodResourcesResponse",
    value: {
      podResources: [
        {
          name: "trainer-0",
          namespace: "ml",
          containers: [
            {
              name: "main",
              devices: [
                {
                  resourceName: "hardware-vendor.example/foo",
                  deviceIds: ["foo-0::1"],
                  topology: { nodes: [{ ID: 0 }] },
                },
                { resourceName: "hardware-vendor.example/foo", deviceIds: ["foo-3::0"] },
              ],
              // int64 and uint64 beyond 32 bits, to catch a narrowed integer type on either side.
              cpuIds: [2, 3, 2 ** 33],
              memory: [{ memoryType: "hugepages-1Gi", size: 2 ** 34, topology: { nodes: [{ ID: 1 }] } }],
              dynamicResources: [
                {
                  claimName: "gpu",
                  claimNamespace: "ml",
                  claimResources: [
                    {
                      cdiDevices: [{ name: "vendor.example/gpu=gpu-0" }],
                      driverName: "gpu.vendor.example",
                      poolName: "node-a",
                      deviceName: "gpu-0",
                    },
                  ],
                },
              ],
            },
            // A container without devices is listed too, with empty lists.
            { name: "sidecar", devices: [], cpuIds: [], memory: [], dynamicResources: [] },
          ],
          // Pod-level exclusive CPUs and memory (1.37), overlapping the containers' own.
          cpuIds: [2, 3, 2 ** 33, 4],
          memory: [{ memoryType: "memory", size: 2 ** 33 }],
        },
      ],
    },
    upstreamValue: {
      pod_resources: [
        {
          name: "trainer-0",
          namespace: "ml",
          containers: [
            {
              name: "main",
              devices: [
                {
                  resource_name: "hardware-vendor.example/foo",
                  device_ids: ["foo-0::1"],
                  topology: { nodes: [{ ID: 0 }] },
                },
                { resource_name: "hardware-vendor.example/foo", device_ids: ["foo-3::0"], topology: null },
              ],
              cpu_ids: [2, 3, 2 ** 33],
              memory: [{ memory_type: "hugepages-1Gi", size: 2 ** 34, topology: { nodes: [{ ID: 1 }] } }],
              dynamic_resources: [
                {
                  claim_name: "gpu",
                  claim_namespace: "ml",
                  claim_resources: [
                    {
                      cdi_devices: [{ name: "vendor.example/gpu=gpu-0" }],
                      driver_name: "gpu.vendor.example",
                      pool_name: "node-a",
                      device_name: "gpu-0",
                    },
                  ],
                },
              ],
            },
            { name: "sidecar", devices: [], cpu_ids: [], memory: [], dynamic_resources: [] },
          ],
          cpu_ids: [2, 3, 2 ** 33, 4],
          memory: [{ memory_type: "memory", size: 2 ** 33, topology: null }],
        },
      ],
    },
  }),
  wireCase({
    name: "AllocatableResourcesResponse",
    codec: AllocatableResourcesResponse,
    upstreamType: "v1.AllocatableResourcesResponse",
    value: {
      devices: [
        {
          resourceName: "hardware-vendor.example/foo",
          deviceIds: ["foo-0"],
          topology: { nodes: [{ ID: 0 }] },
        },
      ],
      cpuIds: [0, 1],
      memory: [{ memoryType: "memory", size: 2 ** 36 }],
    },
    upstreamValue: {
      devices: [
        {
          resource_name: "hardware-vendor.example/foo",
          device_ids: ["foo-0"],
          topology: { nodes: [{ ID: 0 }] },
        },
      ],
      cpu_ids: [0, 1],
      memory: [{ memory_type: "memory", size: 2 ** 36, topology: null }],
    },
  }),
  wireCase({
    name: "GetPodResourcesRequest",
    codec: GetPodResourcesRequest,
    upstreamType: "v1.GetPodResourcesRequest",
    value: { podName: "trainer-0", podNamespace: "ml" },
    upstreamValue: { pod_name: "trainer-0", pod_namespace: "ml" },
  }),
  wireCase({
    name: "GetPodResourcesResponse",
    codec: GetPodResourcesResponse,
    upstreamType: "v1.GetPodResourcesResponse",
    value: { podResources: { name: "idle", namespace: "default", containers: [], cpuIds: [], memory: [] } },
    upstreamValue: {
      pod_resources: { name: "idle", namespace: "default", containers: [], cpu_ids: [], memory: [] },
    },
  }),
  // The DRA plugin API: v1 and v1beta1 are the same messages in two packages; both are checked.
  ...(
    [
      ["k8s.io.kubelet.pkg.apis.dra.v1", draV1],
      ["k8s.io.kubelet.pkg.apis.dra.v1beta1", draV1beta1],
    ] as const
  ).flatMap(([pkg, api]) => [
    wireCase({
      name: `${pkg}.NodePrepareResourcesRequest`,
      codec: api.NodePrepareResourcesRequest,
      upstreamType: `${pkg}.NodePrepareResourcesRequest`,
      value: { claims: [{ namespace: "ml", uid: "0b5c6a9e-1c1f-4d53-9c2a-6f0c8d1e2f3a", name: "gpu" }] },
      upstreamValue: {
        claims: [{ namespace: "ml", uid: "0b5c6a9e-1c1f-4d53-9c2a-6f0c8d1e2f3a", name: "gpu" }],
      },
    }),
    wireCase({
      name: `${pkg}.NodePrepareResourcesResponse with devices and a failed claim`,
      codec: api.NodePrepareResourcesResponse,
      upstreamType: `${pkg}.NodePrepareResourcesResponse`,
      value: {
        claims: {
          "uid-a": {
            devices: [
              {
                requestNames: ["gpu"],
                poolName: "node-1",
                deviceName: "foo-0",
                cdiDeviceIds: ["foo.example.com/device=uid-a-foo-0"],
              },
            ],
            error: "",
          },
          "uid-b": { devices: [], error: "device foo-9 is unhealthy" },
        },
      },
      upstreamValue: {
        claims: {
          "uid-a": {
            devices: [
              {
                request_names: ["gpu"],
                pool_name: "node-1",
                device_name: "foo-0",
                cdi_device_ids: ["foo.example.com/device=uid-a-foo-0"],
              },
            ],
            error: "",
          },
          "uid-b": { devices: [], error: "device foo-9 is unhealthy" },
        },
      },
    }),
    wireCase({
      name: `${pkg}.NodeUnprepareResourcesResponse`,
      codec: api.NodeUnprepareResourcesResponse,
      upstreamType: `${pkg}.NodeUnprepareResourcesResponse`,
      value: { claims: { "uid-a": { error: "" }, "uid-b": { error: "permission denied" } } },
      upstreamValue: { claims: { "uid-a": { error: "" }, "uid-b": { error: "permission denied" } } },
    }),
  ]),
];

const toUpstreamObject = (type: protobuf.Type, message: protobuf.Message): Record<string, unknown> =>
  type.toObject(message, { longs: Number, defaults: true, arrays: true, objects: true });

let upstreamRoot: protobuf.Root;

beforeAll(() => {
  const upstream = locateUpstreamProtoFiles();
  // keepCase: the comparison is against the kubelet's own field names.
  upstreamRoot = new protobuf.Root();
  for (const file of [
    upstream.devicePlugin,
    upstream.pluginRegistration,
    upstream.podResources,
    upstream.draV1,
    upstream.draV1beta1,
  ]) {
    protobuf.parse(readProtoWithoutGogoImport(file), upstreamRoot, { keepCase: true });
  }
  upstreamRoot.resolveAll();
});

describe("generated code encodes what the kubelet's schema decodes", () => {
  it.each(cases)("$name", ({ codec, upstreamType, value, upstreamValue }) => {
    const type = upstreamRoot.lookupType(upstreamType);
    const bytes = codec.encode(value).finish();

    expect(toUpstreamObject(type, type.decode(bytes))).toEqual(upstreamValue);
  });
});

describe("the kubelet's schema encodes what generated code decodes", () => {
  it.each(cases)("$name", ({ codec, upstreamType, value, upstreamValue }) => {
    const type = upstreamRoot.lookupType(upstreamType);
    expect(type.verify(upstreamValue)).toBeNull();
    const bytes = type.encode(type.fromObject(upstreamValue)).finish();

    expect(codec.decode(bytes)).toEqual(value);
  });
});
