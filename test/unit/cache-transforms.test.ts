// What the operator's informers keep of each object: a Node enters the cache without managedFields,
// images and the rest nobody reads, while every field the status and selection code reads stays.
import type { KubernetesObject, V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { Informer, ManualClock, stripManagedFields, type ListResult } from "../../src/kube/index.js";
import { slimNodeForCache } from "../../src/operator/controllers/cache-transforms.js";
import { nodeChangeMatters } from "../../src/operator/controllers/mapping.js";

const RESOURCE = "vendor.example/foo";

function fullNode(name: string, resourceVersion: string): V1Node {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name,
      uid: `uid-${name}`,
      resourceVersion,
      creationTimestamp: "2026-01-01T00:00:00Z" as never,
      labels: { "feature.example/foo": "true", "kubernetes.io/hostname": name },
      annotations: {
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
      },
      managedFields: [
        {
          manager: "kubelet",
          operation: "Update",
          apiVersion: "v1",
          fieldsType: "FieldsV1",
          fieldsV1: { "f:status": {} },
        },
      ],
    },
    spec: {
      podCIDR: "10.0.0.0/24",
      providerID: "kwok://n1",
      unschedulable: true,
      taints: [{ key: "gpu", value: "yes", effect: "NoSchedule" }],
    },
    status: {
      capacity: { cpu: "8", [RESOURCE]: "4" },
      allocatable: { cpu: "8", [RESOURCE]: "3" },
      conditions: [
        {
          type: "Ready",
          status: "True",
          reason: "KubeletReady",
          message: "kubelet is posting ready status",
          lastHeartbeatTime: "2026-01-01T00:05:00Z" as never,
          lastTransitionTime: "2026-01-01T00:00:00Z" as never,
        },
      ],
      images: [{ names: ["registry.example/big:1"], sizeBytes: 123456789 }],
      addresses: [{ type: "InternalIP", address: "10.0.0.1" }],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      nodeInfo: {
        kubeletVersion: "v1.34.4",
        kubeProxyVersion: "v1.34.4",
        machineID: "m",
        systemUUID: "s",
        bootID: "b",
        kernelVersion: "6.1",
        osImage: "Debian",
        containerRuntimeVersion: "containerd://2.0",
        operatingSystem: "linux",
        architecture: "amd64",
      },
    },
  };
}

describe("slimNodeForCache", () => {
  it("drops managedFields, images and the rest the operator never reads, and keeps what it reads", () => {
    const slim = slimNodeForCache(fullNode("n1", "7"));
    expect(slim).toEqual({
      apiVersion: "v1",
      kind: "Node",
      metadata: {
        name: "n1",
        uid: "uid-n1",
        resourceVersion: "7",
        creationTimestamp: "2026-01-01T00:00:00Z",
        labels: { "feature.example/foo": "true", "kubernetes.io/hostname": "n1" },
      },
      spec: { unschedulable: true, taints: [{ key: "gpu", value: "yes", effect: "NoSchedule" }] },
      status: {
        capacity: { cpu: "8", [RESOURCE]: "4" },
        allocatable: { cpu: "8", [RESOURCE]: "3" },
        conditions: [
          {
            type: "Ready",
            status: "True",
            reason: "KubeletReady",
            lastTransitionTime: "2026-01-01T00:00:00Z",
          },
        ],
        nodeInfo: { kubeletVersion: "v1.34.4" },
      },
    });
  });

  it("tolerates a node without spec or status", () => {
    expect(slimNodeForCache({ metadata: { name: "bare", resourceVersion: "1" } })).toEqual({
      metadata: { name: "bare", resourceVersion: "1" },
    });
  });

  it("keeps every difference nodeChangeMatters looks at", () => {
    const base = fullNode("n1", "1");
    const changes: Array<(n: V1Node) => void> = [
      (n) => (n.metadata!.labels!["x"] = "y"),
      (n) => n.spec!.taints!.push({ key: "k", effect: "NoExecute" }),
      (n) => (n.spec!.unschedulable = false),
      (n) => (n.status!.conditions![0]!.status = "False"),
      (n) => (n.status!.capacity![RESOURCE] = "5"),
      (n) => (n.status!.allocatable![RESOURCE] = "4"),
    ];
    for (const change of changes) {
      const changed = fullNode("n1", "2");
      change(changed);
      expect(nodeChangeMatters(slimNodeForCache(base), slimNodeForCache(changed))).toBe(
        nodeChangeMatters(base, changed),
      );
    }
  });
});

describe("an informer with a transform", () => {
  it("caches Nodes from list and watch without managedFields and images", async () => {
    const clock = new ManualClock();
    let onEvent: ((type: string, object: unknown) => void) | undefined;
    const informer = new Informer<V1Node>({
      path: "/api/v1/nodes",
      list: (): Promise<ListResult<V1Node>> =>
        Promise.resolve({ items: [fullNode("listed", "5")], metadata: { resourceVersion: "5" } }),
      watch: (_path, _query, handler) => {
        onEvent = handler;
        return Promise.resolve({ abort: () => undefined });
      },
      clock,
      transform: slimNodeForCache,
    });
    const added: V1Node[] = [];
    informer.onAdd((n) => added.push(n));
    informer.start();
    try {
      await informer.waitForSync();
      await clock.advance(0);
      onEvent!("ADDED", fullNode("watched", "6"));
      for (const name of ["listed", "watched"]) {
        const cached = informer.get(name)!;
        expect(cached.metadata?.managedFields).toBeUndefined();
        expect(cached.status?.images).toBeUndefined();
        expect(cached.metadata?.labels?.["feature.example/foo"]).toBe("true");
        expect(cached.status?.capacity?.[RESOURCE]).toBe("4");
        expect(cached.status?.nodeInfo?.kubeletVersion).toBe("v1.34.4");
      }
      expect(added.map((n) => n.status?.images)).toEqual([undefined, undefined]);
    } finally {
      await informer.stop();
    }
  });

  it("stripManagedFields drops managedFields only", () => {
    const obj: KubernetesObject & { data: Record<string, string> } = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: {
        name: "cm",
        labels: { a: "b" },
        annotations: { c: "d" },
        ownerReferences: [
          { apiVersion: "dpo.dev/v1beta1", kind: "DevicePluginConfig", name: "foo", uid: "u" },
        ],
        managedFields: [{ manager: "dpo-operator", operation: "Apply" }],
      },
      data: { "config.yaml": "x" },
    };
    const { managedFields: _dropped, ...metadata } = obj.metadata!;
    expect(stripManagedFields(obj)).toEqual({ ...obj, metadata });
  });
});
