// Builders for the informer tests: a namespaced object at a resourceVersion, and the sorted keys of a list.
import type { KubernetesObject } from "@kubernetes/client-node";
import { objectKey } from "../../../src/kube/index.js";

export interface Obj extends KubernetesObject {
  metadata: { name: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string> };
  data?: string;
}

export const obj = (
  name: string,
  resourceVersion?: string,
  extra: Partial<Obj["metadata"]> = {},
  data?: string,
): Obj => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, resourceVersion, ...extra },
  ...(data === undefined ? {} : { data }),
});

export const names = (objects: Obj[]): string[] => objects.map(objectKey).sort();
