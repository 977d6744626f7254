// The object client's requests: which path each resource, scope and subresource gives, and what each
// verb sends; and one round trip to a local HTTP server, to see the requests leave as built.
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CONFIG_MAPS,
  DAEMON_SETS,
  DEVICE_CLASSES,
  DEVICE_NODE_STATES,
  DEVICE_PLUGIN_CONFIGS,
  KubeObjectClient,
  NODES,
  RESOURCE_SLICES,
  createRequest,
  deleteRequest,
  getRequest,
  groupVersionPath,
  isConflict,
  keyOf,
  objectPath,
  patchRequest,
  servesGroupVersion,
  updateRequest,
  type ResourceRef,
} from "../../../src/kube/index.js";
import { kubeConfigServedBy } from "./local-api-server.js";

describe("objectPath", () => {
  it.each<[string, ResourceRef, string, string | undefined, string | undefined, string]>([
    ["core, cluster-scoped", NODES, "n1", undefined, undefined, "/api/v1/nodes/n1"],
    ["core, cluster-scoped, status", NODES, "n1", undefined, "status", "/api/v1/nodes/n1/status"],
    ["core, namespaced", CONFIG_MAPS, "cm", "ns", undefined, "/api/v1/namespaces/ns/configmaps/cm"],
    ["group, namespaced", DAEMON_SETS, "ds", "ns", undefined, "/apis/apps/v1/namespaces/ns/daemonsets/ds"],
    [
      "group, namespaced, status",
      DAEMON_SETS,
      "ds",
      "ns",
      "status",
      "/apis/apps/v1/namespaces/ns/daemonsets/ds/status",
    ],
    [
      "custom, cluster-scoped",
      DEVICE_PLUGIN_CONFIGS,
      "gpu",
      undefined,
      undefined,
      "/apis/dpo.dev/v1beta1/devicepluginconfigs/gpu",
    ],
    [
      "custom, cluster-scoped, status",
      DEVICE_PLUGIN_CONFIGS,
      "gpu",
      undefined,
      "status",
      "/apis/dpo.dev/v1beta1/devicepluginconfigs/gpu/status",
    ],
    [
      "custom, namespaced, status",
      DEVICE_NODE_STATES,
      "gpu-n1",
      "dpo-system",
      "status",
      "/apis/dpo.dev/v1beta1/namespaces/dpo-system/devicenodestates/gpu-n1/status",
    ],
    [
      "resource.k8s.io, cluster-scoped",
      DEVICE_CLASSES,
      "gpu.example.com",
      undefined,
      undefined,
      "/apis/resource.k8s.io/v1/deviceclasses/gpu.example.com",
    ],
    [
      "name escaped",
      RESOURCE_SLICES,
      "a/b c",
      undefined,
      undefined,
      "/apis/resource.k8s.io/v1/resourceslices/a%2Fb%20c",
    ],
  ])("%s", (_name, ref, name, namespace, subresource, path) => {
    expect(objectPath(ref, name, namespace, subresource)).toBe(path);
  });

  it.each<[string, ResourceRef, string, string | undefined, RegExp]>([
    ["a namespaced object without a namespace", DAEMON_SETS, "ds", undefined, /namespaced: ds needs/],
    ["a cluster-scoped object with a namespace", NODES, "n1", "ns", /cluster-scoped/],
    ["no name (it would address the whole collection)", RESOURCE_SLICES, "", undefined, /needs a name/],
  ])("refuses %s", (_name, ref, name, namespace, error) => {
    expect(() => objectPath(ref, name, namespace)).toThrow(error);
  });

  it.each<[ResourceRef, string]>([
    [NODES, "/api/v1"],
    [DAEMON_SETS, "/apis/apps/v1"],
    [DEVICE_CLASSES, "/apis/resource.k8s.io/v1"],
  ])("groupVersionPath of %o", (ref, path) => {
    expect(groupVersionPath(ref)).toBe(path);
  });
});

describe("object requests", () => {
  const ds = { apiVersion: "apps/v1", kind: "DaemonSet", metadata: { name: "dpo-gpu", namespace: "ns" } };
  const cls = { apiVersion: "resource.k8s.io/v1", kind: "DeviceClass", metadata: { name: "gpu.example" } };

  it.each([
    {
      name: "create, namespaced: the namespace's collection",
      request: createRequest(DAEMON_SETS, ds, "dpo"),
      want: {
        method: "POST",
        path: "/apis/apps/v1/namespaces/ns/daemonsets",
        query: { fieldManager: "dpo" },
        body: ds,
      },
    },
    {
      name: "create, cluster-scoped",
      request: createRequest(DEVICE_CLASSES, cls, "dpo"),
      want: {
        method: "POST",
        path: "/apis/resource.k8s.io/v1/deviceclasses",
        query: { fieldManager: "dpo" },
        body: cls,
      },
    },
    {
      name: "create, a server-side dry run: dryRun=All, the body as given",
      request: createRequest(DEVICE_CLASSES, cls, "dpo", { dryRun: true }),
      want: {
        method: "POST",
        path: "/apis/resource.k8s.io/v1/deviceclasses",
        query: { fieldManager: "dpo", dryRun: "All" },
        body: cls,
      },
    },
    {
      name: "create, dryRun false: a real create",
      request: createRequest(DEVICE_CLASSES, cls, "dpo", { dryRun: false }),
      want: {
        method: "POST",
        path: "/apis/resource.k8s.io/v1/deviceclasses",
        query: { fieldManager: "dpo" },
        body: cls,
      },
    },
    {
      name: "get",
      request: getRequest(CONFIG_MAPS, { name: "cm", namespace: "ns" }),
      want: { method: "GET", path: "/api/v1/namespaces/ns/configmaps/cm" },
    },
    {
      name: "update",
      request: updateRequest(DAEMON_SETS, ds, "dpo"),
      want: {
        method: "PUT",
        path: "/apis/apps/v1/namespaces/ns/daemonsets/dpo-gpu",
        query: { fieldManager: "dpo" },
        body: ds,
      },
    },
    {
      name: "update of the status subresource",
      request: updateRequest(DEVICE_PLUGIN_CONFIGS, { metadata: { name: "gpu" } }, "dpo", {
        subresource: "status",
      }),
      want: {
        method: "PUT",
        path: "/apis/dpo.dev/v1beta1/devicepluginconfigs/gpu/status",
        query: { fieldManager: "dpo" },
        body: { metadata: { name: "gpu" } },
      },
    },
    {
      name: "merge patch of the status subresource",
      request: patchRequest(DEVICE_PLUGIN_CONFIGS, { name: "gpu" }, "merge", { status: {} }, "dpo", {
        subresource: "status",
      }),
      want: {
        method: "PATCH",
        path: "/apis/dpo.dev/v1beta1/devicepluginconfigs/gpu/status",
        query: { fieldManager: "dpo" },
        body: { status: {} },
        contentType: "application/merge-patch+json",
      },
    },
    {
      name: "json patch",
      request: patchRequest(NODES, { name: "n1" }, "json", [{ op: "remove", path: "/x" }], "dpo"),
      want: {
        method: "PATCH",
        path: "/api/v1/nodes/n1",
        query: { fieldManager: "dpo" },
        body: [{ op: "remove", path: "/x" }],
        contentType: "application/json-patch+json",
      },
    },
    {
      name: "delete without preconditions sends no body",
      request: deleteRequest(CONFIG_MAPS, { name: "cm", namespace: "ns" }),
      want: { method: "DELETE", path: "/api/v1/namespaces/ns/configmaps/cm", query: {} },
    },
    {
      name: "delete with a uid precondition and a propagation policy",
      request: deleteRequest(
        DEVICE_NODE_STATES,
        { name: "gpu-n1", namespace: "ns" },
        { uid: "u1", propagationPolicy: "Background" },
      ),
      want: {
        method: "DELETE",
        path: "/apis/dpo.dev/v1beta1/namespaces/ns/devicenodestates/gpu-n1",
        query: { propagationPolicy: "Background" },
        body: { apiVersion: "v1", kind: "DeleteOptions", preconditions: { uid: "u1" } },
      },
    },
    {
      name: "a namespace given for a cluster-scoped resource is not used",
      request: deleteRequest(DEVICE_CLASSES, { name: "gpu.example", namespace: "ns" }),
      want: { method: "DELETE", path: "/apis/resource.k8s.io/v1/deviceclasses/gpu.example", query: {} },
    },
  ])("$name", ({ request, want }) => {
    expect(JSON.parse(JSON.stringify(request))).toEqual(want);
  });

  it.each([
    ["no name", DAEMON_SETS, { metadata: { namespace: "ns" } }, /no metadata.name/],
    [
      "a namespaced object without its namespace",
      DAEMON_SETS,
      { metadata: { name: "ds" } },
      /no metadata.namespace/,
    ],
  ])("keyOf refuses %s", (_name, ref, object, error) => {
    expect(() => keyOf(ref, object)).toThrow(error);
  });
});

describe("KubeObjectClient against an HTTP server", () => {
  interface Seen {
    method: string;
    url: string;
    contentType: string | undefined;
    body: string;
  }
  const seen: Seen[] = [];
  let server: Server;
  let kc: KubeConfig;

  const read = async (req: IncomingMessage): Promise<string> => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString();
  };

  beforeAll(async () => {
    server = createServer((req, res) => {
      void read(req).then((body) => {
        seen.push({
          method: req.method ?? "",
          url: req.url ?? "",
          contentType: req.headers["content-type"],
          body,
        });
        if (req.url === "/apis/resource.k8s.io/v1") {
          res.writeHead(404, { "content-type": "application/json" });
          res.end(JSON.stringify({ kind: "Status", code: 404, reason: "NotFound", message: "not found" }));
        } else if (req.method === "PUT") {
          res.writeHead(409, { "content-type": "application/json" });
          res.end(JSON.stringify({ kind: "Status", code: 409, reason: "Conflict", message: "stale" }));
        } else {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(body === "" ? JSON.stringify({ kind: "Status", status: "Success" }) : body);
        }
      });
    });
    kc = await kubeConfigServedBy(server);
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it("sends each verb as built, with the client's field manager and default propagation", async () => {
    const client = new KubeObjectClient(kc, {
      fieldManager: "dpo-operator",
      propagationPolicy: "Background",
    });
    const ds = { apiVersion: "apps/v1", kind: "DaemonSet", metadata: { name: "d", namespace: "ns" } };
    expect(await client.create(DAEMON_SETS, ds)).toEqual(ds);
    await client.delete(DAEMON_SETS, { name: "d", namespace: "ns" }, { uid: "u1" });
    await client.patch(
      DEVICE_PLUGIN_CONFIGS,
      { name: "gpu" },
      "merge",
      { status: {} },
      { subresource: "status" },
    );
    await expect(client.update(DAEMON_SETS, ds)).rejects.toSatisfy(isConflict);
    expect(seen.map((s) => [s.method, s.url, s.contentType])).toEqual([
      ["POST", "/apis/apps/v1/namespaces/ns/daemonsets?fieldManager=dpo-operator", "application/json"],
      ["DELETE", "/apis/apps/v1/namespaces/ns/daemonsets/d?propagationPolicy=Background", "application/json"],
      [
        "PATCH",
        "/apis/dpo.dev/v1beta1/devicepluginconfigs/gpu/status?fieldManager=dpo-operator",
        "application/merge-patch+json",
      ],
      ["PUT", "/apis/apps/v1/namespaces/ns/daemonsets/d?fieldManager=dpo-operator", "application/json"],
    ]);
    expect(JSON.parse(seen[1]!.body)).toEqual({
      apiVersion: "v1",
      kind: "DeleteOptions",
      preconditions: { uid: "u1" },
    });
  });

  it("servesGroupVersion: 404 is not served, an answer is", async () => {
    expect(await servesGroupVersion(kc, DEVICE_CLASSES)).toBe(false);
    expect(await servesGroupVersion(kc, DAEMON_SETS)).toBe(true);
  });
});
