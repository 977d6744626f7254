// Server-side apply for any resource and for its status subresource, under one field manager.
import {
  KubernetesObjectApi,
  PatchStrategy,
  type KubeConfig,
  type KubernetesObject,
  type V1APIResource,
} from "@kubernetes/client-node";
import { toKubeError } from "./errors.js";
import type { WriteFence } from "./fence.js";
import { kubeRequest } from "./request.js";
import { objectPath, type ResourceRef } from "./resources.js";

export interface ApplyOptions {
  /** Owner of the applied fields (server-side apply's `fieldManager`), e.g. "dpo-operator". */
  fieldManager: string;
  /** Take over fields another manager owns instead of failing with a conflict (default true). */
  force?: boolean;
  /** Leadership: every apply is checked against it just before it is sent (dry runs too: they are work). */
  fence?: WriteFence;
}

export interface ApplyCallOptions {
  /** Validate and default on the server without persisting. */
  dryRun?: boolean;
  /** This apply's field manager instead of the applier's (one per set of fields applied alone). */
  fieldManager?: string;
  /** This apply's force instead of the applier's: false fails with a conflict on another's field. */
  force?: boolean;
}

/** An object that can be applied: apiVersion, kind and name are required. */
export type ApplyObject = KubernetesObject & {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
};

/**
 * Finds a kind's plural and scope with client-node's discovery (cached per apiVersion), so apply works
 * for built-in and custom resources alike, and for subresources the object API has no method for.
 */
class ResourceDiscovery extends KubernetesObjectApi {
  static forConfig(kc: KubeConfig): ResourceDiscovery {
    return kc.makeApiClient(ResourceDiscovery);
  }

  async lookup(apiVersion: string, kind: string): Promise<ResourceRef> {
    let resource: V1APIResource | undefined;
    try {
      resource = await this.resource(apiVersion, kind);
    } catch (err) {
      throw toKubeError(err);
    }
    if (resource === undefined)
      throw new Error(`the API server does not serve kind ${kind} in ${apiVersion}`);
    const slash = apiVersion.indexOf("/");
    return {
      group: slash < 0 ? "" : apiVersion.slice(0, slash),
      version: slash < 0 ? apiVersion : apiVersion.slice(slash + 1),
      plural: resource.name,
      namespaced: resource.namespaced,
    };
  }
}

/**
 * Applies objects with `application/apply-patch+yaml` (JSON is YAML). Sent and returned as plain
 * JSON, not through client-node's model classes, which would drop fields they do not know; the
 * result looks like the objects in an informer cache.
 */
export class ServerSideApplier {
  readonly fieldManager: string;
  private readonly kc: KubeConfig;
  private readonly force: boolean;
  private readonly fence: WriteFence | undefined;
  private readonly discovery: ResourceDiscovery;

  constructor(kc: KubeConfig, options: ApplyOptions) {
    if (options.fieldManager === "") throw new Error("server-side apply needs a field manager");
    this.kc = kc;
    this.fieldManager = options.fieldManager;
    this.force = options.force ?? true;
    this.fence = options.fence;
    this.discovery = ResourceDiscovery.forConfig(kc);
  }

  /** Applies `obj` (its spec and metadata; status is ignored by the main resource). */
  async apply<T extends ApplyObject>(obj: T, options: ApplyCallOptions = {}): Promise<T> {
    return this.send(await this.pathOf(obj), obj, options);
  }

  /** Applies `obj.status` to the status subresource; only `status` and identifying fields matter. */
  async applyStatus<T extends ApplyObject>(obj: T, options: ApplyCallOptions = {}): Promise<T> {
    return this.send(`${await this.pathOf(obj)}/status`, obj, options);
  }

  /** A namespaced object must name its namespace: no silent default from the kubeconfig context. */
  private async pathOf(obj: ApplyObject): Promise<string> {
    const ref = await this.discovery.lookup(obj.apiVersion, obj.kind);
    return objectPath(ref, obj.metadata.name, ref.namespaced ? obj.metadata.namespace : undefined);
  }

  private send<T extends ApplyObject>(path: string, obj: T, options: ApplyCallOptions): Promise<T> {
    return kubeRequest<T>(this.kc, {
      method: "PATCH",
      path,
      query: {
        fieldManager: options.fieldManager ?? this.fieldManager,
        force: options.force ?? this.force,
        dryRun: options.dryRun ? "All" : undefined,
      },
      body: obj,
      contentType: PatchStrategy.ServerSideApply,
      fence: this.fence,
    });
  }
}
