// Proves our .proto files and the generated gRPC definitions carry exactly the kubelet's wire contract.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import protobuf from "protobufjs";
import { beforeAll, describe, expect, it } from "vitest";
import {
  DEVICE_HEALTHY,
  DEVICE_PLUGIN_TYPE,
  DEVICE_UNHEALTHY,
  DevicePluginClient,
  DevicePluginService,
  KUBELET_API_VERSION,
  KUBELET_SOCKET_NAME,
  PluginRegistrationClient,
  PluginRegistrationService,
  PRE_START_CONTAINER_TIMEOUT_MS,
  RegistrationClient,
  RegistrationService,
  SUPPORTED_KUBELET_API_VERSIONS,
} from "../../src/plugin-runtime/proto/index.js";
import {
  KUBELET_MODULE,
  KUBELET_MODULE_VERSION,
  locateUpstreamProtoFiles,
  OUR_PROTO_FILES,
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
  const optionsOf = (options: Record<string, unknown> | undefined): string => {
    const sorted = Object.entries(options ?? {}).sort(([a], [b]) => a.localeCompare(b));
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

// keepCase: protobufjs would otherwise camel-case field names and hide a renamed field.
const loadProtoFile = (file: string): protobuf.Root => new protobuf.Root().loadSync(file, { keepCase: true });
const parseProtoText = (text: string): protobuf.Root => protobuf.parse(text, { keepCase: true }).root;

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

describe("generated TypeScript matches the upstream services", () => {
  const generatedServices: Record<
    string,
    Record<string, { path: string; requestStream: boolean; responseStream: boolean }>
  > = {
    "v1beta1.Registration": RegistrationService,
    "v1beta1.DevicePlugin": DevicePluginService,
    "pluginregistration.Registration": PluginRegistrationService,
  };

  it("has one definition per upstream service, with every method's path and streaming flags", () => {
    const root = new protobuf.Root().loadSync([upstream.devicePlugin, upstream.pluginRegistration], {
      keepCase: true,
    });
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
  });
});
