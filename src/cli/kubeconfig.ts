// The kubeconfig of a command that talks to the cluster: the file named, else in-cluster, else the default.
import { KubeConfig } from "@kubernetes/client-node";

export function loadKubeConfig(path: string | undefined): KubeConfig {
  const kc = new KubeConfig();
  if (path) kc.loadFromFile(path);
  else if (process.env["KUBERNETES_SERVICE_HOST"]) kc.loadFromCluster();
  else kc.loadFromDefault();
  return kc;
}
