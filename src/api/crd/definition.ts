// The apiextensions.k8s.io/v1 CustomResourceDefinition object, and the root of the schema every CRD of the
// API shares.
import { sortKeys, type StructuralSchema } from "./structural-schema.js";

/**
 * Labels every dpo CRD carries, as kustomize's config/default gives every other object: Helm installs the
 * chart's crds/ as they are, so the one committed copy (crds/) carries them itself.
 */
export const CRD_LABELS: Readonly<Record<string, string>> = { "app.kubernetes.io/part-of": "dpo" };

export interface PrinterColumn {
  name: string;
  type: "string" | "integer" | "number" | "boolean" | "date";
  jsonPath: string;
  description?: string;
  priority?: number;
}

export interface CustomResourceDefinitionVersion {
  name: string;
  served: boolean;
  storage: boolean;
  schema: { openAPIV3Schema: StructuralSchema };
  subresources?: { status?: Record<string, never> };
  additionalPrinterColumns?: PrinterColumn[];
}

/** Where the API server sends ConversionReviews: a Service in the cluster, or a URL (local runs, tests). */
export type WebhookClientConfig =
  | { service: { namespace: string; name: string; path: string; port: number }; caBundle?: string }
  | { url: string; caBundle?: string };

export interface CustomResourceConversion {
  strategy: "None" | "Webhook";
  webhook?: { conversionReviewVersions: string[]; clientConfig: WebhookClientConfig };
}

export interface CustomResourceDefinition {
  apiVersion: "apiextensions.k8s.io/v1";
  kind: "CustomResourceDefinition";
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: {
    group: string;
    names: {
      kind: string;
      listKind: string;
      plural: string;
      singular: string;
      shortNames?: string[];
      categories?: string[];
    };
    scope: "Cluster" | "Namespaced";
    versions: CustomResourceDefinitionVersion[];
    conversion?: CustomResourceConversion;
  };
}

/** The root of a CRD schema, following the conventions kubectl explain and other tools expect. */
export function objectSchema(
  description: string,
  spec: StructuralSchema,
  status: StructuralSchema,
): StructuralSchema {
  return sortKeys({
    type: "object",
    description,
    required: ["spec"],
    properties: {
      apiVersion: sortKeys({
        type: "string",
        description:
          "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values.",
      }),
      kind: sortKeys({
        type: "string",
        description:
          "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. In CamelCase.",
      }),
      metadata: { type: "object" },
      spec,
      status,
    },
  });
}

/** `schema` with `description`, unless it has a description of its own. */
export function withDescription(schema: StructuralSchema, description: string): StructuralSchema {
  return sortKeys({ ...schema, description: schema.description ?? description });
}
