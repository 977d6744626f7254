// What the kubelet does with a pod that reaches its node, as pure functions: which pods the simulator
// runs instead of KWOK, what each container asks of the device manager, and the pod status the kubelet
// writes when a pod starts or is rejected at admission.
import type {
  V1Container,
  V1Pod,
  V1PodCondition,
  V1PodStatus,
  V1ResourceStatus,
} from "@kubernetes/client-node";
import { LABEL_NAME, PLUGIN_APP_NAME } from "../../src/operator/model/names.js";

/** The kubelet's reason for a pod its device manager could not admit (lifecycle.UnexpectedAdmissionError). */
export const UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError";

/**
 * Extended resources are the ones with a domain (`example.com/foo`); native ones (cpu, memory,
 * ephemeral-storage, hugepages-*) have none.
 */
function isExtendedResource(name: string): boolean {
  return name.includes("/");
}

function containersOf(pod: V1Pod): { container: V1Container; init: boolean }[] {
  return [
    ...(pod.spec?.initContainers ?? []).map((container) => ({ container, init: true })),
    ...(pod.spec?.containers ?? []).map((container) => ({ container, init: false })),
  ];
}

export function isPluginPod(pod: V1Pod): boolean {
  return pod.metadata?.labels?.[LABEL_NAME] === PLUGIN_APP_NAME;
}

/** Whether any container of the pod asks for an extended resource, in its limits or its requests. */
export function requestsExtendedResources(pod: V1Pod): boolean {
  return containersOf(pod).some(({ container }) =>
    Object.keys({ ...container.resources?.limits, ...container.resources?.requests }).some(
      isExtendedResource,
    ),
  );
}

/**
 * KEP-5004's `status.extendedResourceClaimStatus`, which client-node's V1PodStatus may lack: the claim the
 * scheduler made for a pod's extended resources that a DeviceClass maps to DRA, and which container's
 * resource went to which of its requests.
 */
export interface ExtendedResourceClaimStatus {
  resourceClaimName?: string;
  requestMappings?: { containerName?: string; resourceName?: string; requestName?: string }[];
}

export function extendedResourceClaimStatus(pod: V1Pod): ExtendedResourceClaimStatus | undefined {
  const status = (pod.status as { extendedResourceClaimStatus?: ExtendedResourceClaimStatus } | undefined)
    ?.extendedResourceClaimStatus;
  return status?.resourceClaimName ? status : undefined;
}

/**
 * Whether the pod references DRA ResourceClaims, which the kubelet prepares before starting it: in
 * spec.resourceClaims, or the claim the scheduler made for its extended resources (KEP-5004).
 */
export function usesResourceClaims(pod: V1Pod): boolean {
  return (pod.spec?.resourceClaims ?? []).length > 0 || extendedResourceClaimStatus(pod) !== undefined;
}

/**
 * The extended resources the pod's DRA claim serves, which the device manager leaves alone: as the
 * kubelet's extendedResourceAllocationModeForPod, a name mapped once counts as DRA's for every container.
 */
function draMappedResources(pod: V1Pod): Set<string> {
  const status = extendedResourceClaimStatus(pod);
  if (status === undefined || (status.requestMappings ?? []).length === 0) return new Set();
  return new Set((status.requestMappings ?? []).map((m) => m.resourceName ?? ""));
}

/**
 * Pods the kubelet simulator starts (and KWOK leaves alone; see the KWOK stages): plugin pods, which
 * run a real process, pods that ask for extended resources, which the device manager admits, and pods
 * with ResourceClaims, whose claims the DRA manager prepares first.
 * The KWOK stage's selector must say the same: see kwok-stages.ts.
 */
export function simulatorRunsPod(pod: V1Pod): boolean {
  return isPluginPod(pod) || requestsExtendedResources(pod) || usesResourceClaims(pod);
}

/** One container's device-manager work (extended resources mapped to DRA are not in it), in the order the kubelet admits them (init containers first). */
export interface ContainerDeviceRequest {
  name: string;
  init: boolean;
  /** An init container with `restartPolicy: Always` (a sidecar) keeps its devices. */
  restartable: boolean;
  /** Extended resource → count, from the limits (the kubelet reads limits: requests must equal them). */
  resources: [string, number][];
}

export function containerDeviceRequests(pod: V1Pod): ContainerDeviceRequest[] {
  const dra = draMappedResources(pod);
  return containersOf(pod).map(({ container, init }) => ({
    name: container.name,
    init,
    restartable: init && container.restartPolicy === "Always",
    resources: Object.entries(container.resources?.limits ?? {})
      .filter(([name]) => isExtendedResource(name) && !dra.has(name))
      .map(([name, quantity]) => [name, Number(quantity)] as [string, number])
      .filter(([, count]) => Number.isInteger(count) && count > 0)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  }));
}

function condition(type: string, status: boolean, now: string): V1PodCondition {
  return { type, status: status ? "True" : "False", lastTransitionTime: now as unknown as Date };
}

/**
 * The status the kubelet writes for a pod whose containers run: phase Running, every container
 * started; `ready` is the readiness of the (single-process) pod, from its readiness probe. An exited
 * container keeps the pod Running (restartPolicy Always) but not ready, with its exit in the status.
 */
export function runningPodStatus(
  pod: V1Pod,
  options: {
    now: string;
    startedAt: string;
    hostIP: string | undefined;
    ready: boolean;
    exited?: { exitCode: number; reason: string };
    /**
     * Each container's `allocatedResourcesStatus` (see allocatedResourcesStatus), for kubelets that report
     * device health in pod status; absent from the status otherwise.
     */
    allocatedResources?: (container: string) => V1ResourceStatus[] | undefined;
  },
): V1PodStatus {
  const { now, exited } = options;
  const ready = options.ready && exited === undefined;
  const readinessGates = (pod.spec?.readinessGates ?? []).map((g) => condition(g.conditionType, true, now));
  return {
    phase: "Running",
    startTime: (pod.status?.startTime ?? options.startedAt) as unknown as Date,
    ...(options.hostIP !== undefined ? { hostIP: options.hostIP, hostIPs: [{ ip: options.hostIP }] } : {}),
    ...(pod.spec?.hostNetwork && options.hostIP !== undefined
      ? { podIP: options.hostIP, podIPs: [{ ip: options.hostIP }] }
      : {}),
    conditions: [
      condition("PodReadyToStartContainers", true, now),
      condition("Initialized", true, now),
      condition("ContainersReady", ready, now),
      condition("Ready", ready, now),
      ...readinessGates,
    ],
    initContainerStatuses: (pod.spec?.initContainers ?? []).map((c) => ({
      name: c.name,
      image: c.image ?? "",
      imageID: "",
      ready: c.restartPolicy === "Always" ? ready : true,
      restartCount: 0,
      state:
        c.restartPolicy === "Always"
          ? { running: { startedAt: options.startedAt as unknown as Date } }
          : {
              terminated: {
                exitCode: 0,
                reason: "Completed",
                startedAt: options.startedAt as unknown as Date,
                finishedAt: options.startedAt as unknown as Date,
              },
            },
    })),
    containerStatuses: (pod.spec?.containers ?? []).map((c) => ({
      name: c.name,
      image: c.image ?? "",
      imageID: "",
      ready,
      started: exited === undefined,
      restartCount: 0,
      ...withAllocatedResources(options.allocatedResources?.(c.name)),
      state:
        exited === undefined
          ? { running: { startedAt: options.startedAt as unknown as Date } }
          : {
              terminated: {
                exitCode: exited.exitCode,
                reason: exited.reason,
                startedAt: options.startedAt as unknown as Date,
                finishedAt: now as unknown as Date,
              },
            },
    })),
  };
}

function withAllocatedResources(statuses: V1ResourceStatus[] | undefined): {
  allocatedResourcesStatus?: V1ResourceStatus[];
} {
  return statuses === undefined || statuses.length === 0 ? {} : { allocatedResourcesStatus: statuses };
}

/**
 * A container's device health as the kubelet writes it in its status (devicemanager's
 * UpdateAllocatedResourcesStatus, with ResourceHealthStatus on): one entry per extended resource it holds,
 * listing each of its devices as Healthy or Unhealthy (a device the kubelet no longer knows counts as
 * Healthy there). The kubelet lists them in map order; here they are sorted, and comparisons sort too.
 */
export function allocatedResourcesStatus(
  devices: Readonly<Record<string, readonly string[]>>,
  healthOf: (resource: string, id: string) => string | undefined,
): V1ResourceStatus[] {
  return Object.entries(devices)
    .filter(([, ids]) => ids.length > 0)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([resource, ids]) => ({
      name: resource,
      resources: [...ids].sort().map((id) => ({
        resourceID: id,
        health: (healthOf(resource, id) ?? "Healthy") === "Healthy" ? "Healthy" : "Unhealthy",
      })),
    }));
}

/** What the kubelet writes for a pod it rejects at admission (Kubelet.rejectPod). */
export function rejectedPodStatus(reason: string, message: string): V1PodStatus {
  return { phase: "Failed", reason, message: `Pod was rejected: ${message}` };
}

/** The message of an UnexpectedAdmissionError (pkg/kubelet/cm/admission: unexpectedAdmissionError). */
export function unexpectedAdmissionMessage(err: string): string {
  return `Allocate failed due to ${err}, which is unexpected`;
}
