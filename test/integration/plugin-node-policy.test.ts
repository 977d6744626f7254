// config/policy on a real API server: a plugin's pod-bound token writes its own node's DeviceNodeState and
// no other, under the name its spec gives it only; a token that names no node writes none, and the operator
// and administrators are untouched. With the CRD's rules: the fields the name is made of never change.
import { AuthenticationV1Api, CoreV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_ATTRIBUTES_PER_DEVICE } from "../../src/api/v1beta1/devicenodestate.js";
import { deviceNodeStateName } from "../../src/contract/node-state.js";
import { KubeApiError } from "../../src/kube/errors.js";
import { ServerSideApplier } from "../../src/kube/apply.js";
import { kubeRequest } from "../../src/kube/request.js";
import { PLUGIN_FIELD_MANAGER } from "../../src/plugin-runtime/report/node-state.js";
import { issuedToken } from "../../tools/cluster/kubeconfig.js";
import { createBoundPlugin, PLUGIN_SA, pluginToken, refusal } from "../cluster/plugin-identity.js";
import {
  injectedCluster,
  kubeConfigFromInjected,
  kubeConfigWithToken,
  uniqueName,
  waitFor,
} from "../cluster/helpers.js";
import { installDpo, NAMESPACE, OPERATOR_SA } from "../e2e/support.js";

const NODE_CLAIM = "authentication.kubernetes.io/node-name";
const API_VERSION = "dpo.dev/v1beta1";
const REPORTS = `/apis/dpo.dev/v1beta1/namespaces/${NAMESPACE}/devicenodestates`;

const admin = kubeConfigFromInjected();
const core = admin.makeApiClient(CoreV1Api);
const [nodeA, nodeB] = twoNodes();
const configName = uniqueName("vap");
const podA = uniqueName("vap-plugin-a");
const podB = uniqueName("vap-plugin-b");
/** Every report this file may create, deleted at the end whichever tests ran. */
const reportA = deviceNodeStateName(configName, nodeA);
const reportB = uniqueName("vap-report-b");
/**
 * A config name of 51 characters: `<config>-<node>` cut to 52 ends on the '-', which the name leaves out,
 * so the policy's reading of the cut is tested too.
 */
const longConfig = `${configName}-${"x".repeat(50 - configName.length)}`;
const reportLong = deviceNodeStateName(longConfig, nodeA, "rev1");

/** Tokens of the plugin ServiceAccount: bound to the pod on node A, and bound to nothing. */
let tokenA = "";
let unboundToken = "";

function twoNodes(): [string, string] {
  const [a, b] = injectedCluster().nodeNames;
  if (a === undefined || b === undefined) throw new Error("the test cluster needs two nodes");
  return [a, b];
}

function report(
  name: string,
  nodeName: string,
  labels: Record<string, string> = {},
  spec: { configName?: string; revision?: string } = {},
) {
  return {
    apiVersion: API_VERSION,
    kind: "DeviceNodeState",
    metadata: { name, namespace: NAMESPACE, labels },
    spec: { configName, nodeName, resourceName: "vap.example/foo", ...spec },
  };
}

function withStatus(name: string, nodeName: string, healthy: number) {
  const now = new Date().toISOString();
  return {
    ...report(name, nodeName),
    status: {
      pluginVersion: "0.0.0-test",
      kubeletAPIVersion: "v1beta1",
      registration: { state: "Registered", since: now },
      advertised: 1,
      healthy,
      devices: [{ id: "foo-0", health: healthy > 0 ? "Healthy" : "Unhealthy", since: now, replicas: 1 }],
      updateTime: now,
    },
  };
}

/** Server-side apply as the plugin does it (its field manager, forced), with the given token. */
function pluginApplier(token: string): ServerSideApplier {
  return new ServerSideApplier(kubeConfigWithToken(token), { fieldManager: PLUGIN_FIELD_MANAGER });
}

beforeAll(async () => {
  await installDpo();
  const [a] = await Promise.all([
    createBoundPlugin(core, NAMESPACE, podA, nodeA),
    createBoundPlugin(core, NAMESPACE, podB, nodeB),
  ]);
  tokenA = await pluginToken(core, NAMESPACE, a);
  unboundToken = await pluginToken(core, NAMESPACE);
  // Node B's report exists before any plugin writes, as if node B's own plugin had written it.
  await new ServerSideApplier(admin, { fieldManager: "vap-test-admin" }).apply(report(reportB, nodeB));
  // Admission policies reach the API server's admission chain asynchronously after they are created:
  // wait until a dry-run write of node B's report with node A's token is refused by this policy.
  await waitFor("the plugin node policy in force", async (observe) => {
    const outcome = await pluginApplier(tokenA)
      .apply(report(reportB, nodeB), { dryRun: true })
      .then(
        () => "accepted",
        (error: unknown) => error,
      );
    observe(outcome instanceof Error ? outcome.message : outcome);
    return outcome instanceof KubeApiError && outcome.message.includes("dpo-plugin-own-node");
  });
});

afterAll(async () => {
  for (const name of [reportA, reportB, reportLong, deviceNodeStateName(configName, nodeB)]) {
    await kubeRequest(admin, { method: "DELETE", path: `${REPORTS}/${name}` }).catch(() => undefined);
  }
  for (const name of [podA, podB]) {
    await core
      .deleteNamespacedPod({ name, namespace: NAMESPACE, gracePeriodSeconds: 0 })
      .catch(() => undefined);
  }
});

describe("ValidatingAdmissionPolicy dpo-plugin-own-node", () => {
  it("type-checks without warnings, so no expression refers to a field that is not there", async () => {
    const path = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/dpo-plugin-own-node";
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

  it("sees the node of the pod in the token of a plugin bound to it", async () => {
    const review = await kubeConfigWithToken(tokenA)
      .makeApiClient(AuthenticationV1Api)
      .createSelfSubjectReview({ body: {} });
    expect(review.status?.userInfo?.username).toBe(`system:serviceaccount:${NAMESPACE}:${PLUGIN_SA}`);
    expect(review.status?.userInfo?.extra?.[NODE_CLAIM]).toEqual([nodeA]);
  });

  it("lets the plugin on node A create its report and patch it, spec and status", async () => {
    const plugin = pluginApplier(tokenA);
    const created = await plugin.apply(report(reportA, nodeA));
    expect(created.spec.nodeName).toBe(nodeA);
    await plugin.applyStatus(withStatus(reportA, nodeA, 1));
    await plugin.apply(report(reportA, nodeA, { x: "y" }));
    const patched = await plugin.applyStatus(withStatus(reportA, nodeA, 0));
    expect(patched.status.healthy).toBe(0);
    expect(patched.metadata.labels).toMatchObject({ x: "y" });
  });

  it("refuses the plugin on node A a report for node B, naming both nodes", async () => {
    const error = await refusal(pluginApplier(tokenA).apply(report(uniqueName("vap-report-c"), nodeB)));
    expect(error.code).toBe(403);
    expect(error.message).toContain(
      `dpo-plugin on node ${nodeA} may write only its own node's DeviceNodeState, not one for node ${nodeB}`,
    );
  });

  it("refuses the plugin on node A a patch of node B's report, spec, status or a takeover", async () => {
    const plugin = pluginApplier(tokenA);
    const spec = await refusal(plugin.apply(report(reportB, nodeB, { x: "y" })));
    const status = await refusal(plugin.applyStatus(withStatus(reportB, nodeB, 0)));
    for (const error of [spec, status]) {
      expect(error.code).toBe(403);
      expect(error.message).toContain(`not one for node ${nodeB}`);
    }
    // Rewriting node B's report to name node A passes the policy's check on the new object. The CRD
    // refuses it before admission policies run (spec.nodeName is immutable); the policy's check of the
    // old object stays behind it, for an API server that lacks the CRD's rule.
    const takeover = await refusal(plugin.apply(report(reportB, nodeA)));
    expect(takeover.code).toBe(422);
    expect(takeover.message).toContain("spec.nodeName");
    expect(takeover.message).toContain("is immutable");
  });

  it("refuses the plugin on node A node B's report name, even with node A in the spec", async () => {
    const squat = deviceNodeStateName(configName, nodeB);
    const error = await refusal(pluginApplier(tokenA).apply(report(squat, nodeA)));
    expect(error.code).toBe(403);
    expect(error.message).toContain(
      `dpo-plugin on node ${nodeA} may create a DeviceNodeState only under the name its config and node give it`,
    );
    expect(error.message).toContain(`not ${squat}`);
  });

  it.each([
    ["another config's name", () => deviceNodeStateName(`${configName}-other`, nodeA)],
    ["a name without the hash", () => `${configName}-${nodeA}`],
    ["a hand-made name", () => uniqueName("vap-report-e")],
  ])("refuses the plugin on node A %s for its own report", async (_what, name) => {
    const error = await refusal(pluginApplier(tokenA).apply(report(name(), nodeA)));
    expect(error.code).toBe(403);
    expect(error.message).toContain(
      "may create a DeviceNodeState only under the name its config and node give it",
    );
  });

  it("lets the plugin on node A create a long config's report with a revision, cut where the name is cut", async () => {
    expect(longConfig).toHaveLength(51);
    const created = await pluginApplier(tokenA).apply(
      report(reportLong, nodeA, {}, { configName: longConfig, revision: "rev1" }),
    );
    expect(created.metadata.name).toBe(reportLong);
  });

  it("refuses the plugin a change of its own report's config, node-bound or not (the CRD)", async () => {
    const error = await refusal(
      pluginApplier(tokenA).apply(report(reportA, nodeA, {}, { configName: `${configName}-moved` })),
    );
    expect(error.code).toBe(422);
    expect(error.message).toContain("spec.configName");
    expect(error.message).toContain("is immutable");
  });

  it("refuses a report whose devices carry more attributes than the schema bounds", async () => {
    const flooded = withStatus(reportA, nodeA, 1);
    flooded.status.devices[0] = {
      ...flooded.status.devices[0]!,
      attributes: Object.fromEntries(
        Array.from({ length: MAX_ATTRIBUTES_PER_DEVICE + 1 }, (_, i) => [`k${i}`, "v"]),
      ),
    } as (typeof flooded.status.devices)[0];
    const error = await refusal(pluginApplier(tokenA).applyStatus(flooded));
    expect(error.code).toBe(422);
    expect(error.message).toContain("status.devices[0].attributes");
  });

  it("refuses a plugin token bound to no pod, saying it names no node", async () => {
    const error = await refusal(pluginApplier(unboundToken).apply(report(uniqueName("vap-report-d"), nodeA)));
    expect(error.code).toBe(403);
    expect(error.message).toContain("this token names no node");
  });

  it("leaves the operator and administrators alone: they read, write and delete any node's report", async () => {
    const operatorToken = issuedToken(
      await core.createNamespacedServiceAccountToken({
        name: OPERATOR_SA,
        namespace: NAMESPACE,
        body: { spec: { audiences: [], expirationSeconds: 600 } },
      }),
      OPERATOR_SA,
    );
    const operator = kubeConfigWithToken(operatorToken);
    const seen = await kubeRequest<{ items: { metadata: { name: string } }[] }>(operator, {
      method: "GET",
      path: REPORTS,
    });
    expect(seen.items.map((item) => item.metadata.name)).toEqual(expect.arrayContaining([reportA, reportB]));

    // An administrator writes node B's status with no node claim at all.
    const written = await new ServerSideApplier(admin, { fieldManager: "vap-test-admin" }).applyStatus(
      withStatus(reportB, nodeB, 1),
    );
    expect(written.status.healthy).toBe(1);

    await kubeRequest(operator, { method: "DELETE", path: `${REPORTS}/${reportB}` });
    await waitFor(`report ${reportB} gone`, async () => {
      const gone = await refusal(kubeRequest(admin, { method: "GET", path: `${REPORTS}/${reportB}` }));
      return gone.code === 404;
    });
  });
});
