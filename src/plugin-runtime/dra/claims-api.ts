// The ResourceClaimGetter of a running plugin: reads each claim from the API server with the plugin's own
// credentials (RBAC: get on resourceclaims), through the same small client as the node report.
import { ApiError, type ApiClient } from "../report/api-client.js";
import type { ClaimReference, DraResourceClaim, ResourceClaimGetter } from "./claim.js";

/** `/apis/resource.k8s.io/v1/namespaces/<ns>/resourceclaims/<name>`, each part escaped. Pure. */
export function resourceClaimPath(ref: Pick<ClaimReference, "namespace" | "name">): string {
  return `/apis/resource.k8s.io/v1/namespaces/${encodeURIComponent(ref.namespace)}/resourceclaims/${encodeURIComponent(ref.name)}`;
}

export class ApiResourceClaimGetter implements ResourceClaimGetter {
  constructor(private readonly client: Pick<ApiClient, "request">) {}

  /** The claim, or undefined on 404; other failures reject with the API's message. */
  async getResourceClaim(ref: ClaimReference, signal: AbortSignal): Promise<DraResourceClaim | undefined> {
    try {
      return await this.client.request<DraResourceClaim>({
        method: "GET",
        path: resourceClaimPath(ref),
        signal,
      });
    } catch (err) {
      if (err instanceof ApiError && err.code === 404) return undefined;
      throw err;
    }
  }
}
