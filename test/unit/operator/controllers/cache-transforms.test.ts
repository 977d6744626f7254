// What the operator's informers keep of each object: a Node enters the cache without managedFields,
// images and the rest nobody reads, while every field the status and selection code reads stays.
import type { KubernetesObject, V1Node, V1Pod } from "@kubernetes/client-node";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { Informer, ManualClock, stripManagedFields, type ListResult } from "../../../../src/kube/index.js";
import { slimNodeForCache, slimPodForCache } from "../../../../src/operator/controllers/cache-transforms.js";
import { choosePluginPod, evaluateNode, podIsReady } from "../../../../src/operator/status/node-health.js";
import { nodeChangeMatters } from "../../../../src/operator/controllers/mapping.js";

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
        "upgrade.dpo.dev/foo": '{"from":"a","to":"b","startedAt":1}',
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
        // The upgrade's record of the node (ADR 0004), and no other annotation.
        annotations: { "upgrade.dpo.dev/foo": '{"from":"a","to":"b","startedAt":1}' },
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

  it("keeps of the managedFields only who owns each device label (ADR 0011)", () => {
    const node = fullNode("n1", "7");
    node.metadata!.managedFields!.push({
      manager: "dpo-node-labels/gpus",
      operation: "Apply",
      apiVersion: "v1",
      fieldsType: "FieldsV1",
      time: "2026-01-01T00:00:00Z" as never,
      fieldsV1: { "f:metadata": { "f:labels": { "f:nvidia.com/gpu.count": {}, "f:example.com/x": {} } } },
    });
    expect(slimNodeForCache(node).metadata?.managedFields).toEqual([
      {
        manager: "dpo-node-labels/gpus",
        operation: "Apply",
        fieldsV1: { "f:metadata": { "f:labels": { "f:nvidia.com/gpu.count": {} } } },
      },
    ]);
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

function fullPod(name: string, phase: string, ready: boolean, waiting?: string): V1Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: "dpo-system",
      uid: `uid-${name}`,
      resourceVersion: "9",
      creationTimestamp: "2026-01-01T00:00:00Z" as never,
      labels: { "app.kubernetes.io/name": "dpo-plugin", "dpo.dev/config": "foo" },
      annotations: { "dpo.dev/config-hash": "h1" },
      ownerReferences: [
        { apiVersion: "apps/v1", kind: "DaemonSet", name: "dpo-foo", uid: "ds-uid", controller: true },
      ],
      managedFields: [{ manager: "kube-controller-manager", operation: "Update" }],
    },
    spec: {
      nodeName: "n1",
      serviceAccountName: "dpo-plugin",
      containers: [
        {
          name: "plugin",
          image: "registry.example/dpo:1",
          args: ["plugin", "--config=/etc/dpo/config.yaml"],
          env: [{ name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } }],
          volumeMounts: [{ name: "device-plugins", mountPath: "/var/lib/kubelet/device-plugins" }],
        },
      ],
      volumes: [{ name: "device-plugins", hostPath: { path: "/var/lib/kubelet/device-plugins" } }],
      tolerations: [{ operator: "Exists" }],
    },
    status: {
      phase,
      podIP: "10.0.0.5",
      hostIP: "10.0.0.1",
      startTime: "2026-01-01T00:00:01Z" as never,
      conditions: [
        {
          type: "Ready",
          status: ready ? "True" : "False",
          lastTransitionTime: "2026-01-01T00:00:02Z" as never,
        },
      ],
      containerStatuses: [
        {
          name: "plugin",
          image: "registry.example/dpo:1",
          imageID: "sha256:abc",
          ready,
          restartCount: 3,
          state:
            waiting === undefined ? { running: {} } : { waiting: { reason: waiting, message: "back-off" } },
        },
      ],
    },
  };
}

describe("slimPodForCache", () => {
  it("drops the container specs, volumes and the rest the operator never reads", () => {
    expect(slimPodForCache(fullPod("p1", "Pending", false, "CrashLoopBackOff"))).toEqual({
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: "p1",
        namespace: "dpo-system",
        uid: "uid-p1",
        resourceVersion: "9",
        creationTimestamp: "2026-01-01T00:00:00Z",
        labels: { "app.kubernetes.io/name": "dpo-plugin", "dpo.dev/config": "foo" },
        annotations: { "dpo.dev/config-hash": "h1" },
        ownerReferences: [
          { apiVersion: "apps/v1", kind: "DaemonSet", name: "dpo-foo", uid: "ds-uid", controller: true },
        ],
      },
      spec: { nodeName: "n1" },
      status: {
        phase: "Pending",
        conditions: [{ type: "Ready", status: "False" }],
        containerStatuses: [{ name: "plugin", state: { waiting: { reason: "CrashLoopBackOff" } } }],
      },
    });
  });

  it("tolerates a pod without spec or status", () => {
    expect(slimPodForCache({ metadata: { name: "bare", resourceVersion: "1" } })).toEqual({
      metadata: { name: "bare", resourceVersion: "1" },
    });
  });

  it("gives the status code the same answers as the whole pod", () => {
    const node = slimNodeForCache(fullNode("n1", "1"));
    for (const pod of [
      fullPod("running", "Running", true),
      fullPod("starting", "Running", false),
      fullPod("crashing", "Pending", false, "CrashLoopBackOff"),
      fullPod("done", "Succeeded", false),
    ]) {
      const slim = slimPodForCache(pod);
      expect(podIsReady(slim)).toBe(podIsReady(pod));
      expect(choosePluginPod([slim], "h1")?.metadata?.name).toBe(
        choosePluginPod([pod], "h1")?.metadata?.name,
      );
      expect(evaluateNode({ node, pods: [slim], reports: [] }, RESOURCE, "h1")).toEqual(
        evaluateNode({ node, pods: [pod], reports: [] }, RESOURCE, "h1"),
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

describe("an informer's list", () => {
  it("is not kept once its objects are in the cache, while the watch runs", async () => {
    // The whole list (at 5000 nodes, every Node with managedFields, images and messages) stayed
    // reachable from the suspended list/watch loop as long as its watch ran: the slim cache saved nothing.
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    let listed: WeakRef<object> | undefined;
    const clock = new ManualClock();
    const informer = new Informer<V1Node>({
      path: "/api/v1/nodes",
      list: (): Promise<ListResult<V1Node>> => {
        const list = { items: [fullNode("listed", "5")], metadata: { resourceVersion: "5" } };
        listed = new WeakRef(list);
        return Promise.resolve(list);
      },
      // A watch that runs until stopped.
      watch: () => Promise.resolve({ abort: () => undefined }),
      clock,
      transform: slimNodeForCache,
    });
    informer.start();
    try {
      await informer.waitForSync();
      await clock.advance(0);
      for (let i = 0; i < 3; i++) {
        await new Promise((r) => setImmediate(r));
        gc();
      }
      expect(informer.get("listed")?.metadata?.managedFields).toBeUndefined();
      expect(listed?.deref()).toBeUndefined();
    } finally {
      await informer.stop();
    }
  });
});
