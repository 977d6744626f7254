// The real node's configuration files: what these machines need of containerd and the kubelet (cgroup v1, no
// CAP_SYS_RESOURCE), read back the way the components parse them.
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  REAL_NODE_NETWORK,
  renderClientKubeconfig,
  renderCniConfig,
  renderContainerdConfig,
  renderKubeletConfig,
  renderKubeProxyConfig,
} from "../../../../tools/real-node/config.js";

const PATHS = {
  root: "/state/containerd/root",
  state: "/state/containerd/state",
  socket: "/state/containerd/state/containerd.sock",
  cniConfDir: "/state/cni",
  cniBinDir: "/usr/lib/cni",
};

describe("renderContainerdConfig", () => {
  const toml = renderContainerdConfig(PATHS, "dpo.dev/pause:1.0");

  it.each([
    ["config version 3 (containerd 2.x)", /^version = 3$/m],
    ["its own root, state and socket", /^root = '\/state\/containerd\/root'$/m],
    ["the socket", /^ {2}address = '\/state\/containerd\/state\/containerd.sock'$/m],
    ["oom_score_adj kept at containerd's own (no CAP_SYS_RESOURCE)", /^ {2}restrict_oom_score_adj = true$/m],
    ["the locally built sandbox image", /^ {2}sandbox = 'dpo.dev\/pause:1.0'$/m],
    ["the CDI directories the plugins write", /^ {2}cdi_spec_dirs = \['\/etc\/cdi', '\/var\/run\/cdi'\]$/m],
    ["cgroupfs (no systemd)", /^ {2}SystemdCgroup = false$/m],
    ["Debian's CNI plugins", /^ {2}bin_dirs = \['\/usr\/lib\/cni'\]$/m],
  ])("sets %s", (_what, pattern) => {
    expect(toml).toMatch(pattern);
  });

  it("refuses a path it cannot quote", () => {
    expect(() => renderContainerdConfig({ ...PATHS, root: "/it's" }, "p")).toThrow(/TOML literal string/);
  });
});

describe("renderKubeletConfig", () => {
  const input = {
    nodeAddress: REAL_NODE_NETWORK.nodeAddress,
    clientCaFile: "/pki/ca.crt",
    containerdSocket: PATHS.socket,
    healthzPort: 10248,
    taints: [{ key: "dpo.dev/real-node", value: "true", effect: "NoSchedule" as const }],
  };

  it.each([
    [34, undefined],
    [35, false],
    [37, false],
  ])("on a 1.%i kubelet sets failCgroupV1 to %s", (minor, failCgroupV1) => {
    const config = parse(renderKubeletConfig({ ...input, minor })) as Record<string, unknown>;
    expect(config.failCgroupV1).toBe(failCgroupV1);
  });

  it("uses cgroupfs, the node's containerd, webhook authorization and the taint", () => {
    const config = parse(renderKubeletConfig({ ...input, minor: 37 })) as Record<string, unknown>;
    expect(config).toMatchObject({
      kind: "KubeletConfiguration",
      cgroupDriver: "cgroupfs",
      containerRuntimeEndpoint: `unix://${PATHS.socket}`,
      address: "10.201.0.2",
      readOnlyPort: 0,
      authentication: { anonymous: { enabled: false }, x509: { clientCAFile: "/pki/ca.crt" } },
      authorization: { mode: "Webhook" },
      registerWithTaints: input.taints,
    });
  });
});

describe("the node's network", () => {
  it("hands pods addresses outside the services' range and the node's own link", () => {
    const cni = JSON.parse(renderCniConfig(REAL_NODE_NETWORK)) as {
      plugins: { type: string; ipMasq?: boolean; ipam?: { ranges: { subnet: string }[][] } }[];
    };
    expect(cni.plugins[0]).toMatchObject({ type: "bridge", ipMasq: true });
    expect(cni.plugins[0]!.ipam!.ranges[0]![0]!.subnet).toBe("10.202.0.0/24");
  });

  it("runs kube-proxy in iptables mode for the pod range, leaving the host's conntrack sizing alone", () => {
    const config = parse(
      renderKubeProxyConfig({
        kubeconfig: "/kp",
        podCidr: REAL_NODE_NETWORK.podCidr,
        hostnameOverride: "n",
        healthzPort: 1,
        metricsPort: 2,
      }),
    ) as Record<string, unknown>;
    expect(config).toMatchObject({
      mode: "iptables",
      clusterCIDR: "10.202.0.0/24",
      conntrack: { maxPerCore: 0 },
    });
  });

  it("writes client-certificate kubeconfigs", () => {
    const kubeconfig = parse(
      renderClientKubeconfig({
        server: "https://10.201.0.1:6443",
        caFile: "/ca",
        certFile: "/c",
        keyFile: "/k",
        user: "system:node:n",
      }),
    ) as { clusters: { cluster: { server: string } }[]; users: { user: Record<string, string> }[] };
    expect(kubeconfig.clusters[0]!.cluster.server).toBe("https://10.201.0.1:6443");
    expect(kubeconfig.users[0]!.user).toEqual({ "client-certificate": "/c", "client-key": "/k" });
  });
});
