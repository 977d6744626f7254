// listAll against a local HTTP server: every page read, and a list from the watch cache (resourceVersion
// "0") asked for on the first page only, since the API server refuses a resourceVersion beside a continue token.
import { createServer, type Server } from "node:http";
import type { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listAll } from "../../../src/kube/request.js";
import { kubeConfigServedBy } from "./local-api-server.js";

describe("listAll", () => {
  let server: Server;
  let kc: KubeConfig;
  const queries: URLSearchParams[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      const query = new URL(req.url ?? "/", "http://x").searchParams;
      queries.push(query);
      // As the API server answers: a resourceVersion beside a continue token is refused.
      if (query.has("continue") && query.has("resourceVersion")) {
        res.statusCode = 400;
        res.end(JSON.stringify({ kind: "Status", status: "Failure", reason: "BadRequest", code: 400 }));
        return;
      }
      const second = query.get("continue") === "page-2";
      res.setHeader("Content-Type", "application/json");
      res.end(
        JSON.stringify({
          apiVersion: "v1",
          kind: "PodList",
          metadata: { resourceVersion: second ? "12" : "11", ...(second ? {} : { continue: "page-2" }) },
          items: [{ metadata: { name: second ? "b" : "a" } }],
        }),
      );
    });
    kc = await kubeConfigServedBy(server);
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it.each([
    [{ labelSelector: "app=x" }, [null, null]],
    [{ labelSelector: "app=x", resourceVersion: "0" as const }, ["0", null]],
  ])("reads every page of %j, the resourceVersion on the first page only", async (query, versions) => {
    queries.length = 0;
    const list = await listAll(kc, "/api/v1/namespaces/ns/pods", query, undefined, 1);
    expect(list.items.map((p) => `${p.kind}/${p.metadata?.name}`)).toEqual(["Pod/a", "Pod/b"]);
    expect(list.metadata?.resourceVersion).toBe("12");
    expect(queries.map((q) => q.get("resourceVersion"))).toEqual(versions);
    expect(queries.map((q) => q.get("labelSelector"))).toEqual(["app=x", "app=x"]);
    expect(queries.map((q) => q.get("limit"))).toEqual(["1", "1"]);
  });
});
