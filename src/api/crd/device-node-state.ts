// The DeviceNodeState CRD: the plugin's report of its node.
import { GROUP, VERSION } from "../v1beta1/config.js";
import {
  DEVICE_NODE_STATE_KIND,
  DEVICE_NODE_STATE_PLURAL,
  DeviceNodeStateSpecSchema,
  DeviceNodeStateStatusSchema,
} from "../v1beta1/devicenodestate.js";
import { CRD_LABELS, objectSchema, withDescription, type CustomResourceDefinition } from "./definition.js";
import { structuralSchemaOf } from "./structural-schema.js";

/** The DeviceNodeState CRD: one per config and node in the operator's namespace, written by the plugin. */
export function deviceNodeStateCrd(): CustomResourceDefinition {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${DEVICE_NODE_STATE_PLURAL}.${GROUP}`, labels: { ...CRD_LABELS } },
    spec: {
      group: GROUP,
      names: {
        kind: DEVICE_NODE_STATE_KIND,
        listKind: `${DEVICE_NODE_STATE_KIND}List`,
        plural: DEVICE_NODE_STATE_PLURAL,
        singular: DEVICE_NODE_STATE_KIND.toLowerCase(),
        shortNames: ["dnstate"],
        categories: ["devices"],
      },
      scope: "Namespaced",
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [
            { name: "Config", type: "string", jsonPath: ".spec.configName" },
            { name: "Node", type: "string", jsonPath: ".spec.nodeName" },
            { name: "Registration", type: "string", jsonPath: ".status.registration.state" },
            { name: "Healthy", type: "integer", jsonPath: ".status.healthy" },
            { name: "Advertised", type: "integer", jsonPath: ".status.advertised" },
            {
              name: "Allocated",
              type: "integer",
              jsonPath: ".status.allocated",
              description: "Devices the kubelet has given to containers (its PodResources API).",
            },
            { name: "Version", type: "string", jsonPath: ".status.pluginVersion" },
            { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
          ],
          schema: {
            openAPIV3Schema: objectSchema(
              "DeviceNodeState is the plugin's report of its node: registration with the kubelet and every device with its health.",
              withDescription(
                structuralSchemaOf(DeviceNodeStateSpecSchema, "spec"),
                "Which config and node this report is about.",
              ),
              withDescription(
                structuralSchemaOf(DeviceNodeStateStatusSchema, "status"),
                "The plugin's view of its node, written with server-side apply on /status.",
              ),
            ),
          },
        },
      ],
    },
  };
}
