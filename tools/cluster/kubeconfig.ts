// Kubeconfig variants for the local control plane: the same API server, another identity.
import { KubeConfig } from "@kubernetes/client-node";

/** A KubeConfig for the current cluster of `base` (CA included) that authenticates with a bearer token. */
export function withBearerToken(base: KubeConfig, token: string, user = "token"): KubeConfig {
  const cluster = base.getCurrentCluster();
  if (!cluster) throw new Error("the kubeconfig has no current cluster");
  const kubeconfig = new KubeConfig();
  kubeconfig.loadFromOptions({
    clusters: [cluster],
    users: [{ name: user, token }],
    contexts: [{ name: user, cluster: cluster.name, user }],
    currentContext: user,
  });
  return kubeconfig;
}

/** The token of a TokenRequest answer; the API server always sets it, so its absence is an error worth naming. */
export function issuedToken(answer: { status?: { token?: string } }, serviceAccount: string): string {
  const token = answer.status?.token;
  if (!token) throw new Error(`TokenRequest for ServiceAccount ${serviceAccount} returned no token`);
  return token;
}
