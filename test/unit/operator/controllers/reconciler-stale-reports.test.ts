// The config reconciler deleting the DeviceNodeStates no node of the config needs any more: of deleted or
// unselected nodes and under an earlier name, in bounded batches, never before the node cache has synced.
import { describe, expect, it } from "vitest";
import type { DeviceNodeState } from "../../../../src/api/v1beta1/devicenodestate.js";
import { deviceNodeStateName } from "../../../../src/contract/node-state.js";
import { NotFoundError, TransientError } from "../../../../src/kube/index.js";
import { config, NS, setup } from "./reconciler-support.js";

describe("ConfigReconciler", () => {
  describe("stale DeviceNodeStates", () => {
    const selector = { "feature.example/foo": "true" };
    const reportPath = (node: string, name = deviceNodeStateName("foo", node)) =>
      `/apis/dpo.dev/v1beta1/namespaces/${NS}/devicenodestates/${name}`;

    function report(node: string, name = deviceNodeStateName("foo", node)): DeviceNodeState {
      return {
        apiVersion: "dpo.dev/v1beta1",
        kind: "DeviceNodeState",
        metadata: { name, namespace: NS, uid: `uid-${name}` },
        spec: { configName: "foo", nodeName: node, resourceName: "vendor.example/foo" },
      };
    }

    function withReports(nodes: Array<[string, Record<string, string>]>, reportNodes: string[]) {
      const t = setup();
      t.configs.put(config("foo", "2026-01-01T00:00:00Z", { nodeSelector: selector }));
      for (const [name, labels] of nodes) t.nodes.put({ metadata: { name, labels } });
      for (const node of reportNodes) t.reports.put(report(node));
      return t;
    }

    it("deletes the reports of a deleted node and of a node no longer selected, and keeps the rest", async () => {
      const t = withReports(
        [
          ["kept", selector],
          ["unlabelled", {}],
        ],
        ["kept", "unlabelled", "gone"],
      );
      await t.reconciler.reconcile("foo");
      expect(t.deleted.filter((p) => p.includes("devicenodestates")).sort()).toEqual([
        reportPath("gone"),
        reportPath("unlabelled"),
      ]);
    });

    it("deletes a report under the name of an earlier plugin version once the current one exists", async () => {
      const t = withReports([["n1", selector]], ["n1"]);
      t.reports.put(report("n1", "foo-n1"));
      await t.reconciler.reconcile("foo");
      expect(t.deleted).toEqual([reportPath("n1", "foo-n1")]);
      const line = t.logs
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l["report"] === "foo-n1");
      expect(line).toMatchObject({
        reason: "Superseded",
        replacedBy: deviceNodeStateName("foo", "n1"),
        msg: "deleted DeviceNodeState superseded by the report under its current name",
      });
    });

    it("keeps a report under an earlier name while its node has no current one", async () => {
      const t = withReports([["n1", selector]], []);
      t.reports.put(report("n1", "foo-n1"));
      await t.reconciler.reconcile("foo");
      expect(t.deleted).toEqual([]);
    });

    it("deletes nothing before the node cache has synced", async () => {
      const t = withReports([], ["n1", "n2"]);
      t.nodes.synced = false;
      await t.reconciler.reconcile("foo");
      expect(t.deleted).toEqual([]);
    });

    it("takes a 404 on delete as done and goes on with the others", async () => {
      const t = withReports([], ["a", "b"]);
      t.failDeleteWith((path) =>
        path === reportPath("a")
          ? new NotFoundError("not found", { code: 404, reason: "NotFound" })
          : undefined,
      );
      const result = await t.reconciler.reconcile("foo");
      expect(t.deleted).toEqual([reportPath("b")]);
      expect(result.requeueAfterMs).toBeUndefined();
    });

    it("retries later when a delete fails for another reason, and still writes the status", async () => {
      const t = withReports([], ["a"]);
      t.failDeleteWith(() => new TransientError("unavailable", { code: 503 }));
      const result = await t.reconciler.reconcile("foo");
      expect(result.requeueAfterMs).toBeGreaterThan(0);
      expect(t.applied.some((a) => a.kind === "status")).toBe(true);
    });

    it("deletes a bounded batch per reconcile and comes back for the rest", async () => {
      const gone = Array.from({ length: 60 }, (_, i) => `gone-${String(i).padStart(2, "0")}`);
      const t = withReports([], gone);
      const first = await t.reconciler.reconcile("foo");
      const deletedReports = t.deleted.filter((p) => p.includes("devicenodestates"));
      expect(deletedReports.length).toBeLessThan(60);
      expect(deletedReports.length).toBeGreaterThan(0);
      expect(first.requeueAfterMs).toBeGreaterThan(0);
    });
  });
});
