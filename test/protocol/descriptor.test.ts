// Proves our .proto files and the generated gRPC definitions carry exactly the kubelet's wire contract.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import protobuf from "protobufjs";
import { DRA_REGISTERED_SERVICES } from "../../src/plugin-runtime/dra/dra-plugin.js";
import { beforeAll, describe, expect, it } from "vitest";
import { POD_RESOURCES_DIR, POD_RESOURCES_SOCKET_NAME } from "../../src/contract/kubelet-paths.js";
import {
  DEVICE_HEALTHY,
  DEVICE_PLUGIN_TYPE,
  DEVICE_UNHEALTHY,
  DevicePluginClient,
  DRA_PLUGIN_TYPE,
  DRA_SUPPORTED_SERVICES,
  DRA_HEALTH_SERVICES,
  DRA_HEALTH_V1_SERVICE,
  DRA_HEALTH_V1ALPHA1_SERVICE,
  DRA_V1_SERVICE,
  DRA_V1BETA1_SERVICE,
  draV1,
  draV1beta1,
  DevicePluginService,
  KUBELET_API_VERSION,
  KUBELET_SOCKET_NAME,
  PluginRegistrationClient,
  PluginRegistrationService,
  PodResourcesListerClient,
  PodResourcesListerService,
  PRE_START_CONTAINER_TIMEOUT_MS,
  RegistrationClient,
  RegistrationService,
  SUPPORTED_KUBELET_API_VERSIONS,
} from "../../src/plugin-runtime/proto/index.js";
import {
  isGogoOption,
  KUBELET_MODULE,
  KUBELET_MODULE_VERSION,
  KUBERNETES_MODULE,
  kubernetesVersionOf,
  locateKubeletDraSources,
  locateKubeletPodResourcesSources,
  locateUpstreamProtoFiles,
  OUR_PROTO_FILES,
  readProtoWithoutGogoImport,
  type UpstreamProtoFiles,
} from "../../tools/proto/upstream.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/**
 * Flattens a parsed schema into "element → wire-relevant attributes" entries, so two schemas can be
 * compared entry by entry and a difference printed as one line per element.
 */
function describeContract(root: protobuf.Root): Map<string, string> {
  root.resolveAll();
  const entries = new Map<string, string>();
  const nameOf = (object: protobuf.ReflectionObject): string => object.fullName.replace(/^\./, "");
  // Options change the wire only through explicit settings such as [packed = false]; print them when set.
  // gogoproto options (upstream DRA files still carry them) name Go fields and methods, nothing on the
  // wire, and our files leave them out.
  const optionsOf = (options: Record<string, unknown> | undefined): string => {
    const sorted = Object.entries(options ?? {})
      .filter(([name]) => !isGogoOption(name))
      .sort(([a], [b]) => a.localeCompare(b));
    return sorted.length === 0 ? "" : ` options=${JSON.stringify(Object.fromEntries(sorted))}`;
  };

  const describeField = (field: protobuf.Field): string => {
    const typeName = field.resolvedType ? nameOf(field.resolvedType) : field.type;
    const type = field instanceof protobuf.MapField ? `map<${field.keyType}, ${typeName}>` : typeName;
    // proto3 `optional` shows up as the proto3_optional option and a synthetic oneof.
    const label = field.repeated ? "repeated" : field.required ? "required" : "singular";
    return `number=${field.id} type=${type} label=${label}${optionsOf(field.options)}`;
  };

  const visit = (namespace: protobuf.NamespaceBase): void => {
    for (const child of namespace.nestedArray) {
      if (child instanceof protobuf.Type) {
        const message = nameOf(child);
        entries.set(
          `message ${message}`,
          `fields=${child.fieldsArray.length} reserved=${JSON.stringify(child.reserved ?? [])}${optionsOf(child.options)}`,
        );
        for (const field of child.fieldsArray) {
          entries.set(`message ${message} field ${field.name}`, describeField(field));
        }
        for (const oneof of child.oneofsArray) {
          entries.set(
            `message ${message} oneof ${oneof.name}`,
            `fields=${[...oneof.oneof].sort().join(",")}`,
          );
        }
        visit(child);
      } else if (child instanceof protobuf.Enum) {
        for (const [valueName, valueNumber] of Object.entries(child.values)) {
          entries.set(`enum ${nameOf(child)} value ${valueName}`, `number=${valueNumber}`);
        }
      } else if (child instanceof protobuf.Service) {
        const service = nameOf(child);
        entries.set(`service ${service}`, `methods=${child.methodsArray.length}${optionsOf(child.options)}`);
        for (const method of child.methodsArray) {
          const request = method.resolvedRequestType
            ? nameOf(method.resolvedRequestType)
            : method.requestType;
          const response = method.resolvedResponseType
            ? nameOf(method.resolvedResponseType)
            : method.responseType;
          entries.set(
            `service ${service} method ${method.name}`,
            `request=${request} response=${response} clientStreaming=${method.requestStream === true} ` +
              `serverStreaming=${method.responseStream === true}`,
          );
        }
      } else if (child instanceof protobuf.Namespace) {
        entries.set(`package ${nameOf(child)}`, `package${optionsOf(child.options)}`);
        visit(child);
      }
    }
  };
  visit(root);
  return entries;
}

/** One line per differing element: `-` only upstream, `+` only ours, `~` both but different. */
function diffContracts(upstream: Map<string, string>, ours: Map<string, string>): string[] {
  const keys = [...new Set([...upstream.keys(), ...ours.keys()])].sort();
  const lines: string[] = [];
  for (const key of keys) {
    const upstreamValue = upstream.get(key);
    const ourValue = ours.get(key);
    if (upstreamValue === ourValue) continue;
    if (ourValue === undefined) lines.push(`- ${key}: ${upstreamValue} (missing from ours)`);
    else if (upstreamValue === undefined) lines.push(`+ ${key}: ${ourValue} (not upstream)`);
    else lines.push(`~ ${key}: upstream ${upstreamValue} | ours ${ourValue}`);
  }
  return lines;
}

// keepCase: protobufjs would otherwise camel-case field names and hide a renamed field. None of these
// files imports anything but gogo.proto, which is not needed to read the wire contract.
const parseProtoText = (text: string, root = new protobuf.Root()): protobuf.Root =>
  protobuf.parse(text, root, { keepCase: true }).root;
const loadProtoFile = (file: string): protobuf.Root => parseProtoText(readProtoWithoutGogoImport(file));

let upstream: UpstreamProtoFiles;

beforeAll(() => {
  upstream = locateUpstreamProtoFiles();
});

const contractFiles = [
  {
    name: "deviceplugin/v1beta1",
    ours: OUR_PROTO_FILES.devicePlugin,
    upstreamOf: (u: UpstreamProtoFiles) => u.devicePlugin,
  },
  {
    name: "pluginregistration/v1",
    ours: OUR_PROTO_FILES.pluginRegistration,
    upstreamOf: (u: UpstreamProtoFiles) => u.pluginRegistration,
  },
  {
    name: "podresources/v1",
    ours: OUR_PROTO_FILES.podResources,
    upstreamOf: (u: UpstreamProtoFiles) => u.podResources,
  },
  {
    name: "dra/v1",
    ours: OUR_PROTO_FILES.draV1,
    upstreamOf: (u: UpstreamProtoFiles) => u.draV1,
  },
  {
    name: "dra/v1beta1",
    ours: OUR_PROTO_FILES.draV1beta1,
    upstreamOf: (u: UpstreamProtoFiles) => u.draV1beta1,
  },
  {
    name: "dra-health/v1",
    ours: OUR_PROTO_FILES.draHealthV1,
    upstreamOf: (u: UpstreamProtoFiles) => u.draHealthV1,
  },
  {
    name: "dra-health/v1alpha1",
    ours: OUR_PROTO_FILES.draHealthV1alpha1,
    upstreamOf: (u: UpstreamProtoFiles) => u.draHealthV1alpha1,
  },
] as const;

describe(`.proto files match ${KUBELET_MODULE}@${KUBELET_MODULE_VERSION}`, () => {
  it.each(contractFiles)("$name: every message, field, oneof, service and method", (file) => {
    const upstreamContract = describeContract(loadProtoFile(file.upstreamOf(upstream)));
    const ourContract = describeContract(loadProtoFile(path.join(repoRoot, file.ours)));

    expect(diffContracts(upstreamContract, ourContract)).toEqual([]);
    // Guards against both sides parsing to nothing and "matching" trivially.
    expect(upstreamContract.size).toBeGreaterThan(10);
  });

  it("covers the elements the runtime depends on", () => {
    const contract = describeContract(loadProtoFile(upstream.devicePlugin));
    expect(contract.get("service v1beta1.DevicePlugin method ListAndWatch")).toBe(
      "request=v1beta1.Empty response=v1beta1.ListAndWatchResponse clientStreaming=false serverStreaming=true",
    );
    expect(contract.get("message v1beta1.ContainerAllocateResponse field envs")).toMatch(
      /^number=1 type=map<string, string> label=singular/,
    );
    expect(
      contract.get("message v1beta1.ContainerPreferredAllocationRequest field available_deviceIDs"),
    ).toMatch(/^number=1 type=string label=repeated/);
  });

  it("covers the PodResources elements the plugin's monitor reads", () => {
    const contract = describeContract(loadProtoFile(upstream.podResources));
    expect(contract.get("service v1.PodResourcesLister method List")).toBe(
      "request=v1.ListPodResourcesRequest response=v1.ListPodResourcesResponse clientStreaming=false serverStreaming=false",
    );
    expect(contract.get("message v1.ContainerDevices field device_ids")).toMatch(
      /^number=2 type=string label=repeated/,
    );
    expect(contract.get("message v1.ContainerResources field devices")).toMatch(
      /^number=2 type=v1.ContainerDevices label=repeated/,
    );
    // Field 1 of DynamicResource was removed upstream; the next fields keep their numbers.
    expect(contract.get("message v1.DynamicResource field claim_name")).toMatch(/^number=2 /);
  });

  it.each([
    { file: (u: UpstreamProtoFiles) => u.draV1, pkg: "k8s.io.kubelet.pkg.apis.dra.v1" },
    { file: (u: UpstreamProtoFiles) => u.draV1beta1, pkg: "k8s.io.kubelet.pkg.apis.dra.v1beta1" },
  ])("covers the DRA elements the plugin serves ($pkg)", ({ file, pkg }) => {
    const contract = describeContract(loadProtoFile(file(upstream)));
    expect(contract.get(`service ${pkg}.DRAPlugin method NodePrepareResources`)).toBe(
      `request=${pkg}.NodePrepareResourcesRequest response=${pkg}.NodePrepareResourcesResponse ` +
        "clientStreaming=false serverStreaming=false",
    );
    expect(contract.get(`message ${pkg}.NodePrepareResourcesResponse field claims`)).toMatch(
      new RegExp(`^number=1 type=map<string, ${pkg.replaceAll(".", "\\.")}\\.NodePrepareResourceResponse> `),
    );
    expect(contract.get(`message ${pkg}.Device field cdi_device_ids`)).toMatch(
      /^number=4 type=string label=repeated/,
    );
    expect(contract.get(`message ${pkg}.Claim field uid`)).toMatch(/^number=2 type=string label=singular/);
  });
});

describe("the comparison detects a changed contract", () => {
  // Each mutation breaks one aspect of our device-plugin file; the diff must name the element.
  const mutations = [
    {
      aspect: "field number",
      from: "int32 allocation_size = 3;",
      to: "int32 allocation_size = 4;",
      expectedKey: "message v1beta1.ContainerPreferredAllocationRequest field allocation_size",
    },
    {
      aspect: "field name case",
      from: "string ID = 1;",
      to: "string id = 1;",
      expectedKey: "message v1beta1.Device field ID",
    },
    {
      aspect: "scalar type",
      from: "int64 ID = 1;",
      to: "int32 ID = 1;",
      expectedKey: "message v1beta1.NUMANode field ID",
    },
    {
      aspect: "message type",
      from: "repeated Mount mounts = 2;",
      to: "repeated DeviceSpec mounts = 2;",
      expectedKey: "message v1beta1.ContainerAllocateResponse field mounts",
    },
    {
      aspect: "repeated label",
      from: "repeated string deviceIDs = 1;",
      to: "string deviceIDs = 1;",
      expectedKey: "message v1beta1.ContainerPreferredAllocationResponse field deviceIDs",
    },
    {
      aspect: "map value type",
      from: "map<string, string> annotations = 4;",
      to: "map<string, bytes> annotations = 4;",
      expectedKey: "message v1beta1.ContainerAllocateResponse field annotations",
    },
    {
      aspect: "oneof",
      from: "string health = 2;",
      to: "oneof state { string health = 2; }",
      expectedKey: "message v1beta1.Device oneof state",
    },
    {
      aspect: "server streaming",
      from: "returns (stream ListAndWatchResponse)",
      to: "returns (ListAndWatchResponse)",
      expectedKey: "service v1beta1.DevicePlugin method ListAndWatch",
    },
    {
      aspect: "request type",
      from: "rpc Allocate(AllocateRequest)",
      to: "rpc Allocate(PreStartContainerRequest)",
      expectedKey: "service v1beta1.DevicePlugin method Allocate",
    },
    {
      aspect: "package name",
      from: "package v1beta1;",
      to: "package deviceplugin.v1beta1;",
      expectedKey: "service v1beta1.DevicePlugin method Allocate",
    },
  ];

  it.each(mutations)("$aspect", ({ from, to, expectedKey }) => {
    const ourText = readFileSync(path.join(repoRoot, OUR_PROTO_FILES.devicePlugin), "utf8");
    expect(ourText, `mutation source text not found: ${from}`).toContain(from);
    const mutated = describeContract(parseProtoText(ourText.replace(from, to)));
    const upstreamContract = describeContract(loadProtoFile(upstream.devicePlugin));

    const diff = diffContracts(upstreamContract, mutated);
    expect(
      diff.some((line) => line.includes(`${expectedKey}:`)),
      diff.join("\n"),
    ).toBe(true);
  });
});

describe("the comparison detects a changed PodResources contract", () => {
  const mutations = [
    {
      aspect: "field number after a removed field",
      from: "string claim_name = 2;",
      to: "string claim_name = 1;",
      expectedKey: "message v1.DynamicResource field claim_name",
    },
    {
      aspect: "field name",
      from: "repeated string device_ids = 2;",
      to: "repeated string deviceIDs = 2;",
      expectedKey: "message v1.ContainerDevices field device_ids",
    },
    {
      aspect: "unsigned scalar",
      from: "uint64 size = 2;",
      to: "int64 size = 2;",
      expectedKey: "message v1.ContainerMemory field size",
    },
    {
      aspect: "method",
      from: "rpc Get(GetPodResourcesRequest) returns (GetPodResourcesResponse) {}",
      to: "",
      expectedKey: "service v1.PodResourcesLister method Get",
    },
  ];

  it.each(mutations)("$aspect", ({ from, to, expectedKey }) => {
    const ourText = readFileSync(path.join(repoRoot, OUR_PROTO_FILES.podResources), "utf8");
    expect(ourText, `mutation source text not found: ${from}`).toContain(from);
    const mutated = describeContract(parseProtoText(ourText.replace(from, to)));
    const upstreamContract = describeContract(loadProtoFile(upstream.podResources));

    const diff = diffContracts(upstreamContract, mutated);
    expect(
      diff.some((line) => line.includes(`${expectedKey}:`)),
      diff.join("\n"),
    ).toBe(true);
  });
});

describe("the comparison detects a changed DRA contract", () => {
  const mutations = [
    {
      aspect: "field number",
      from: "repeated string cdi_device_ids = 4;",
      to: "repeated string cdi_device_ids = 6;",
      expectedKey: "message k8s.io.kubelet.pkg.apis.dra.v1.Device field cdi_device_ids",
    },
    {
      aspect: "field name",
      from: "string uid = 2;",
      to: "string UID = 2;",
      expectedKey: "message k8s.io.kubelet.pkg.apis.dra.v1.Claim field uid",
    },
    {
      // Only gogoproto options are left out of the comparison; any other option still counts.
      aspect: "an option that is not gogoproto's",
      from: "string uid = 2;",
      to: "string uid = 2 [deprecated = true];",
      expectedKey: "message k8s.io.kubelet.pkg.apis.dra.v1.Claim field uid",
    },
    {
      aspect: "map value type",
      from: "map<string, NodeUnprepareResourceResponse> claims = 1;",
      to: "map<string, NodePrepareResourceResponse> claims = 1;",
      expectedKey: "message k8s.io.kubelet.pkg.apis.dra.v1.NodeUnprepareResourcesResponse field claims",
    },
    {
      aspect: "package name",
      from: "package k8s.io.kubelet.pkg.apis.dra.v1;",
      to: "package v1;",
      expectedKey: "service k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin method NodePrepareResources",
    },
  ];

  it.each(mutations)("$aspect", ({ from, to, expectedKey }) => {
    const ourText = readFileSync(path.join(repoRoot, OUR_PROTO_FILES.draV1), "utf8");
    expect(ourText, `mutation source text not found: ${from}`).toContain(from);
    const mutated = describeContract(parseProtoText(ourText.replace(from, to)));
    const upstreamContract = describeContract(loadProtoFile(upstream.draV1));

    const diff = diffContracts(upstreamContract, mutated);
    expect(
      diff.some((line) => line.includes(`${expectedKey}:`)),
      diff.join("\n"),
    ).toBe(true);
  });
});

describe("generated TypeScript matches the upstream services", () => {
  const generatedServices: Record<
    string,
    Record<string, { path: string; requestStream: boolean; responseStream: boolean }>
  > = {
    "v1beta1.Registration": RegistrationService,
    "v1beta1.DevicePlugin": DevicePluginService,
    "pluginregistration.Registration": PluginRegistrationService,
    "v1.PodResourcesLister": PodResourcesListerService,
    "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin": draV1.DRAPluginService,
    "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin": draV1beta1.DRAPluginService,
  };

  it("has one definition per upstream service, with every method's path and streaming flags", () => {
    const root = new protobuf.Root();
    for (const file of [
      upstream.devicePlugin,
      upstream.pluginRegistration,
      upstream.podResources,
      upstream.draV1,
      upstream.draV1beta1,
    ]) {
      parseProtoText(readProtoWithoutGogoImport(file), root);
    }
    root.resolveAll();
    const upstreamMethods: Record<string, string[]> = {};
    const collect = (namespace: protobuf.NamespaceBase): void => {
      for (const child of namespace.nestedArray) {
        if (child instanceof protobuf.Service) {
          const service = child.fullName.replace(/^\./, "");
          upstreamMethods[service] = child.methodsArray
            .map(
              (method) =>
                `/${service}/${method.name} requestStream=${method.requestStream === true} ` +
                `responseStream=${method.responseStream === true}`,
            )
            .sort();
        } else if (child instanceof protobuf.Namespace) {
          collect(child);
        }
      }
    };
    collect(root);

    const generatedMethods = Object.fromEntries(
      Object.entries(generatedServices).map(([service, definition]) => [
        service,
        Object.values(definition)
          .map(
            (method) =>
              `${method.path} requestStream=${method.requestStream} responseStream=${method.responseStream}`,
          )
          .sort(),
      ]),
    );
    expect(generatedMethods).toEqual(upstreamMethods);
  });

  it("builds clients for the upstream service names", () => {
    expect(RegistrationClient.serviceName).toBe("v1beta1.Registration");
    expect(DevicePluginClient.serviceName).toBe("v1beta1.DevicePlugin");
    expect(PluginRegistrationClient.serviceName).toBe("pluginregistration.Registration");
    expect(PodResourcesListerClient.serviceName).toBe("v1.PodResourcesLister");
    expect(draV1.DRAPluginClient.serviceName).toBe("k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin");
    expect(draV1beta1.DRAPluginClient.serviceName).toBe("k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin");
  });
});

describe("exported constants match the upstream constants", () => {
  const goConstant = (source: string, pattern: RegExp): string => {
    const match = pattern.exec(source);
    if (!match?.[1]) throw new Error(`upstream constants.go no longer matches ${String(pattern)}`);
    return match[1];
  };

  it("device plugin API version, socket name, health values and pre-start timeout", () => {
    const constants = readFileSync(path.join(path.dirname(upstream.devicePlugin), "constants.go"), "utf8");
    expect(KUBELET_API_VERSION).toBe(goConstant(constants, /\bVersion\s*=\s*"([^"]+)"/));
    expect(SUPPORTED_KUBELET_API_VERSIONS).toEqual(
      [
        ...goConstant(constants, /SupportedVersions\s*=\s*\[\.\.\.\]string\{([^}]*)\}/).matchAll(
          /"([^"]+)"/g,
        ),
      ].map((match) => match[1]),
    );
    expect(KUBELET_SOCKET_NAME).toBe(
      goConstant(constants, /\bKubeletSocket\s*=\s*DevicePluginPath\s*\+\s*"([^"]+)"/),
    );
    expect(DEVICE_HEALTHY).toBe(goConstant(constants, /\bHealthy\s*=\s*"([^"]+)"/));
    expect(DEVICE_UNHEALTHY).toBe(goConstant(constants, /\bUnhealthy\s*=\s*"([^"]+)"/));
    expect(PRE_START_CONTAINER_TIMEOUT_MS).toBe(
      Number(goConstant(constants, /KubeletPreStartContainerRPCTimeoutInSecs\s*=\s*(\d+)/)) * 1000,
    );
  });

  it("plugin type for the plugin watcher", () => {
    const constants = readFileSync(
      path.join(path.dirname(upstream.pluginRegistration), "constants.go"),
      "utf8",
    );
    expect(DEVICE_PLUGIN_TYPE).toBe(goConstant(constants, /\bDevicePlugin\s*=\s*"([^"]+)"/));
    expect(DRA_PLUGIN_TYPE).toBe(goConstant(constants, /\bDRAPlugin\s*=\s*"([^"]+)"/));
  });

  it("DRA service names for supported_versions, as the API module defines them", () => {
    const serviceName = (protoFile: string): string =>
      goConstant(
        readFileSync(path.join(path.dirname(protoFile), "types.go"), "utf8"),
        /\bDRAPluginService\s*=\s*"([^"]+)"/,
      );
    expect(DRA_V1_SERVICE).toBe(serviceName(upstream.draV1));
    expect(DRA_V1BETA1_SERVICE).toBe(serviceName(upstream.draV1beta1));
  });

  it(`DRA services the kubelet of ${KUBERNETES_MODULE}@${kubernetesVersionOf(KUBELET_MODULE_VERSION)} accepts, in the order it prefers`, () => {
    const sources = locateKubeletDraSources();
    const pluginSource = readFileSync(sources.plugin, "utf8");
    const list = goConstant(pluginSource, /servicesSupportedByKubelet\s*=\s*\[\]string\{([^}]*)\}/);
    // Entries are Go identifiers (drapbv1.DRAPluginService): map each import alias to its service name.
    const aliases = new Map([
      [goConstant(pluginSource, /(\w+)\s+"k8s\.io\/kubelet\/pkg\/apis\/dra\/v1"/), DRA_V1_SERVICE],
      [goConstant(pluginSource, /(\w+)\s+"k8s\.io\/kubelet\/pkg\/apis\/dra\/v1beta1"/), DRA_V1BETA1_SERVICE],
    ]);
    const kubeletServices = [...list.matchAll(/(\w+)\.DRAPluginService/g)].map((match) => {
      const service = aliases.get(match[1]!);
      if (service === undefined) throw new Error(`unknown alias ${match[1]} in servicesSupportedByKubelet`);
      return service;
    });
    // The kubelet takes the first of the plugin's list it knows: every service we offer is one it knows,
    // and our order (newest first) makes it pick the one it prefers too.
    expect(kubeletServices).toEqual(DRA_SUPPORTED_SERVICES);
    const manager = readFileSync(sources.manager, "utf8");
    expect(manager).toMatch(
      /for _, service := range supportedServices \{\s*if slices\.Contains\(servicesSupportedByKubelet, service\)/,
    );
  });

  it("DRAResourceHealth service names for supported_versions, as the API module defines them", () => {
    const serviceName = (protoFile: string): string =>
      goConstant(
        readFileSync(path.join(path.dirname(protoFile), "types.go"), "utf8"),
        /\bDRAResourceHealthService\s*=\s*"([^"]+)"/,
      );
    expect(DRA_HEALTH_V1_SERVICE).toBe(serviceName(upstream.draHealthV1));
    expect(DRA_HEALTH_V1ALPHA1_SERVICE).toBe(serviceName(upstream.draHealthV1alpha1));
  });

  it(`DRAResourceHealth services the kubelet of ${KUBERNETES_MODULE}@${kubernetesVersionOf(KUBELET_MODULE_VERSION)} streams from, in the order it prefers`, () => {
    const sources = locateKubeletDraSources();
    const pluginSource = readFileSync(sources.plugin, "utf8");
    const list = goConstant(pluginSource, /healthServicesSupportedByKubelet\s*=\s*\[\]string\{([^}]*)\}/);
    const aliases = new Map([
      [
        goConstant(pluginSource, /(\w+)\s+"k8s\.io\/kubelet\/pkg\/apis\/dra-health\/v1"/),
        DRA_HEALTH_V1_SERVICE,
      ],
      [
        goConstant(pluginSource, /(\w+)\s+"k8s\.io\/kubelet\/pkg\/apis\/dra-health\/v1alpha1"/),
        DRA_HEALTH_V1ALPHA1_SERVICE,
      ],
    ]);
    const kubeletServices = [...list.matchAll(/(\w+)\.DRAResourceHealthService/g)].map((match) => {
      const service = aliases.get(match[1]!);
      if (service === undefined)
        throw new Error(`unknown alias ${match[1]} in healthServicesSupportedByKubelet`);
      return service;
    });
    expect(kubeletServices).toEqual(DRA_HEALTH_SERVICES);
    // pickHealthService walks the kubelet's list and takes the first the plugin lists: listing both is
    // enough, in any place of supported_versions, and the DRAPlugin choice ignores names it does not know.
    const manager = readFileSync(sources.manager, "utf8");
    expect(manager).toMatch(
      /for _, service := range healthServicesSupportedByKubelet \{\s*if slices\.Contains\(supportedServices, service\)/,
    );
    expect(DRA_REGISTERED_SERVICES).toEqual([...DRA_SUPPORTED_SERVICES, ...DRA_HEALTH_SERVICES]);
  });

  it(`PodResources socket, as the kubelet of ${KUBERNETES_MODULE}@${kubernetesVersionOf(KUBELET_MODULE_VERSION)} places it`, () => {
    const sources = locateKubeletPodResourcesSources();
    const socket = goConstant(readFileSync(sources.constants, "utf8"), /\bSocket\s*=\s*"([^"]+)"/);
    const dirName = goConstant(
      readFileSync(sources.defaults, "utf8"),
      /\bDefaultKubeletPodResourcesDirName\s*=\s*"([^"]+)"/,
    );
    // util.LocalEndpoint(dir, name) adds ".sock"; the directory is under the default root /var/lib/kubelet.
    expect(POD_RESOURCES_SOCKET_NAME).toBe(`${socket}.sock`);
    expect(POD_RESOURCES_DIR).toBe(`/var/lib/kubelet/${dirName}`);
  });
});
