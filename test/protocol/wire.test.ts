// Proves the generated TypeScript and the kubelet's own .proto agree on the bytes, in both directions.
import protobuf from "protobufjs";
import { beforeAll, describe, expect, it } from "vitest";
import {
  AllocateRequest,
  AllocateResponse,
  ListAndWatchResponse,
  PluginInfo,
  PreferredAllocationRequest,
  PreferredAllocationResponse,
  PreStartContainerRequest,
  RegisterRequest,
  RegistrationStatus,
} from "../../src/plugin-runtime/proto/index.js";
import { locateUpstreamProtoFiles } from "../../tools/proto/upstream.js";

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
];

const toUpstreamObject = (type: protobuf.Type, message: protobuf.Message): Record<string, unknown> =>
  type.toObject(message, { longs: Number, defaults: true, arrays: true, objects: true });

let upstreamRoot: protobuf.Root;

beforeAll(() => {
  const upstream = locateUpstreamProtoFiles();
  // keepCase: the comparison is against the kubelet's own field names.
  upstreamRoot = new protobuf.Root().loadSync([upstream.devicePlugin, upstream.pluginRegistration], {
    keepCase: true,
  });
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
