// A steady stream of workload pods asking for devices through the scheduler, each one's outcome read from
// the API: the load the upgrade and DRA tests and benchmarks keep on a fleet while its plugin changes.
import { CoreV1Api, type KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { createInformer } from "../../src/kube/informer.js";
import { PODS } from "../../src/kube/resources.js";
import { waitFor } from "../cluster/wait.js";

/** Creations in flight at most: the stream keeps its pace while the API server is slow to answer. */
const MAX_CREATIONS_IN_FLIGHT = 16;
/** How long stop() gives a pod not yet scheduled to be placed before it counts as never scheduled. */
const UNSCHEDULED_GRACE_MS = 30_000;

/** What a stream of workload pods met: each pod's node and how its admission ended. */
export interface PodStreamResult {
  created: number;
  /** Pods that ran (admitted through Allocate), by node. */
  admitted: Map<string, number>;
  /** Pods the kubelet rejected, with the node, reason and message. */
  rejected: { node: string; reason: string; message: string }[];
  /**
   * Pods no node took: still unscheduled when the stream stopped and for UNSCHEDULED_GRACE_MS after, each
   * with what the scheduler said. A failure like a rejection: the pod never ran.
   */
  unscheduled: string[];
}

/**
 * A steady stream of workload pods, each asking for one device of `resource`: created at `perSecond`
 * through the scheduler, deleted once they ran for `holdMs` or were rejected. Every pod's outcome is
 * read from the API (phase, reason, node), as a user would read it. stop() stops creating, waits for
 * the pods still on their way (scheduled ones must end Running or Failed; one still unscheduled after a
 * grace counts in `unscheduled`, never dropped) and returns what happened.
 */
export function podStream(
  kc: KubeConfig,
  namespace: string,
  resource: string,
  options: {
    perSecond: number;
    holdMs: number;
    name: string;
    /** For pods that really run (the real node): an image it has, a command, and where they may go. */
    image?: string;
    command?: string[];
    nodeSelector?: Record<string, string>;
    tolerations?: { key: string; operator: string; effect: string }[];
  },
): { stop: () => Promise<PodStreamResult>; admitted: () => number; rejected: () => number } {
  const core = kc.makeApiClient(CoreV1Api);
  const label = { "dpo.dev/e2e-workload": options.name };
  const result: PodStreamResult = { created: 0, admitted: new Map(), rejected: [], unscheduled: [] };
  const settled = new Set<string>();
  const timers = new Set<NodeJS.Timeout>();
  const remove = (name: string): Promise<void> =>
    core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 }).then(
      () => undefined,
      () => undefined,
    );
  const informer = createInformer<V1Pod>(kc, {
    resource: PODS,
    namespace,
    labelSelector: `dpo.dev/e2e-workload=${options.name}`,
  });
  const seen = (pod: V1Pod): void => {
    const name = pod.metadata?.name ?? "";
    const node = pod.spec?.nodeName ?? "";
    if (settled.has(name)) return;
    if (pod.status?.phase === "Running") {
      settled.add(name);
      result.admitted.set(node, (result.admitted.get(node) ?? 0) + 1);
      const timer = setTimeout(() => {
        timers.delete(timer);
        void remove(name);
      }, options.holdMs);
      timers.add(timer);
    } else if (pod.status?.phase === "Failed") {
      settled.add(name);
      result.rejected.push({ node, reason: pod.status.reason ?? "", message: pod.status.message ?? "" });
      void remove(name);
    }
  };
  informer.onAdd(seen);
  informer.onUpdate((_, pod) => seen(pod));
  informer.start();
  let stopped = false;
  /** Creations in flight: the stream keeps its pace while the API server is slow to answer. */
  const inFlight = new Set<Promise<unknown>>();
  const create = (): void => {
    result.created++;
    const request = core
      .createNamespacedPod({
        namespace,
        body: {
          metadata: { generateName: `${options.name}-`, labels: label },
          spec: {
            terminationGracePeriodSeconds: 0,
            ...(options.nodeSelector ? { nodeSelector: options.nodeSelector } : {}),
            ...(options.tolerations ? { tolerations: options.tolerations } : {}),
            containers: [
              {
                name: "work",
                image: options.image ?? "registry.example/workload:1",
                ...(options.command ? { command: options.command } : {}),
                resources: { limits: { [resource]: "1" } },
              },
            ],
          },
        },
      })
      .catch(() => result.created--)
      .finally(() => inFlight.delete(request));
    inFlight.add(request);
  };
  const creating = (async () => {
    await informer.waitForSync();
    const started = performance.now();
    while (!stopped) {
      const due = Math.floor(((performance.now() - started) / 1000) * options.perSecond);
      while (result.created < due && inFlight.size < MAX_CREATIONS_IN_FLIGHT && !stopped) create();
      await new Promise<void>((resolve) => setTimeout(resolve, 50));
    }
    await Promise.all(inFlight);
  })();
  return {
    /** Pods admitted so far, on every node. */
    admitted: () => [...result.admitted.values()].reduce((a, b) => a + b, 0),
    rejected: () => result.rejected.length,
    stop: async () => {
      stopped = true;
      await creating;
      const stoppedAt = Date.now();
      const onTheirWay = (): V1Pod[] => informer.list().filter((p) => !settled.has(p.metadata?.name ?? ""));
      await waitFor(
        `the pods of ${options.name} still on their way to be admitted or rejected`,
        (observe) => {
          const pods = onTheirWay();
          const scheduled = pods.filter((p) => Boolean(p.spec?.nodeName));
          observe(pods.map((p) => [p.metadata?.name, p.spec?.nodeName, p.status?.phase]));
          // A pod no node has taken yet gets the grace to be placed; scheduled ones must settle.
          const unplacedWait =
            pods.length > scheduled.length && Date.now() - stoppedAt < UNSCHEDULED_GRACE_MS;
          return scheduled.length === 0 && !unplacedWait;
        },
        { timeoutMs: 60_000 + UNSCHEDULED_GRACE_MS },
      );
      for (const pod of onTheirWay()) {
        if (pod.spec?.nodeName) continue;
        const why = pod.status?.conditions?.find((c) => c.type === "PodScheduled");
        result.unscheduled.push(
          `${pod.metadata?.name}: ${why ? `${why.reason ?? ""}: ${why.message ?? ""}` : "never looked at by the scheduler"}`,
        );
      }
      for (const timer of timers) clearTimeout(timer);
      await informer.stop();
      await core
        .deleteCollectionNamespacedPod({
          namespace,
          labelSelector: `dpo.dev/e2e-workload=${options.name}`,
          gracePeriodSeconds: 0,
        })
        .catch(() => undefined);
      return result;
    },
  };
}
