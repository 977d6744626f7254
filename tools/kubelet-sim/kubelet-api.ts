// The API requests a simulated kubelet makes, with the kubelet's credentials: its Node, pod status, Events,
// the ConfigMaps and ServiceAccount tokens of plugin pods, ResourceClaims and the node's ResourceSlices.
import type { KubeConfig, V1ConfigMap, V1Node, V1Pod, V1PodStatus } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { isNotFound } from "../../src/kube/errors.js";
import { kubeRequest } from "../../src/kube/request.js";
import type { ClaimForPrepare } from "./dra-rules.js";

export class KubeletApi {
  constructor(
    /** The simulator's kubeconfig, with connections kept alive (see KubeletSimulator). */
    readonly kubeconfig: KubeConfig,
    private readonly log: Logger,
  ) {}

  node(name: string): Promise<V1Node> {
    return kubeRequest<V1Node>(this.kubeconfig, {
      method: "GET",
      path: `/api/v1/nodes/${encodeURIComponent(name)}`,
    });
  }

  async setKubeletVersion(name: string, version: string): Promise<void> {
    await kubeRequest(this.kubeconfig, {
      method: "PATCH",
      path: `/api/v1/nodes/${encodeURIComponent(name)}/status`,
      body: { status: { nodeInfo: { kubeletVersion: version } } },
      contentType: "application/strategic-merge-patch+json",
    });
  }

  /** DeleteCollection of ResourceSlices, as the kubelet sends it; nothing to delete is no error. */
  async deleteResourceSlices(fieldSelector: string, signal: AbortSignal): Promise<void> {
    try {
      await kubeRequest(this.kubeconfig, {
        method: "DELETE",
        path: "/apis/resource.k8s.io/v1/resourceslices",
        query: { fieldSelector },
        signal,
      });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  /**
   * The kubelet's status manager: the pod's status, written whole (the simulator owns it). False when
   * the API server did not take it (the caller may try again).
   */
  async writePodStatus(pod: V1Pod, status: V1PodStatus): Promise<boolean> {
    const namespace = pod.metadata?.namespace ?? "";
    const name = pod.metadata?.name ?? "";
    try {
      await kubeRequest(this.kubeconfig, {
        method: "PATCH",
        path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}/status`,
        // The uid makes it a precondition: a pod of the same name created since is not touched.
        body: { metadata: { uid: pod.metadata?.uid }, status },
        contentType: "application/merge-patch+json",
      });
      return true;
    } catch (err) {
      if (isNotFound(err)) return true;
      this.log.warn({ pod: `${namespace}/${name}`, err: (err as Error).message }, "pod status not written");
      return false;
    }
  }

  /** A Warning Event about `pod` from the kubelet of `node`; a failure is logged, not thrown. */
  async recordPodEvent(node: string, pod: V1Pod, reason: string, message: string): Promise<void> {
    const namespace = pod.metadata?.namespace ?? "";
    const now = new Date().toISOString();
    await kubeRequest(this.kubeconfig, {
      method: "POST",
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`,
      body: {
        apiVersion: "v1",
        kind: "Event",
        metadata: { generateName: `${pod.metadata?.name}.`, namespace },
        involvedObject: {
          apiVersion: "v1",
          kind: "Pod",
          namespace,
          name: pod.metadata?.name,
          uid: pod.metadata?.uid,
        },
        type: "Warning",
        reason,
        message,
        source: { component: "kubelet", host: node },
        reportingComponent: "kubelet",
        reportingInstance: node,
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      },
    }).catch((err: Error) => this.log.warn({ err: err.message }, "event not recorded"));
  }

  readClaim(namespace: string, name: string): Promise<ClaimForPrepare> {
    return kubeRequest<ClaimForPrepare>(this.kubeconfig, {
      method: "GET",
      path: `/apis/resource.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/resourceclaims/${encodeURIComponent(name)}`,
    });
  }

  configMap(namespace: string, name: string): Promise<V1ConfigMap> {
    return kubeRequest<V1ConfigMap>(this.kubeconfig, {
      method: "GET",
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/configmaps/${encodeURIComponent(name)}`,
    });
  }

  /** A TokenRequest for `serviceAccount`, bound to `pod`; NotFound when the ServiceAccount is missing. */
  async podToken(pod: V1Pod, serviceAccount: string, expirationSeconds: number): Promise<string> {
    const namespace = pod.metadata?.namespace ?? "";
    const response = await kubeRequest<{ status: { token: string } }>(this.kubeconfig, {
      method: "POST",
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/serviceaccounts/${encodeURIComponent(serviceAccount)}/token`,
      body: {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenRequest",
        spec: {
          audiences: [],
          expirationSeconds,
          boundObjectRef: {
            apiVersion: "v1",
            kind: "Pod",
            name: pod.metadata?.name,
            uid: pod.metadata?.uid,
          },
        },
      },
    });
    return response.status.token;
  }
}
