// The gates a starting control plane passes: each component healthy before the next starts, the nodes
// Ready without taints, and a DaemonSet that needs every controller, the scheduler and KWOK at once.
import type { AppsV1Api, CoreV1Api, V1DaemonSet, V1Node } from "@kubernetes/client-node";
import { readFile } from "node:fs/promises";
import { request } from "node:https";
import { SIMULATED_NODE_LABEL, SIMULATED_NODE_SELECTOR } from "./nodes.js";
import type { Pki } from "./pki.js";
import { logTail, type RunningProcess } from "./processes.js";
import { waitFor } from "./wait.js";

/** Where the startup gate runs its DaemonSet; deleted again before startCluster returns. */
export const HEALTH_CHECK_NAMESPACE = "dpo-cluster-check";
/** Never pulled: KWOK runs no containers. */
export const PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1";

/** Races `work` against the exit of any started component, whose log then explains the failure. */
export async function untilFirstExit<T>(
  running: RunningProcess[],
  work: () => Promise<T>,
  step: string,
): Promise<T> {
  const abort = new AbortController();
  const exits = running.map((child) =>
    child.exited.then(async (exit) => {
      if (abort.signal.aborted) return new Promise<never>(() => undefined);
      throw new Error(
        `${child.name} exited (code ${exit.code}, signal ${exit.signal}) during "${step}"; ` +
          `its log ${child.log} ends with:\n${await logTail(child.log)}`,
      );
    }),
  );
  try {
    return await Promise.race([work(), ...exits]);
  } finally {
    abort.abort();
  }
}

export async function etcdHealthy(port: number): Promise<boolean> {
  const response = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2_000) });
  const body = (await response.json()) as { health?: string };
  return body.health === "true";
}

export async function apiServerReady(server: string, pki: Pki): Promise<boolean> {
  const [ca, cert, key] = await Promise.all(
    [pki.caCert, pki.adminCert, pki.adminKey].map((p) => readFile(p)),
  );
  return new Promise<boolean>((resolve, reject) => {
    const req = request(`${server}/readyz`, { ca, cert, key, timeout: 2_000 }, (response) => {
      response.resume();
      response.on("end", () => resolve(response.statusCode === 200));
    });
    req.on("timeout", () => req.destroy(new Error("readyz request timed out")));
    req.on("error", reject);
    req.end();
  });
}

function nodeProblems(node: V1Node | undefined, name: string): string[] {
  if (!node) return [`${name}: missing`];
  const ready = node.status?.conditions?.find((condition) => condition.type === "Ready");
  const problems: string[] = [];
  if (ready?.status !== "True") problems.push(`${name}: Ready=${ready?.status ?? "none"}`);
  // The node lifecycle controller removes this taint a moment after Ready; pods schedule only then.
  for (const taint of node.spec?.taints ?? []) problems.push(`${name}: taint ${taint.key}:${taint.effect}`);
  return problems;
}

/** Waits until every node of `nodeNames` is Ready and has no taint left (pods schedule only then). */
export async function waitForNodesReady(
  core: CoreV1Api,
  nodeNames: readonly string[],
  timeoutMs: number,
  intervalMs = 200,
): Promise<void> {
  await waitFor(
    `${nodeNames.length} simulated nodes Ready without taints`,
    async (observe) => {
      const list = await core.listNode({ labelSelector: SIMULATED_NODE_SELECTOR });
      const byName = new Map(list.items.map((node) => [node.metadata?.name, node]));
      const problems = nodeNames.flatMap((name) => nodeProblems(byName.get(name), name));
      observe(problems);
      return problems.length === 0;
    },
    { timeoutMs, intervalMs },
  );
}

/**
 * A DaemonSet reaching Running on every node needs the controller-manager (DaemonSet controller,
 * service-account controller), the scheduler and KWOK together; its foreground deletion needs the
 * garbage collector and KWOK again. One check for all of them.
 */
export async function runHealthCheckDaemonSet(
  core: CoreV1Api,
  apps: AppsV1Api,
  nodeNames: string[],
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const left = (): number => Math.max(deadline - Date.now(), 1_000);
  const namespace = HEALTH_CHECK_NAMESPACE;
  const name = "cluster-check";
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  // Pods are rejected until the namespace's default ServiceAccount exists; waiting here avoids the
  // DaemonSet controller's backoff.
  await waitFor(
    `ServiceAccount ${namespace}/default`,
    () => core.readNamespacedServiceAccount({ name: "default", namespace }),
    { timeoutMs: left(), intervalMs: 100 },
  );
  const daemonSet: V1DaemonSet = {
    metadata: { name, namespace },
    spec: {
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          nodeSelector: { [SIMULATED_NODE_LABEL]: "true" },
          containers: [{ name: "pause", image: PAUSE_IMAGE }],
        },
      },
    },
  };
  await apps.createNamespacedDaemonSet({ namespace, body: daemonSet });
  await waitFor(
    `DaemonSet ${namespace}/${name} pods Running on ${nodeNames.join(", ")}`,
    async (observe) => {
      const pods = await core.listNamespacedPod({ namespace, labelSelector: `app=${name}` });
      const runningOn = new Set(
        pods.items.filter((pod) => pod.status?.phase === "Running").map((pod) => pod.spec?.nodeName),
      );
      observe(
        pods.items.map((pod) => `${pod.metadata?.name}@${pod.spec?.nodeName ?? "-"}:${pod.status?.phase}`),
      );
      return nodeNames.every((node) => runningOn.has(node));
    },
    { timeoutMs: left(), intervalMs: 200 },
  );
  await apps.deleteNamespacedDaemonSet({ name, namespace, propagationPolicy: "Foreground" });
  await waitFor(
    `DaemonSet ${namespace}/${name} and its pods deleted`,
    async (observe) => {
      const pods = await core.listNamespacedPod({ namespace, labelSelector: `app=${name}` });
      const daemonSets = await apps.listNamespacedDaemonSet({ namespace });
      observe({ pods: pods.items.length, daemonSets: daemonSets.items.length });
      return pods.items.length === 0 && daemonSets.items.length === 0;
    },
    { timeoutMs: left(), intervalMs: 200 },
  );
  await core.deleteNamespace({ name: namespace });
}
