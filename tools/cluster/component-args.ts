// The command lines of the control plane's components, as pure functions of the cluster's ports,
// certificates and paths.
import { join } from "node:path";
import { SIMULATED_NODE_SELECTOR } from "./nodes.js";
import { FRONT_PROXY_CLIENT_NAME, type Pki } from "./pki.js";

export const SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24";
/** Pod IPs KWOK hands out; apart from the service range so the two never look alike. */
export const POD_CIDR = "10.244.0.0/16";

export interface ClusterPorts {
  etcdClient: number;
  etcdPeer: number;
  apiServer: number;
  controllerManager: number;
  scheduler: number;
}

export function etcdArgs(stateDir: string, ports: ClusterPorts): string[] {
  const client = `http://127.0.0.1:${ports.etcdClient}`;
  const peer = `http://127.0.0.1:${ports.etcdPeer}`;
  return [
    "--name=dpo",
    `--data-dir=${join(stateDir, "etcd")}`,
    `--listen-client-urls=${client}`,
    `--advertise-client-urls=${client}`,
    `--listen-peer-urls=${peer}`,
    `--initial-advertise-peer-urls=${peer}`,
    `--initial-cluster=dpo=${peer}`,
    "--initial-cluster-state=new",
    // Test data: durability is not worth the fsync latency.
    "--unsafe-no-fsync=true",
    "--log-level=warn",
  ];
}

export function apiServerArgs(stateDir: string, ports: ClusterPorts, pki: Pki, realNode: boolean): string[] {
  return [
    `--etcd-servers=http://127.0.0.1:${ports.etcdClient}`,
    `--bind-address=${realNode ? "0.0.0.0" : "127.0.0.1"}`,
    "--advertise-address=127.0.0.1",
    `--secure-port=${ports.apiServer}`,
    `--cert-dir=${join(stateDir, "certs")}`,
    `--tls-cert-file=${pki.apiServerCert}`,
    `--tls-private-key-file=${pki.apiServerKey}`,
    `--client-ca-file=${pki.caCert}`,
    `--requestheader-client-ca-file=${pki.frontProxyCaCert}`,
    `--requestheader-allowed-names=${FRONT_PROXY_CLIENT_NAME}`,
    "--requestheader-username-headers=X-Remote-User",
    "--requestheader-group-headers=X-Remote-Group",
    "--requestheader-extra-headers-prefix=X-Remote-Extra-",
    `--proxy-client-cert-file=${pki.frontProxyClientCert}`,
    `--proxy-client-key-file=${pki.frontProxyClientKey}`,
    "--authorization-mode=Node,RBAC",
    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
    `--service-account-key-file=${pki.serviceAccountPublicKey}`,
    `--service-account-signing-key-file=${pki.serviceAccountKey}`,
    `--service-cluster-ip-range=${SERVICE_CLUSTER_IP_RANGE}`,
    "--allow-privileged=true",
    "--enable-admission-plugins=NodeRestriction",
    // Logs and exec on a real node: node names do not resolve here, and kubelets check client certificates.
    "--kubelet-preferred-address-types=InternalIP,Hostname",
    `--kubelet-client-certificate=${pki.kubeletClientCert}`,
    `--kubelet-client-key=${pki.kubeletClientKey}`,
    // Nothing reaches the API through the kubernetes Service, and a loopback endpoint is invalid.
    "--endpoint-reconciler-type=none",
    // A webhook Service (the operator's conversion webhook, run by its Deployment on the real node) is
    // called at one of its endpoints, a pod address routed into the node's network, rather than at its
    // cluster IP: no kube-proxy runs beside the API server.
    ...(realNode ? ["--enable-aggregator-routing=true"] : []),
    "--profiling=false",
    "--v=1",
  ];
}

export function controllerManagerArgs(
  stateDir: string,
  ports: ClusterPorts,
  pki: Pki,
  kubeconfigPath: string,
  nodeLeaseDurationSeconds?: number,
): string[] {
  return [
    `--kubeconfig=${kubeconfigPath}`,
    `--authentication-kubeconfig=${kubeconfigPath}`,
    `--authorization-kubeconfig=${kubeconfigPath}`,
    "--bind-address=127.0.0.1",
    `--secure-port=${ports.controllerManager}`,
    // Longer leases are renewed less often: a node is lost only after a whole lease without renewal.
    ...(nodeLeaseDurationSeconds === undefined
      ? []
      : [`--node-monitor-grace-period=${nodeLeaseDurationSeconds + 10}s`]),
    `--cert-dir=${join(stateDir, "certs")}`,
    "--controllers=*",
    "--use-service-account-credentials=true",
    `--service-account-private-key-file=${pki.serviceAccountKey}`,
    `--root-ca-file=${pki.caCert}`,
    `--cluster-signing-cert-file=${pki.caCert}`,
    `--cluster-signing-key-file=${pki.caKey}`,
    `--service-cluster-ip-range=${SERVICE_CLUSTER_IP_RANGE}`,
    "--cluster-name=dpo-local",
    // The default 20 QPS makes a 1000-node cluster take minutes to drop its not-ready taints.
    "--kube-api-qps=200",
    "--kube-api-burst=400",
    "--leader-elect=false",
    "--profiling=false",
    "--v=1",
  ];
}

export function schedulerArgs(stateDir: string, ports: ClusterPorts, kubeconfigPath: string): string[] {
  return [
    `--kubeconfig=${kubeconfigPath}`,
    `--authentication-kubeconfig=${kubeconfigPath}`,
    `--authorization-kubeconfig=${kubeconfigPath}`,
    "--bind-address=127.0.0.1",
    `--secure-port=${ports.scheduler}`,
    `--cert-dir=${join(stateDir, "certs")}`,
    "--leader-elect=false",
    "--profiling=false",
    "--v=1",
  ];
}

export function kwokArgs(
  kubeconfigPath: string,
  configPath: string,
  nodeLeaseDurationSeconds = 40,
): string[] {
  return [
    `--kubeconfig=${kubeconfigPath}`,
    `--config=${configPath}`,
    `--manage-nodes-with-label-selector=${SIMULATED_NODE_SELECTOR}`,
    // Leases are what the node lifecycle controller watches; without them nodes turn NotReady.
    `--node-lease-duration-seconds=${nodeLeaseDurationSeconds}`,
    `--cidr=${POD_CIDR}`,
  ];
}
