// Pure renderers of the real node's configuration: containerd, the CNI network, the kubelet and kube-proxy.
import { stringify } from "yaml";

/** Where the real node sits on the host: a network namespace of its own, joined to the host by a veth pair. */
export interface RealNodeNetwork {
  /** `ip netns` name of the node's network namespace. */
  namespace: string;
  /** The veth end in the host's namespace, and its address: the API server is reached there. */
  hostInterface: string;
  hostAddress: string;
  /** The node's address (its InternalIP), on the veth end inside the namespace. */
  nodeAddress: string;
  prefixLength: number;
  /** Pod addresses, handed out by the CNI bridge inside the namespace. */
  podCidr: string;
}

/**
 * Addresses of the project's own test host, inside a namespace this run makes: nothing is sent beyond this
 * machine. The ranges are kept clear of the cluster's services (10.0.0.0/24).
 */
export const REAL_NODE_NETWORK: RealNodeNetwork = {
  namespace: "dpo-node",
  hostInterface: "dpo-node-veth",
  hostAddress: "10.201.0.1",
  nodeAddress: "10.201.0.2",
  prefixLength: 24,
  podCidr: "10.202.0.0/24",
};

export interface ContainerdPaths {
  root: string;
  state: string;
  socket: string;
  cniConfDir: string;
  cniBinDir: string;
}

/**
 * containerd 2.x (config version 3). `restrict_oom_score_adj`: these machines lack CAP_SYS_RESOURCE in every
 * bounding set, so runc cannot lower a sandbox's oom_score_adj and fails every pod without it. CDI is on by
 * default in 2.x; the spec directories are the kubelet's and the plugins' (`/var/run/cdi`).
 */
export function renderContainerdConfig(paths: ContainerdPaths, sandboxImage: string): string {
  return `version = 3
root = ${tomlString(paths.root)}
state = ${tomlString(paths.state)}

[grpc]
  address = ${tomlString(paths.socket)}

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = ${tomlString(sandboxImage)}

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  disable_apparmor = true
  cdi_spec_dirs = ['/etc/cdi', '/var/run/cdi']

[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = 'runc'

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = false

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = [${tomlString(paths.cniBinDir)}]
  conf_dir = ${tomlString(paths.cniConfDir)}
`;
}

function tomlString(value: string): string {
  if (/['\n]/.test(value)) throw new Error(`cannot write ${JSON.stringify(value)} as a TOML literal string`);
  return `'${value}'`;
}

/** A bridge with host-local addresses; pods reach the host (and the API server) through NAT. */
export function renderCniConfig(network: RealNodeNetwork): string {
  return `${JSON.stringify(
    {
      cniVersion: "1.0.0",
      name: "dpo-node",
      plugins: [
        {
          type: "bridge",
          bridge: "cni0",
          isGateway: true,
          ipMasq: true,
          hairpinMode: true,
          ipam: {
            type: "host-local",
            ranges: [[{ subnet: network.podCidr }]],
            routes: [{ dst: "0.0.0.0/0" }],
          },
        },
        { type: "portmap", capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  )}\n`;
}

export interface KubeletConfigInput {
  /** Minor version of the kubelet: from 1.35 it refuses cgroup v1 unless told otherwise. */
  minor: number;
  nodeAddress: string;
  clientCaFile: string;
  containerdSocket: string;
  /** A port of the node's own namespace for /healthz. */
  healthzPort: number;
  taints: { key: string; value: string; effect: "NoSchedule" | "NoExecute" | "PreferNoSchedule" }[];
}

/**
 * The kubelet's configuration file. cgroupfs: the machine's init is not systemd. Client certificates signed
 * by the cluster CA authenticate the API server; its requests are authorized by SubjectAccessReview, as on a
 * production node. Eviction thresholds are low so a busy shared disk does not taint the node.
 */
export function renderKubeletConfig(input: KubeletConfigInput): string {
  const config: Record<string, unknown> = {
    apiVersion: "kubelet.config.k8s.io/v1beta1",
    kind: "KubeletConfiguration",
    address: input.nodeAddress,
    port: 10250,
    readOnlyPort: 0,
    healthzBindAddress: "127.0.0.1",
    healthzPort: input.healthzPort,
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: input.clientCaFile },
    },
    authorization: { mode: "Webhook" },
    cgroupDriver: "cgroupfs",
    containerRuntimeEndpoint: `unix://${input.containerdSocket}`,
    failSwapOn: false,
    protectKernelDefaults: false,
    evictionHard: { "memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%" },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    registerWithTaints: input.taints,
    serializeImagePulls: false,
    // Status as often as a default kubelet, so allocatable reaches the Node within seconds.
    nodeStatusUpdateFrequency: "10s",
    // Pods get no resolver: nothing on this machine answers DNS, and dpo reaches the API server by address.
    resolvConf: "",
  };
  if (input.minor >= 35) config.failCgroupV1 = false;
  return stringify(config);
}

export interface KubeProxyConfigInput {
  kubeconfig: string;
  podCidr: string;
  hostnameOverride: string;
  healthzPort: number;
  metricsPort: number;
}

/** kube-proxy in iptables mode; conntrack sizing left alone (a namespace cannot change the host's). */
export function renderKubeProxyConfig(input: KubeProxyConfigInput): string {
  return stringify({
    apiVersion: "kubeproxy.config.k8s.io/v1alpha1",
    kind: "KubeProxyConfiguration",
    mode: "iptables",
    clientConnection: { kubeconfig: input.kubeconfig },
    clusterCIDR: input.podCidr,
    hostnameOverride: input.hostnameOverride,
    healthzBindAddress: `127.0.0.1:${input.healthzPort}`,
    metricsBindAddress: `127.0.0.1:${input.metricsPort}`,
    conntrack: { maxPerCore: 0, min: 0 },
  });
}

/** A kubeconfig with a client certificate, for the kubelet and kube-proxy. */
export function renderClientKubeconfig(input: {
  server: string;
  caFile: string;
  certFile: string;
  keyFile: string;
  user: string;
}): string {
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "local", cluster: { server: input.server, "certificate-authority": input.caFile } }],
    users: [
      { name: input.user, user: { "client-certificate": input.certFile, "client-key": input.keyFile } },
    ],
    contexts: [{ name: "local", context: { cluster: "local", user: input.user } }],
    "current-context": "local",
  });
}
