// The plugins' report writers for the capacity config, one per node, as its plugin pods would run them.
import type { AppsV1Api, CoreV1Api, KubeConfig, V1DaemonSet } from "@kubernetes/client-node";
import { join } from "node:path";
import { kubeRequest } from "../../src/kube/request.js";
import { LABEL_REVISION } from "../../src/operator/model/names.js";
import { loadKubeconfig, type ApiCredentials } from "../../src/plugin-runtime/report/api-client.js";
import { ReportFleet } from "../../tools/cluster/report-fleet.js";
import { simulatedDevice } from "./gpu-devices.js";
import { DEVICE_SHAPE, DEVICES_PER_NODE, repo, RESOURCE } from "./knobs.js";

export type Kubectl = (args: string[]) => Promise<{ stdout: string }>;

/** The capacity config's DaemonSet, named after its plugin revision. */
export async function capacityDaemonSet(apps: AppsV1Api): Promise<V1DaemonSet> {
  const list = await apps.listNamespacedDaemonSet({
    namespace: "dpo-system",
    labelSelector: "dpo.dev/config=bench-capacity",
  });
  if (list.items.length !== 1) throw new Error(`${list.items.length} DaemonSets of bench-capacity`);
  return list.items[0]!;
}

/**
 * A report writer per node of the capacity config, as its plugin pods would run them: each with a
 * ServiceAccount token of dpo-plugin bound to the node's plugin pod (so it carries the node's name),
 * under the plugin's Role and the admission policy that lets a plugin write only its own node's report.
 */
export async function startReportFleet(
  kc: KubeConfig,
  kubeconfigPath: string,
  kubectl: Kubectl,
  core: CoreV1Api,
  apps: AppsV1Api,
): Promise<ReportFleet> {
  await kubectl([
    "apply",
    "--server-side",
    "-f",
    join(repo, "config", "rbac", "plugin_role.yaml"),
    "-f",
    join(repo, "config", "rbac", "plugin_role_binding.yaml"),
  ]);
  await kubectl(["apply", "--server-side", "-k", join(repo, "config", "policy")]);
  const config = (
    await kubeRequest<{ metadata: { uid: string } }>(kc, {
      method: "GET",
      path: "/apis/dpo.dev/v1beta1/devicepluginconfigs/bench-capacity",
    })
  ).metadata;
  const ds = await capacityDaemonSet(apps);
  const pods = await core.listNamespacedPod({
    namespace: "dpo-system",
    labelSelector: "dpo.dev/config=bench-capacity",
  });
  const podByNode = new Map<string, { name: string; uid: string }>();
  for (const pod of pods.items) {
    if (pod.spec?.nodeName && !pod.metadata?.deletionTimestamp)
      podByNode.set(pod.spec.nodeName, { name: pod.metadata!.name!, uid: pod.metadata!.uid! });
  }
  const base = await loadKubeconfig(kubeconfigPath);
  const credentials = new Map<string, ApiCredentials>();
  const entries = [...podByNode].sort(([a], [b]) => (a < b ? -1 : 1));
  for (let i = 0; i < entries.length; i += 50) {
    await Promise.all(
      entries.slice(i, i + 50).map(async ([node, pod]) => {
        const answer = await core.createNamespacedServiceAccountToken({
          name: "dpo-plugin",
          namespace: "dpo-system",
          body: {
            spec: {
              audiences: [],
              expirationSeconds: 7200,
              boundObjectRef: { apiVersion: "v1", kind: "Pod", name: pod.name, uid: pod.uid },
            },
          },
        });
        credentials.set(node, {
          server: base.server,
          ...(base.ca === undefined ? {} : { ca: base.ca }),
          token: answer.status!.token,
        });
      }),
    );
  }
  const fleet = new ReportFleet({
    namespace: "dpo-system",
    config: { name: "bench-capacity", uid: config.uid },
    resourceName: RESOURCE,
    revision: ds.metadata?.labels?.[LABEL_REVISION],
    devices: DEVICES_PER_NODE,
    device: (nodeIndex, index) => simulatedDevice(DEVICE_SHAPE, nodeIndex, index),
    credentials,
  });
  await fleet.start(200, 600_000);
  return fleet;
}
