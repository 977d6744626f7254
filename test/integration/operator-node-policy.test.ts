// config/rbac and config/policy on a real API server: the operator's ServiceAccount may patch a Node's
// revision labels, upgrade annotation and Replace taint (ADR 0004) and its device labels (ADR 0011), and
// nothing else on it: no other label (no other nvidia.com/ one), annotation or taint, no cordon.
// Administrators are not limited by the policy.
import { CoreV1Api, type KubeConfig, type V1Node } from "@kubernetes/client-node";
import { ServerSideApplier } from "../../src/kube/apply.js";
import { KubeApiError } from "../../src/kube/errors.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KubeObjectClient } from "../../src/kube/objects.js";
import { NODES } from "../../src/kube/resources.js";
import { nodeKeys } from "../../src/operator/model/targeting.js";
import { deviceLabelKey } from "../../src/operator/node-labels/keys.js";
import { issuedToken } from "../../tools/cluster/kubeconfig.js";
import { refusal } from "../cluster/plugin-identity.js";
import {
  injectedCluster,
  kubeConfigFromInjected,
  kubeConfigWithToken,
  uniqueName,
  waitFor,
} from "../cluster/helpers.js";
import { installDpo, NAMESPACE, OPERATOR_SA } from "../e2e/support.js";

const admin = kubeConfigFromInjected();
const core = admin.makeApiClient(CoreV1Api);
const node = firstNode();
const config = uniqueName("node-policy");
const keys = nodeKeys(config);
let asOperator: KubeObjectClient;
let operatorKc: KubeConfig;

function firstNode(): string {
  const [a] = injectedCluster().nodeNames;
  if (a === undefined) throw new Error("the test cluster needs a node");
  return a;
}

function patch(client: KubeObjectClient, body: unknown): Promise<V1Node> {
  return client.patch<V1Node>(NODES, { name: node }, "merge", body);
}

beforeAll(async () => {
  await installDpo();
  const answer = await core.createNamespacedServiceAccountToken({
    name: OPERATOR_SA,
    namespace: NAMESPACE,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  operatorKc = kubeConfigWithToken(issuedToken(answer, OPERATOR_SA));
  asOperator = new KubeObjectClient(operatorKc, {
    fieldManager: "dpo-operator",
  });
  // The API server enforces a new policy a moment after it is created: until it refuses a write, the
  // cases below would see writes through (each probe a new value, so none is an unchanged no-op).
  let probe = 0;
  await waitFor("the dpo-operator-node-labels policy in force", async () => {
    try {
      await patch(asOperator, { metadata: { labels: { "example.com/pool": `probe-${++probe}` } } });
      return false;
    } catch (err) {
      return err instanceof KubeApiError && err.code === 403;
    }
  });
});

afterAll(async () => {
  const adminClient = new KubeObjectClient(admin, { fieldManager: "test" });
  await patch(adminClient, {
    metadata: {
      labels: {
        [keys.revision]: null,
        [keys.surge]: null,
        "example.com/pool": null,
        "nvidia.com/gpu.product": null,
        [deviceLabelKey("count", config)]: null,
      },
      annotations: { [keys.upgrade]: null },
    },
  }).catch(() => undefined);
});

describe("the operator's Node writes", () => {
  it("may set and remove its revision and surge labels and its upgrade annotation", async () => {
    const record = JSON.stringify({ from: "a", to: "b", startedAt: 1 });
    const written = await patch(asOperator, {
      metadata: {
        labels: { [keys.revision]: "none", [keys.surge]: "b" },
        annotations: { [keys.upgrade]: record },
      },
    });
    expect(written.metadata?.labels?.[keys.revision]).toBe("none");
    expect(written.metadata?.annotations?.[keys.upgrade]).toBe(record);
    const cleared = await patch(asOperator, { metadata: { labels: { [keys.surge]: null } } });
    expect(cleared.metadata?.labels?.[keys.surge]).toBeUndefined();
  });

  it("may set and remove GPU Feature Discovery's keys and its device labels, by server-side apply", async () => {
    const count = deviceLabelKey("count", config);
    const applier = new ServerSideApplier(operatorKc, { fieldManager: "dpo-operator" });
    const apply = (labels: Record<string, string>) =>
      applier.apply(
        { apiVersion: "v1", kind: "Node", metadata: { name: node, labels } },
        { fieldManager: `dpo-node-labels/${config}`, force: false },
      );
    const written = await apply({ "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", [count]: "8" });
    expect(written.metadata?.labels?.[count]).toBe("8");
    const cleared = await apply({});
    expect(cleared.metadata?.labels?.["nvidia.com/gpu.product"]).toBeUndefined();
    expect(cleared.metadata?.labels?.[count]).toBeUndefined();
  });

  it.each([
    {
      what: "an nvidia.com/ label GFD does not write (NVIDIA's MIG manager acts on it)",
      body: { metadata: { labels: { "nvidia.com/mig.config": "all-1g.10gb" } } },
      says: "labels",
    },
    { what: "another label", body: { metadata: { labels: { "example.com/pool": "a" } } }, says: "labels" },
    {
      what: "a node-role label",
      body: { metadata: { labels: { "node-role.kubernetes.io/control-plane": "" } } },
      says: "labels",
    },
    {
      what: "another annotation",
      body: { metadata: { annotations: { "example.com/note": "x" } } },
      says: "annotations",
    },
    {
      what: "another taint",
      body: { spec: { taints: [{ key: "example.com/drain", effect: "NoSchedule" }] } },
      says: "taints",
    },
    {
      what: "its own taint with NoExecute (which would evict pods)",
      body: { spec: { taints: [{ key: keys.replace, effect: "NoExecute" }] } },
      says: "NoSchedule",
    },
    { what: "a cordon", body: { spec: { unschedulable: true } }, says: "spec" },
    { what: "a finalizer", body: { metadata: { finalizers: ["example.com/hold"] } }, says: "finalizers" },
  ])("is refused for $what, with a message naming what it may change", async ({ body, says }) => {
    const error = await refusal(patch(asOperator, body));
    expect(error.code).toBe(403);
    expect(error.message).toContain("dpo-operator-node-labels");
    expect(error.message).toContain(says);
  });

  it("may put its own NoSchedule Replace taint on and take it off, keeping the others", async () => {
    const others = (await core.readNode({ name: node })).spec?.taints ?? [];
    const on = await patch(asOperator, {
      spec: { taints: [...others, { key: keys.replace, value: "b", effect: "NoSchedule" }] },
    });
    expect(on.spec?.taints?.map((t) => t.key)).toContain(keys.replace);
    const off = await patch(asOperator, { spec: { taints: others.length > 0 ? others : null } });
    expect(off.spec?.taints ?? []).toEqual(others);
  });

  it("is refused for a label of another kind even beside its own", async () => {
    const error = await refusal(
      patch(asOperator, { metadata: { labels: { [keys.revision]: "x", "example.com/pool": "b" } } }),
    );
    expect(error.code).toBe(403);
    const now = await core.readNode({ name: node });
    expect(now.metadata?.labels?.[keys.revision]).not.toBe("x");
  });

  it("does not limit an administrator", async () => {
    const adminClient = new KubeObjectClient(admin, { fieldManager: "test" });
    const written = await patch(adminClient, { metadata: { labels: { "example.com/pool": "a" } } });
    expect(written.metadata?.labels?.["example.com/pool"]).toBe("a");
  });
});
