// The pods of the simulated nodes that ask for devices: admitted through the device manager as the
// kubelet's resource allocator does (or rejected), started once their ResourceClaims are prepared, their
// status written with their devices' health, and their devices and claims given back when they go.
import type { V1Pod, V1PodStatus } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { DraPreparedPod } from "./dra-manager.js";
import { FAILED_PREPARE_DYNAMIC_RESOURCES } from "./dra-rules.js";
import type { KubeletApi } from "./kubelet-api.js";
import type { AdmittedContainer, AdmittedPod } from "./node-pods.js";
import { creationTime, isActivePod } from "./plugin-pod.js";
import {
  allocatedResourcesStatus,
  containerDeviceRequests,
  rejectedPodStatus,
  runningPodStatus,
  UNEXPECTED_ADMISSION_ERROR,
  unexpectedAdmissionMessage,
  usesResourceClaims,
} from "./pod-admission.js";
import type { SimulatedNode } from "./simulated-node.js";

export type { AdmittedContainer, AdmittedPod } from "./node-pods.js";

/** How soon a pod whose claims could not be prepared is tried again (the kubelet's pod worker backs off). */
const DRA_PREPARE_RETRY_MS = 2_000;

/** A pod whose claims could not be prepared: it stays Pending, as the kubelet leaves it, and is retried. */
export interface PrepareFailedPod {
  node: string;
  pod: string;
  uid: string;
  /** The kubelet's Event message: `Failed to prepare dynamic resources: prepare dynamic resources: ...`. */
  message: string;
}

/** A pod the simulated kubelet refused at admission, as its status says. */
export interface RejectedPod {
  node: string;
  pod: string;
  uid: string;
  reason: string;
  message: string;
}

export interface WorkloadPodEvents {
  podAdmitted: [AdmittedPod];
  podRejected: [RejectedPod];
  podPrepareFailed: [PrepareFailedPod];
}

export interface WorkloadPodsOptions {
  api: KubeletApi;
  log: Logger;
  isStopped: () => boolean;
  /** Reports each event as KubeletSimulator emits it. */
  notify: { [K in keyof WorkloadPodEvents]: (...args: WorkloadPodEvents[K]) => void };
  /** Another reconcile of `node` after `ms`: a pod whose claims wait is tried again then. */
  retryLater: (node: SimulatedNode, ms: number) => void;
}

export class WorkloadPods {
  constructor(private readonly options: WorkloadPodsOptions) {}

  /**
   * Pod admission as the kubelet's device manager does it (the resource allocator admit handler): each
   * container in order, init containers first, gets its device-plugin resources through
   * GetPreferredAllocation/Allocate (devices of finished init containers reused); a failure rejects
   * the pod with UnexpectedAdmissionError, an Event and phase Failed. Resources no plugin registered
   * are not the device manager's and pass. Devices go back when the pod is gone or finished.
   */
  async admit(node: SimulatedNode, pods: V1Pod[]): Promise<void> {
    const { log } = this.options;
    const present = new Map(pods.map((p) => [p.metadata?.uid ?? "", p]));
    for (const [uid, admitted] of node.admitted) {
      const pod = present.get(uid);
      if (pod !== undefined && isActivePod(pod)) continue;
      node.deviceManager.release(uid);
      node.draPending.delete(uid);
      try {
        await node.dra.unpreparePod(uid);
      } catch (err) {
        // The kubelet keeps the pod's resources until its claims are unprepared, and tries again.
        log.warn(
          { node: node.name, pod: admitted.pod, err: (err as Error).message },
          "claims not unprepared",
        );
        this.options.retryLater(node, DRA_PREPARE_RETRY_MS);
        continue;
      }
      node.admitted.delete(uid);
      node.running.delete(uid);
      log.info({ node: node.name, pod: admitted.pod }, "pod gone: devices released");
    }
    for (const uid of node.rejected) if (!present.has(uid)) node.rejected.delete(uid);
    const waiting = pods
      .filter(
        (p) =>
          isActivePod(p) &&
          (!node.admitted.has(p.metadata?.uid ?? "") || node.draPending.has(p.metadata?.uid ?? "")) &&
          !node.rejected.has(p.metadata?.uid ?? ""),
      )
      .sort((a, b) => creationTime(a) - creationTime(b));
    for (const pod of waiting) {
      if (this.options.isStopped()) return;
      await this.admitPod(node, pod);
    }
  }

  /**
   * The device manager's health updates reach the pods that hold the devices: the kubelet syncs their
   * status again (ResourceHealthStatus), so a failed device shows in its holder's container status.
   */
  async writeDeviceHealth(node: SimulatedNode, resource: string): Promise<void> {
    if (!node.deviceHealthInPodStatus || this.options.isStopped()) return;
    for (const [uid, admitted] of node.admitted) {
      const running = node.running.get(uid);
      if (!running || !admitted.containers.some((c) => (c.devices[resource] ?? []).length > 0)) continue;
      const status = admittedPodStatus(node, running.pod, admitted, running.startedAt);
      // Only a change of health is written: the plugin resends its whole list for any change.
      const health = JSON.stringify(status.containerStatuses?.map((c) => c.allocatedResourcesStatus));
      if (health === running.health) continue;
      running.health = health;
      await this.options.api.writePodStatus(running.pod, status);
    }
  }

  private async admitPod(node: SimulatedNode, pod: V1Pod): Promise<void> {
    const { api, log } = this.options;
    const uid = pod.metadata?.uid ?? "";
    const name = `${pod.metadata?.namespace}/${pod.metadata?.name}`;
    // Admitted before, its claims not prepared then: only the start is tried again.
    const earlier = node.draPending.has(uid) ? node.admitted.get(uid) : undefined;
    if (earlier !== undefined) {
      await this.start(node, pod, earlier);
      return;
    }
    const containers: AdmittedContainer[] = [];
    const reusable = new Map<string, string[]>();
    try {
      for (const request of containerDeviceRequests(pod)) {
        const container: AdmittedContainer = { name: request.name, devices: {}, env: {} };
        for (const [resource, count] of request.resources) {
          if (!node.deviceManager.isDevicePluginResource(resource)) continue;
          const reuse = reusable.get(resource) ?? [];
          const { deviceIds, response } = await node.deviceManager.allocate(resource, count, {
            reuse,
            owner: uid,
            container: request.name,
          });
          Object.assign(container.env, response.containerResponses[0]?.envs ?? {});
          container.devices[resource] = deviceIds;
          // A finished init container's devices may go to the next containers; others keep theirs.
          reusable.set(
            resource,
            request.init && !request.restartable
              ? [...new Set([...reuse, ...deviceIds])]
              : reuse.filter((id) => !deviceIds.includes(id)),
          );
        }
        containers.push(container);
      }
    } catch (err) {
      node.deviceManager.release(uid);
      const message = unexpectedAdmissionMessage((err as Error).message);
      if (pod.status?.phase === "Running") {
        // Already running before this kubelet started (a simulator restarted over live pods): a
        // restarted kubelet leaves running containers alone.
        log.warn({ node: node.name, pod: name, message }, "running pod not re-admitted");
        node.admitted.set(uid, { node: node.name, pod: name, uid, containers, cdiDeviceIds: {} });
        return;
      }
      node.rejected.add(uid);
      log.info({ node: node.name, pod: name, message }, "pod rejected at admission");
      // The kubelet's order (rejectPod): the Event, then the status.
      await api.recordPodEvent(node.name, pod, UNEXPECTED_ADMISSION_ERROR, message);
      await api.writePodStatus(pod, rejectedPodStatus(UNEXPECTED_ADMISSION_ERROR, message));
      this.options.notify.podRejected({
        node: node.name,
        pod: name,
        uid,
        reason: UNEXPECTED_ADMISSION_ERROR,
        message,
      });
      return;
    }
    const admitted: AdmittedPod = { node: node.name, pod: name, uid, containers, cdiDeviceIds: {} };
    node.admitted.set(uid, admitted);
    await this.start(node, pod, admitted);
  }

  /**
   * What the kubelet's SyncPod does for an admitted pod before its sandbox: PrepareDynamicResources.
   * When that fails the pod is not started: a Warning Event `FailedPrepareDynamicResources` (one per
   * new message here; the kubelet sends one per attempt), the pod stays as it is, and it is tried again.
   */
  private async start(node: SimulatedNode, pod: V1Pod, admitted: AdmittedPod): Promise<void> {
    const { api, log, notify } = this.options;
    const { uid, pod: name } = admitted;
    if (usesResourceClaims(pod)) {
      let prepared: DraPreparedPod;
      try {
        prepared = await node.dra.preparePod(pod, (namespace, claimName) =>
          api.readClaim(namespace, claimName),
        );
      } catch (err) {
        const message = `Failed to prepare dynamic resources: ${(err as Error).message}`;
        const first = node.draPending.get(uid) !== message;
        node.draPending.set(uid, message);
        this.options.retryLater(node, DRA_PREPARE_RETRY_MS);
        if (!first) return;
        log.info({ node: node.name, pod: name, message }, "claims not prepared: pod not started");
        await api.recordPodEvent(node.name, pod, FAILED_PREPARE_DYNAMIC_RESOURCES, message);
        notify.podPrepareFailed({ node: node.name, pod: name, uid, message });
        return;
      }
      node.draPending.delete(uid);
      admitted.cdiDeviceIds = prepared.cdiDeviceIds;
    }
    const now = new Date().toISOString();
    const status = admittedPodStatus(node, pod, admitted, now);
    node.running.set(uid, {
      pod,
      startedAt: now,
      health: JSON.stringify(status.containerStatuses?.map((c) => c.allocatedResourcesStatus)),
    });
    await api.writePodStatus(pod, status);
    log.info(
      { node: node.name, pod: name, containers: admitted.containers, cdi: admitted.cdiDeviceIds },
      "pod admitted",
    );
    notify.podAdmitted(admitted);
  }
}

/** An admitted pod's Running status, with its containers' device health where its node's kubelet has it. */
function admittedPodStatus(
  node: SimulatedNode,
  pod: V1Pod,
  admitted: AdmittedPod,
  startedAt: string,
): V1PodStatus {
  return runningPodStatus(pod, {
    now: new Date().toISOString(),
    startedAt,
    hostIP: node.hostIP,
    ready: true,
    ...(node.deviceHealthInPodStatus
      ? {
          allocatedResources: (container: string) =>
            allocatedResourcesStatus(
              admitted.containers.find((c) => c.name === container)?.devices ?? {},
              (resource, id) => node.deviceManager.deviceHealth(resource, id),
            ),
        }
      : {}),
  });
}
