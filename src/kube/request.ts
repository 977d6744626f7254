// Raw JSON requests through client-node's own HTTP stack and kubeconfig authentication, for the calls
// its typed clients cannot make: generic lists for informers and apply on any status subresource.
import {
  ApiException,
  HttpMethod,
  IsomorphicFetchHttpLibrary,
  RequestContext,
  type KubeConfig,
  type KubernetesObject,
} from "@kubernetes/client-node";
import { toKubeError } from "./errors.js";
import { NotLeaderError, type WriteFence } from "./fence.js";

export type QueryParams = Record<string, string | number | boolean | undefined>;

export interface KubeRequest {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** API path without the server, e.g. /apis/dpo.dev/v1beta1/devicepluginconfigs. */
  path: string;
  query?: QueryParams;
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
  /**
   * Leadership for a write: checked immediately before the request is sent (NotLeaderError when closed),
   * and its signal cancels the request in flight when it closes. Reads ignore it.
   */
  fence?: WriteFence | undefined;
}

const httpLibrary = new IsomorphicFetchHttpLibrary();

/**
 * Sends one request and returns the response body as the API server wrote it (plain JSON, no model
 * classes, so timestamps stay strings). Non-2xx answers throw the typed errors of errors.ts.
 */
/** Called once per API request with its method, path and HTTP status (0 when no response arrived). */
export type KubeRequestObserver = (method: string, path: string, status: number) => void;
let requestObserver: KubeRequestObserver | undefined;

/** Installs the process-wide observer of API requests (metrics); undefined removes it. */
export function observeKubeRequests(observer: KubeRequestObserver | undefined): void {
  requestObserver = observer;
}

/** Reports a request made outside kubeRequest (watches) to the observer. */
export function reportKubeRequest(method: string, path: string, status: number): void {
  requestObserver?.(method, path, status);
}

export async function kubeRequest<T>(kc: KubeConfig, request: KubeRequest): Promise<T> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("kubeconfig has no current cluster");
  const url = new URL(cluster.server.replace(/\/+$/, "") + request.path);
  for (const [name, value] of Object.entries(request.query ?? {})) {
    if (value !== undefined) url.searchParams.set(name, String(value));
  }
  const context = new RequestContext(url.toString(), HttpMethod[request.method]);
  context.setHeaderParam("Accept", "application/json");
  if (request.body !== undefined) {
    context.setHeaderParam("Content-Type", request.contentType ?? "application/json");
    context.setBody(JSON.stringify(request.body));
  }
  const fence = request.method === "GET" ? undefined : request.fence;
  const signal =
    fence === undefined
      ? request.signal
      : request.signal === undefined
        ? fence.signal
        : AbortSignal.any([request.signal, fence.signal]);
  if (signal) context.setSignal(signal);
  let answered = false;
  try {
    await kc.applySecurityAuthentication(context);
    // Last thing before the bytes leave: authentication may have taken a while (an exec plugin).
    fence?.check(`${request.method} ${request.path}`);
    const response = await httpLibrary.send(context).toPromise();
    answered = true;
    requestObserver?.(request.method, request.path, response.httpStatusCode);
    const text = await response.body.text();
    if (response.httpStatusCode < 200 || response.httpStatusCode > 299) {
      throw new ApiException(
        response.httpStatusCode,
        `${request.method} ${request.path}`,
        text,
        response.headers,
      );
    }
    return (text === "" ? undefined : JSON.parse(text)) as T;
  } catch (err) {
    // Refused by the fence: nothing was sent, so nothing to count.
    if (err instanceof NotLeaderError) throw err;
    // No response at all (connection refused or reset, timeout, abort): the observer still counts it.
    if (!answered) requestObserver?.(request.method, request.path, 0);
    // Cancelled because the fence closed while it was in flight: say so, not just "aborted".
    if (fence?.signal.aborted && fence.signal.reason instanceof NotLeaderError) throw fence.signal.reason;
    throw toKubeError(err);
  }
}

export interface ListResult<T> {
  items: T[];
  metadata?: { resourceVersion?: string };
}

export interface ListQuery {
  labelSelector?: string;
  fieldSelector?: string;
  /**
   * "0": any version the API server has, served from its watch cache rather than read from etcd: as fresh
   * as what an informer holds, and far cheaper for a large collection read often. Sent with the first page
   * only (the API server refuses a resourceVersion beside a continue token).
   */
  resourceVersion?: "0";
}

/**
 * Lists a collection in pages of `pageSize` and returns every item with the list's resourceVersion.
 * Items get `apiVersion`/`kind` filled in (the API server omits them in lists of built-in types), so
 * cached objects look the same whether they came from a list or a watch.
 */
export async function listAll<T extends KubernetesObject>(
  kc: KubeConfig,
  path: string,
  query: ListQuery,
  signal?: AbortSignal,
  pageSize = 500,
): Promise<ListResult<T>> {
  const items: T[] = [];
  let resourceVersion = "";
  let continueToken: string | undefined;
  do {
    const page = await kubeRequest<{
      apiVersion?: string;
      kind?: string;
      metadata?: { resourceVersion?: string; continue?: string };
      items?: T[];
    }>(kc, {
      method: "GET",
      path,
      query: {
        ...query,
        limit: pageSize,
        continue: continueToken,
        ...(continueToken === undefined ? {} : { resourceVersion: undefined }),
      },
      signal,
    });
    const itemKind = page.kind?.replace(/List$/, "");
    for (const item of page.items ?? []) {
      items.push({ apiVersion: page.apiVersion, kind: itemKind, ...item });
    }
    resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
    continueToken = page.metadata?.continue || undefined;
  } while (continueToken !== undefined);
  return { items, metadata: { resourceVersion } };
}
