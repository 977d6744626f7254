// The kubelet's GetAllocatableResources on the PodResources socket: the device ids it would hand out
// (device manager GetAllocatableDevices: allDevices ∩ healthyDevices), node-local, no API-server cost.
import { unaryCall } from "../grpc/client.js";
import { PodResourcesListerService, type AllocatableResourcesResponse } from "../proto/wire.js";

/** The ids of `resourceName` in one answer (a device on two NUMA nodes is listed once per node). */
export function allocatableIdsOf(
  response: AllocatableResourcesResponse,
  resourceName: string,
): ReadonlySet<string> {
  const ids = new Set<string>();
  for (const d of response.devices) {
    if (d.resourceName === resourceName) for (const id of d.deviceIds) ids.add(id);
  }
  return ids;
}

/** One GetAllocatableResources call on the kubelet's PodResources socket; rejects as the call fails. */
export async function readAllocatable(
  socketPath: string,
  resourceName: string,
  timeoutMs: number,
  maxReceiveBytes: number,
): Promise<ReadonlySet<string>> {
  const response = await unaryCall(
    socketPath,
    PodResourcesListerService.getAllocatableResources,
    {},
    { timeoutMs, maxReceiveBytes },
  );
  return allocatableIdsOf(response, resourceName);
}
