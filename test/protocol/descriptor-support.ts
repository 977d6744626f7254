// The wire contract of a .proto schema as comparable lines (element → wire-relevant attributes), the differences
// between two, and the contract files of ours with their upstream counterparts.
import path from "node:path";
import { fileURLToPath } from "node:url";
import protobuf from "protobufjs";
import {
  isGogoOption,
  OUR_PROTO_FILES,
  readProtoWithoutGogoImport,
  type UpstreamProtoFiles,
} from "../../tools/proto/upstream.js";

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/**
 * Flattens a parsed schema into "element → wire-relevant attributes" entries, so two schemas can be
 * compared entry by entry and a difference printed as one line per element.
 */
export function describeContract(root: protobuf.Root): Map<string, string> {
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
export function diffContracts(upstream: Map<string, string>, ours: Map<string, string>): string[] {
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
export const parseProtoText = (text: string, root = new protobuf.Root()): protobuf.Root =>
  protobuf.parse(text, root, { keepCase: true }).root;
export const loadProtoFile = (file: string): protobuf.Root =>
  parseProtoText(readProtoWithoutGogoImport(file));

export const contractFiles = [
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
