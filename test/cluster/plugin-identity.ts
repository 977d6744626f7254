// A plugin's identity as the own-node admission policies see it: a pod of the dpo-plugin ServiceAccount
// bound to a node, and the pod-bound token the API server issues for it (which records the node).
import type { CoreV1Api, V1Pod } from "@kubernetes/client-node";
import { KubeApiError } from "../../src/kube/errors.js";
import { issuedToken } from "../../tools/cluster/kubeconfig.js";

export const PLUGIN_SA = "dpo-plugin";

/** A plugin pod placed on `nodeName` directly, as the scheduler would bind it; it never runs. */
export function createBoundPlugin(
  core: CoreV1Api,
  namespace: string,
  name: string,
  nodeName: string,
): Promise<V1Pod> {
  return core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name },
      spec: {
        nodeName,
        serviceAccountName: PLUGIN_SA,
        containers: [{ name: "plugin", image: "dpo:vap-test" }],
      },
    },
  });
}

/** A dpo-plugin token bound to `pod` (so it names the pod's node), or bound to nothing. */
export async function pluginToken(core: CoreV1Api, namespace: string, pod?: V1Pod): Promise<string> {
  const answer = await core.createNamespacedServiceAccountToken({
    name: PLUGIN_SA,
    namespace,
    body: {
      spec: {
        audiences: [],
        expirationSeconds: 3600,
        ...(pod && {
          boundObjectRef: { apiVersion: "v1", kind: "Pod", name: pod.metadata?.name, uid: pod.metadata?.uid },
        }),
      },
    },
  });
  return issuedToken(answer, PLUGIN_SA);
}

/** The API server's refusal of a write; throws when the write went through or failed otherwise. */
export async function refusal(write: Promise<unknown>): Promise<KubeApiError> {
  const outcome = await write.then(
    () => undefined,
    (error: unknown) => error,
  );
  if (!(outcome instanceof KubeApiError)) {
    throw new Error(`expected the API server to refuse the write, got ${String(outcome)}`);
  }
  return outcome;
}
