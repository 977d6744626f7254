// The kubelet's GetAllocatableResources on the PodResources socket: the device ids it would hand out
// (device manager GetAllocatableDevices: allDevices ∩ healthyDevices), node-local, no API-server cost.
import * as grpc from "@grpc/grpc-js";
import type { AllocatableResourcesResponse, PodResourcesListerClient } from "../proto/index.js";

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

/** One GetAllocatableResources call; rejects as the call fails. */
export function readAllocatable(
  client: PodResourcesListerClient,
  resourceName: string,
  timeoutMs: number,
): Promise<ReadonlySet<string>> {
  return new Promise((resolve, reject) => {
    client.getAllocatableResources(
      {},
      new grpc.Metadata(),
      { deadline: Date.now() + timeoutMs },
      (err, res) => (err ? reject(err) : resolve(allocatableIdsOf(res, resourceName))),
    );
  });
}
