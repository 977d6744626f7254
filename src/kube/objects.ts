// Create, get, replace, patch and delete of single objects of a known resource, so no controller spells a
// REST path: the request of each verb is a pure function of the resource, the object and the options.
import type { KubeConfig, KubernetesObject } from "@kubernetes/client-node";
import { isNotFound } from "./errors.js";
import type { WriteFence } from "./fence.js";
import { kubeRequest, listAll, type KubeRequest, type ListQuery } from "./request.js";
import { collectionPath, groupVersionPath, objectPath, type ResourceRef } from "./resources.js";

/** Which object: its name, and its namespace when the resource is namespaced. */
export interface ObjectKey {
  name: string;
  namespace?: string | undefined;
}

/** An object to create or replace: it names itself (and its namespace, for a namespaced resource). */
export type NamedObject = KubernetesObject & { metadata?: { name?: string; namespace?: string } };

export interface SubresourceOptions {
  /** Address a subresource (e.g. "status") instead of the object itself. */
  subresource?: string;
}

export interface CreateOptions {
  /**
   * A server-side dry run (`dryRun=All`): the API server defaults, validates and admits the object and
   * answers with what it would store, and stores nothing.
   */
  dryRun?: boolean;
}

export type PropagationPolicy = "Background" | "Foreground" | "Orphan";

export interface DeleteOptions {
  /** Delete only while the object still has this uid: a newer namesake answers 409 Conflict instead. */
  uid?: string | undefined;
  /** What happens to the object's dependents; the client's default when absent. */
  propagationPolicy?: PropagationPolicy;
}

/** The patch formats the API server takes, besides server-side apply (see apply.ts). */
export type PatchType = "merge" | "json" | "strategic";

const PATCH_CONTENT_TYPES: Record<PatchType, string> = {
  merge: "application/merge-patch+json",
  json: "application/json-patch+json",
  strategic: "application/strategic-merge-patch+json",
};

export interface ObjectClientOptions {
  /** Recorded as the `fieldManager` of creates, replaces and patches, e.g. "dpo-operator". */
  fieldManager: string;
  /** Propagation of deletes that do not say (default: the API server's own for the resource). */
  propagationPolicy?: PropagationPolicy;
  /** Leadership: every create, update, patch and delete is checked against it just before it is sent. */
  fence?: WriteFence;
}

/** The single-object verbs, as the controllers use them; KubeObjectClient sends them to an API server. */
export interface ObjectClient {
  /** POST: fails with AlreadyExists when the name is taken, so a stale cache never overwrites. */
  create<T extends NamedObject>(ref: ResourceRef, object: T, options?: CreateOptions): Promise<T>;
  /** GET of one object (or subresource); NotFound when there is none. */
  get<T extends KubernetesObject>(ref: ResourceRef, key: ObjectKey, options?: SubresourceOptions): Promise<T>;
  /** PUT: with the resourceVersion the object carries, fails with Conflict when that is stale. */
  update<T extends NamedObject>(ref: ResourceRef, object: T, options?: SubresourceOptions): Promise<T>;
  patch<T extends KubernetesObject>(
    ref: ResourceRef,
    key: ObjectKey,
    type: PatchType,
    patch: unknown,
    options?: SubresourceOptions,
  ): Promise<T>;
  delete(ref: ResourceRef, key: ObjectKey, options?: DeleteOptions): Promise<void>;
  /**
   * GET of a collection, every page, in one namespace or (undefined) all of them. For reads outside the
   * informer caches: a few objects, seldom (a takeover's incumbent pods, the pods on one node).
   */
  list?<T extends KubernetesObject>(
    ref: ResourceRef,
    namespace: string | undefined,
    query: ListQuery,
  ): Promise<T[]>;
}

/** The key of an object that names itself; a namespaced resource's object must name its namespace. */
export function keyOf(ref: ResourceRef, object: NamedObject): ObjectKey {
  const name = object.metadata?.name;
  if (name === undefined || name === "") throw new Error(`${ref.plural}: the object has no metadata.name`);
  if (!ref.namespaced) return { name };
  const namespace = object.metadata?.namespace;
  if (namespace === undefined || namespace === "") {
    throw new Error(`${ref.plural} is namespaced: ${name} has no metadata.namespace`);
  }
  return { name, namespace };
}

function pathOf(ref: ResourceRef, key: ObjectKey, subresource?: string): string {
  return objectPath(ref, key.name, ref.namespaced ? key.namespace : undefined, subresource);
}

export function createRequest(
  ref: ResourceRef,
  object: NamedObject,
  fieldManager: string,
  options: CreateOptions = {},
): KubeRequest {
  const key = keyOf(ref, object);
  return {
    method: "POST",
    path: collectionPath(ref, ref.namespaced ? key.namespace : undefined),
    query: { fieldManager, ...(options.dryRun === true ? { dryRun: "All" } : {}) },
    body: object,
  };
}

export function getRequest(ref: ResourceRef, key: ObjectKey, options: SubresourceOptions = {}): KubeRequest {
  return { method: "GET", path: pathOf(ref, key, options.subresource) };
}

export function updateRequest(
  ref: ResourceRef,
  object: NamedObject,
  fieldManager: string,
  options: SubresourceOptions = {},
): KubeRequest {
  return {
    method: "PUT",
    path: pathOf(ref, keyOf(ref, object), options.subresource),
    query: { fieldManager },
    body: object,
  };
}

export function patchRequest(
  ref: ResourceRef,
  key: ObjectKey,
  type: PatchType,
  patch: unknown,
  fieldManager: string,
  options: SubresourceOptions = {},
): KubeRequest {
  return {
    method: "PATCH",
    path: pathOf(ref, key, options.subresource),
    query: { fieldManager },
    body: patch,
    contentType: PATCH_CONTENT_TYPES[type],
  };
}

/** DELETE; a uid goes as a precondition in the body (the API server checks it atomically). */
export function deleteRequest(ref: ResourceRef, key: ObjectKey, options: DeleteOptions = {}): KubeRequest {
  return {
    method: "DELETE",
    path: pathOf(ref, key),
    query: { propagationPolicy: options.propagationPolicy },
    ...(options.uid === undefined
      ? {}
      : { body: { apiVersion: "v1", kind: "DeleteOptions", preconditions: { uid: options.uid } } }),
  };
}

/**
 * The ObjectClient over an API server. Bodies are sent and returned as plain JSON (no model classes,
 * which would drop fields they do not know), like the objects in an informer cache.
 */
export class KubeObjectClient implements ObjectClient {
  private readonly fieldManager: string;
  private readonly propagationPolicy: PropagationPolicy | undefined;
  private readonly fence: WriteFence | undefined;

  constructor(
    private readonly kc: KubeConfig,
    options: ObjectClientOptions,
  ) {
    if (options.fieldManager === "") throw new Error("an object client needs a field manager");
    this.fieldManager = options.fieldManager;
    this.propagationPolicy = options.propagationPolicy;
    this.fence = options.fence;
  }

  /** Sends a write behind the fence. */
  private write<T>(request: KubeRequest): Promise<T> {
    return kubeRequest<T>(this.kc, { ...request, fence: this.fence });
  }

  create<T extends NamedObject>(ref: ResourceRef, object: T, options?: CreateOptions): Promise<T> {
    return this.write<T>(createRequest(ref, object, this.fieldManager, options));
  }

  get<T extends KubernetesObject>(
    ref: ResourceRef,
    key: ObjectKey,
    options?: SubresourceOptions,
  ): Promise<T> {
    return kubeRequest<T>(this.kc, getRequest(ref, key, options));
  }

  update<T extends NamedObject>(ref: ResourceRef, object: T, options?: SubresourceOptions): Promise<T> {
    return this.write<T>(updateRequest(ref, object, this.fieldManager, options));
  }

  patch<T extends KubernetesObject>(
    ref: ResourceRef,
    key: ObjectKey,
    type: PatchType,
    patch: unknown,
    options?: SubresourceOptions,
  ): Promise<T> {
    return this.write<T>(patchRequest(ref, key, type, patch, this.fieldManager, options));
  }

  async delete(ref: ResourceRef, key: ObjectKey, options: DeleteOptions = {}): Promise<void> {
    const propagationPolicy = options.propagationPolicy ?? this.propagationPolicy;
    await this.write(
      deleteRequest(ref, key, { ...options, ...(propagationPolicy ? { propagationPolicy } : {}) }),
    );
  }

  async list<T extends KubernetesObject>(
    ref: ResourceRef,
    namespace: string | undefined,
    query: ListQuery,
  ): Promise<T[]> {
    return (await listAll<T>(this.kc, collectionPath(ref, namespace), query)).items;
  }
}

/**
 * Whether the API server serves `ref`'s group and version (a GET of its discovery document): false on
 * 404; other failures are thrown, for the caller to judge.
 */
export async function servesGroupVersion(
  kc: KubeConfig,
  ref: Pick<ResourceRef, "group" | "version">,
): Promise<boolean> {
  try {
    await kubeRequest(kc, { method: "GET", path: groupVersionPath(ref) });
    return true;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw err;
  }
}
