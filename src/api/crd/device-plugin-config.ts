// The DevicePluginConfig CRD: v1beta1 stored, v1alpha1 served, converted by the operator's webhook.
import type { z } from "zod";
import { GROUP, KIND, PLURAL, VERSION } from "../v1beta1/config.js";
import { DevicePluginConfigSpecSchema } from "../v1beta1/spec.js";
import { DevicePluginConfigStatusSchema } from "../v1beta1/status.js";
import { DevicePluginConfigStatusV1alpha1Schema, V1ALPHA1 } from "../v1alpha1/config.js";
import { DevicePluginConfigSpecV1alpha1Schema } from "../v1alpha1/spec.js";
import {
  CRD_LABELS,
  objectSchema,
  withDescription,
  type CustomResourceConversion,
  type CustomResourceDefinition,
  type CustomResourceDefinitionVersion,
  type PrinterColumn,
  type WebhookClientConfig,
} from "./definition.js";
import { sortKeys, structuralSchemaOf, type StructuralSchema } from "./structural-schema.js";

/**
 * The status a config has until the operator first writes one. The API server applies schema defaults
 * whenever it reads an object from etcd, so a config nobody has reconciled yet is served with
 * observedGeneration 0, below its generation: kstatus (what Flux reads) then says InProgress ("generation
 * is 1, but latest observed generation is 0"), as config/argocd/health.lua says Progressing. Without it
 * kstatus finds no status and no conditions and calls the config Current ("Resource is current").
 */
export const UNOBSERVED_STATUS = { observedGeneration: 0 } as const;

function configStatusSchema(schema: z.ZodType): StructuralSchema {
  return sortKeys({
    ...withDescription(structuralSchemaOf(schema, "status"), STATUS_DESCRIPTION),
    default: { ...UNOBSERVED_STATUS },
  });
}

const READY = `.status.conditions[?(@.type=="Ready")]`;

/** The columns both versions show from the status, which they share. */
const STATUS_COLUMNS: readonly PrinterColumn[] = [
  {
    name: "Nodes",
    type: "string",
    jsonPath: ".status.nodes.summary",
    description:
      "Nodes where a plugin of any revision serves devices / nodes the config targets; see Updated for the upgrade.",
  },
  {
    name: "Devices",
    type: "string",
    jsonPath: ".status.devices.summary",
    description: "Allocatable / capacity, summed over the nodes as the kubelets advertise them.",
  },
  { name: "Unhealthy", type: "integer", jsonPath: ".status.devices.unhealthy" },
  {
    name: "Updated",
    type: "string",
    jsonPath: ".status.upgrade.summary",
    description: "Nodes whose kubelet advertises the current plugin revision / nodes the upgrade targets.",
  },
  { name: "Ready", type: "string", jsonPath: `${READY}.status` },
  { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
];

/** In `-o wide` of both versions: the status is shared, so is the column. */
const ALLOCATED_COLUMN: PrinterColumn = {
  name: "Allocated",
  type: "integer",
  jsonPath: ".status.devices.allocated",
  description: "Devices the kubelets have given to containers, summed over the nodes.",
  priority: 1,
};

/** In `-o wide` of both versions: how the devices are offered (empty on an old v1alpha1 object: DevicePlugin). */
const PUBLISH_COLUMN: PrinterColumn = {
  name: "Mode",
  type: "string",
  jsonPath: ".spec.publish",
  description: "DevicePlugin (extended resource) or DRA (ResourceSlices).",
  priority: 1,
};

/** In `-o wide` of both versions: nodes served / nodes selected where configs of one resource name share nodes. */
const SERVING_COLUMN: PrinterColumn = {
  name: "Serving",
  type: "string",
  jsonPath: ".status.serving.summary",
  description:
    "Nodes this config serves / nodes it selects, where configs of higher priority take some of them (spec.priority).",
  priority: 1,
};

const REASON_COLUMN: PrinterColumn = {
  name: "Reason",
  type: "string",
  jsonPath: `${READY}.reason`,
  priority: 1,
};

const CONFIG_DESCRIPTION =
  "DevicePluginConfig describes one extended resource, the backend that discovers its devices on the nodes, and how the bundled plugin advertises and shares them.";
const STATUS_DESCRIPTION =
  "What the operator observed: conditions, node counts, device totals and problem nodes.";

/** The CRD whose versions the operator's webhook converts. */
export const DEVICE_PLUGIN_CONFIG_CRD_NAME = `${PLURAL}.${GROUP}`;

/** The Service the conversion webhook is reached through in a cluster (config/webhook), before kustomize sets its namespace. */
export const CONVERSION_SERVICE = {
  namespace: "dpo-system",
  name: "dpo-webhook",
  path: "/convert",
  port: 443,
} as const;

/** The API server converts between the versions through the operator's webhook; only `v1` reviews are spoken. */
export function webhookConversion(clientConfig: WebhookClientConfig): CustomResourceConversion {
  return { strategy: "Webhook", webhook: { conversionReviewVersions: ["v1"], clientConfig } };
}

function v1beta1Version(): CustomResourceDefinitionVersion {
  return {
    name: VERSION,
    served: true,
    storage: true,
    subresources: { status: {} },
    additionalPrinterColumns: [
      { name: "Resource", type: "string", jsonPath: ".spec.resourceName" },
      { name: "Backend", type: "string", jsonPath: ".spec.backend.type" },
      ...STATUS_COLUMNS,
      ALLOCATED_COLUMN,
      { name: "Sharing", type: "string", jsonPath: ".spec.sharing.strategy", priority: 1 },
      { name: "Policy", type: "string", jsonPath: ".spec.topology.allocationPolicy", priority: 1 },
      PUBLISH_COLUMN,
      SERVING_COLUMN,
      REASON_COLUMN,
    ],
    schema: {
      openAPIV3Schema: objectSchema(
        CONFIG_DESCRIPTION,
        withDescription(
          structuralSchemaOf(DevicePluginConfigSpecSchema, "spec"),
          "The desired plugin: resource name, backend, sharing, topology, the nodes it runs on.",
        ),
        configStatusSchema(DevicePluginConfigStatusSchema),
      ),
    },
  };
}

/**
 * The older, flatter v1alpha1: served so manifests written against it keep applying, never stored. Its
 * columns read its own field names; the status is v1beta1's.
 */
function v1alpha1Version(): CustomResourceDefinitionVersion {
  return {
    name: V1ALPHA1,
    served: true,
    storage: false,
    subresources: { status: {} },
    additionalPrinterColumns: [
      { name: "Resource", type: "string", jsonPath: ".spec.resourceName" },
      { name: "Backend", type: "string", jsonPath: ".spec.backend" },
      ...STATUS_COLUMNS,
      ALLOCATED_COLUMN,
      {
        name: "Shared",
        type: "integer",
        jsonPath: ".spec.sharedDevNum",
        description: "Containers per device.",
        priority: 1,
      },
      { name: "Policy", type: "string", jsonPath: ".spec.preferredAllocationPolicy", priority: 1 },
      PUBLISH_COLUMN,
      SERVING_COLUMN,
      REASON_COLUMN,
    ],
    schema: {
      openAPIV3Schema: objectSchema(
        `${CONFIG_DESCRIPTION} v1alpha1 is the older API, converted to and stored as v1beta1; fields only v1beta1 has travel in the annotation dpo.dev/v1beta1-fields.`,
        withDescription(
          structuralSchemaOf(DevicePluginConfigSpecV1alpha1Schema, "spec"),
          "The desired plugin in the v1alpha1 shape: backend and its member at spec level, sharedDevNum, preferredAllocationPolicy.",
        ),
        configStatusSchema(DevicePluginConfigStatusV1alpha1Schema),
      ),
    },
  };
}

/**
 * The DevicePluginConfig CRD: cluster-scoped, `kubectl get dpc` shows what a user checks first. Served as
 * v1beta1 (stored) and v1alpha1, converted by the operator's webhook at `clientConfig` (the in-cluster
 * Service by default; the operator keeps its caBundle current).
 */
export function devicePluginConfigCrd(
  clientConfig: WebhookClientConfig = { service: { ...CONVERSION_SERVICE } },
): CustomResourceDefinition {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: DEVICE_PLUGIN_CONFIG_CRD_NAME, labels: { ...CRD_LABELS } },
    spec: {
      group: GROUP,
      names: {
        kind: KIND,
        listKind: `${KIND}List`,
        plural: PLURAL,
        singular: KIND.toLowerCase(),
        shortNames: ["dpc"],
        categories: ["devices"],
      },
      scope: "Cluster",
      versions: [v1beta1Version(), v1alpha1Version()],
      conversion: webhookConversion(clientConfig),
    },
  };
}
