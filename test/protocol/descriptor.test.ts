// Proves our .proto files and the generated gRPC definitions carry exactly the kubelet's wire contract: the
// .proto files match upstream's, the generated TypeScript matches the upstream services, and the exported
// constants match the upstream constants.
import { readFileSync } from "node:fs";
import path from "node:path";
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
  KUBELET_MODULE,
  KUBELET_MODULE_VERSION,
  KUBERNETES_MODULE,
  kubernetesVersionOf,
  locateKubeletDraSources,
  locateKubeletPodResourcesSources,
  locateUpstreamProtoFiles,
  readProtoWithoutGogoImport,
  type UpstreamProtoFiles,
} from "../../tools/proto/upstream.js";
import {
  repoRoot,
  describeContract,
  diffContracts,
  parseProtoText,
  loadProtoFile,
  contractFiles,
} from "./descriptor-support.js";

let upstream: UpstreamProtoFiles;

beforeAll(() => {
  upstream = locateUpstreamProtoFiles();
});

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
