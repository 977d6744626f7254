// config/policy's dpo-plugin-own-node-slices on a real API server: a plugin's pod-bound token creates,
// updates and deletes its own node's ResourceSlices and no other node's, a token that names no node writes
// none, and the operator and administrators are untouched. ResourceSlices are cluster-scoped, so the
// policy matches the plugin account by username; this proves that match works on a real request.
import { CoreV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KubeApiError } from "../../src/kube/errors.js";
import { kubeRequest } from "../../src/kube/request.js";
import { issuedToken } from "../../tools/cluster/kubeconfig.js";
import { createBoundPlugin, pluginToken, refusal } from "../cluster/plugin-identity.js";
import {
  injectedCluster,
  kubeConfigFromInjected,
  kubeConfigWithToken,
  uniqueName,
  waitFor,
} from "../cluster/helpers.js";
import { installDpo, NAMESPACE, OPERATOR_SA } from "../e2e/support.js";

const POLICY = "dpo-plugin-own-node-slices";
const SLICES = "/apis/resource.k8s.io/v1/resourceslices";
const DRIVER = "vap-slices.example.com";

const admin = kubeConfigFromInjected();
const core = admin.makeApiClient(CoreV1Api);
const [nodeA, nodeB] = twoNodes();
const podA = uniqueName("vaps-plugin-a");
const sliceA = uniqueName("vaps-slice-a");
const sliceB = uniqueName("vaps-slice-b");
const created = new Set<string>();

let tokenA = "";
let unboundToken = "";

function twoNodes(): [string, string] {
  const [a, b] = injectedCluster().nodeNames;
  if (a === undefined || b === undefined) throw new Error("the test cluster needs two nodes");
  return [a, b];
}

function slice(name: string, nodeName: string, pool = nodeName, devices = 1) {
  return {
    apiVersion: "resource.k8s.io/v1",
    kind: "ResourceSlice",
    metadata: { name, labels: { "app.kubernetes.io/managed-by": "dpo" } },
    spec: {
      driver: DRIVER,
      nodeName,
      pool: { name: pool, generation: 1, resourceSliceCount: 1 },
      devices: Array.from({ length: devices }, (_, i) => ({ name: `dev-${i}` })),
    },
  };
}

async function create(token: string, body: ReturnType<typeof slice>, dryRun = false): Promise<unknown> {
  const result = await kubeRequest(kubeConfigWithToken(token), {
    method: "POST",
    path: SLICES,
    body,
    ...(dryRun ? { query: { dryRun: "All" } } : {}),
  });
  if (!dryRun) created.add(body.metadata.name);
  return result;
}

async function replace(token: string, name: string, change: (s: ReturnType<typeof slice>) => void) {
  const current = await kubeRequest<ReturnType<typeof slice>>(admin, {
    method: "GET",
    path: `${SLICES}/${name}`,
  });
  change(current);
  return kubeRequest<ReturnType<typeof slice>>(kubeConfigWithToken(token), {
    method: "PUT",
    path: `${SLICES}/${name}`,
    body: current,
  });
}

function remove(token: string, name: string): Promise<unknown> {
  return kubeRequest(kubeConfigWithToken(token), { method: "DELETE", path: `${SLICES}/${name}` });
}

beforeAll(async () => {
  await installDpo();
  const pod = await createBoundPlugin(core, NAMESPACE, podA, nodeA);
  tokenA = await pluginToken(core, NAMESPACE, pod);
  unboundToken = await pluginToken(core, NAMESPACE);
  // Node B's slice exists before, as if node B's own plugin had published it.
  await kubeRequest(admin, { method: "POST", path: SLICES, body: slice(sliceB, nodeB) });
  created.add(sliceB);
  await waitFor("the plugin slice policy in force", async (observe) => {
    const outcome = await create(tokenA, slice(uniqueName("vaps-probe"), nodeB), true).then(
      () => "accepted",
      (error: unknown) => error,
    );
    observe(outcome instanceof Error ? outcome.message : outcome);
    return outcome instanceof KubeApiError && outcome.message.includes(POLICY);
  });
});

afterAll(async () => {
  for (const name of created) {
    await kubeRequest(admin, { method: "DELETE", path: `${SLICES}/${name}` }).catch(() => undefined);
  }
  await core
    .deleteNamespacedPod({ name: podA, namespace: NAMESPACE, gracePeriodSeconds: 0 })
    .catch(() => undefined);
});

describe(`ValidatingAdmissionPolicy ${POLICY}`, () => {
  it("type-checks without warnings, so no expression refers to a field that is not there", async () => {
    const path = `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/${POLICY}`;
    const policy = await waitFor("the policy type-checked", async (observe) => {
      const seen = await kubeRequest<{
        metadata: { generation: number };
        status?: { observedGeneration?: number; typeChecking?: { expressionWarnings?: unknown[] } };
      }>(admin, { method: "GET", path });
      observe(seen.status);
      return seen.status?.observedGeneration === seen.metadata.generation && seen;
    });
    expect(policy.status?.typeChecking?.expressionWarnings ?? []).toEqual([]);
  });

  it("lets the plugin on node A create, update and delete its own node's slice", async () => {
    await create(tokenA, slice(sliceA, nodeA));
    const updated = await replace(tokenA, sliceA, (s) => {
      s.spec.pool.generation = 2;
      s.spec.devices = [{ name: "dev-0" }, { name: "dev-1" }];
    });
    expect(updated.spec.devices).toHaveLength(2);
    await remove(tokenA, sliceA);
    created.delete(sliceA);
  });

  it("refuses the plugin on node A a slice for node B, or for its own node in node B's pool", async () => {
    const other = await refusal(create(tokenA, slice(uniqueName("vaps-c"), nodeB)));
    expect(other.code).toBe(403);
    expect(other.message).toContain(
      `dpo-plugin on node ${nodeA} may write only ResourceSlices of its own node`,
    );
    const pool = await refusal(create(tokenA, slice(uniqueName("vaps-d"), nodeA, nodeB)));
    expect(pool.code).toBe(403);
    expect(pool.message).toContain(`pool '${nodeB}'`);
  });

  it("refuses the plugin on node A an update, a takeover or a delete of node B's slice", async () => {
    const update = await refusal(replace(tokenA, sliceB, (s) => (s.spec.pool.generation = 5)));
    expect(update.code).toBe(403);
    expect(update.message).toContain(
      `dpo-plugin on node ${nodeA} may write only ResourceSlices of its own node`,
    );
    // Renaming node B's slice to node A: the API server's own validation refuses it too (spec.nodeName is
    // immutable), so whichever answers first, the takeover fails.
    const takeover = await refusal(
      replace(tokenA, sliceB, (s) => {
        s.spec.nodeName = nodeA;
        s.spec.pool.name = nodeA;
      }),
    );
    expect([403, 422]).toContain(takeover.code);
    const deletion = await refusal(remove(tokenA, sliceB));
    expect(deletion.code).toBe(403);
    expect(deletion.message).toContain(`may not change or delete the ResourceSlice of node '${nodeB}'`);
  });

  it("refuses a plugin token bound to no pod, saying it names no node", async () => {
    const error = await refusal(create(unboundToken, slice(uniqueName("vaps-e"), nodeA)));
    expect(error.code).toBe(403);
    expect(error.message).toContain("this token names no node");
  });

  it("leaves the operator alone: it deletes any node's slice", async () => {
    const operatorToken = issuedToken(
      await core.createNamespacedServiceAccountToken({
        name: OPERATOR_SA,
        namespace: NAMESPACE,
        body: { spec: { audiences: [], expirationSeconds: 600 } },
      }),
      OPERATOR_SA,
    );
    await remove(operatorToken, sliceB);
    created.delete(sliceB);
    await waitFor(`slice ${sliceB} gone`, async () => {
      const gone = await refusal(kubeRequest(admin, { method: "GET", path: `${SLICES}/${sliceB}` }));
      return gone.code === 404;
    });
  });
});
