// The local control plane does what the operator and its tests rely on from a real cluster.
import {
  ApiextensionsV1Api,
  AppsV1Api,
  AuthenticationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  VersionApi,
  Watch,
  type V1Node,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  apiStatusCode,
  injectedCluster,
  kubeConfigFromInjected,
  kubeConfigWithToken,
  kubectl,
  SIMULATED_NODE_LABEL,
  TEST_FEATURE_LABEL,
  uniqueName,
  waitFor,
} from "../cluster/helpers.js";
import { issuedToken } from "../../tools/cluster/kubeconfig.js";

const cluster = injectedCluster();
const kubeconfig = kubeConfigFromInjected();
const core = kubeconfig.makeApiClient(CoreV1Api);
const apps = kubeconfig.makeApiClient(AppsV1Api);
const apiExtensions = kubeconfig.makeApiClient(ApiextensionsV1Api);
const customObjects = kubeconfig.makeApiClient(CustomObjectsApi);
const rbac = kubeconfig.makeApiClient(RbacAuthorizationV1Api);
const namespace = uniqueName("it-cluster");

async function isGone(read: () => Promise<unknown>): Promise<boolean> {
  try {
    await read();
    return false;
  } catch (error) {
    if (apiStatusCode(error) === 404) return true;
    throw error;
  }
}

describe("local control plane", () => {
  beforeAll(async () => {
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    await waitFor(`ServiceAccount ${namespace}/default`, () =>
      core.readNamespacedServiceAccount({ name: "default", namespace }),
    );
  });

  afterAll(async () => {
    await core.deleteNamespace({ name: namespace });
  });

  it("runs the pinned Kubernetes version, and every simulated node is Ready and reports it", async () => {
    const version = await kubeconfig.makeApiClient(VersionApi).getCode();
    expect(version.gitVersion).toBe(cluster.kubernetesVersion);

    expect(cluster.nodeNames.length).toBeGreaterThanOrEqual(3);
    for (const name of cluster.nodeNames) {
      const node = await core.readNode({ name });
      expect(node.status?.nodeInfo?.kubeletVersion, name).toBe(cluster.kubernetesVersion);
      expect(node.status?.conditions?.find((c) => c.type === "Ready")?.status, name).toBe("True");
      expect(node.metadata?.labels).toMatchObject({
        [SIMULATED_NODE_LABEL]: "true",
        [TEST_FEATURE_LABEL]: "true",
      });
      expect(node.status?.allocatable).toMatchObject({ cpu: "32", memory: "256Gi", pods: "110" });
    }
  });

  it("serves a CustomResourceDefinition once it is Established, with its schema enforced", async () => {
    const group = `${uniqueName("it")}.dpo.example`;
    const plural = "widgets";
    const crdName = `${plural}.${group}`;
    await apiExtensions.createCustomResourceDefinition({
      body: {
        metadata: { name: crdName },
        spec: {
          group,
          scope: "Namespaced",
          names: { plural, singular: "widget", kind: "Widget", listKind: "WidgetList" },
          versions: [
            {
              name: "v1",
              served: true,
              storage: true,
              schema: {
                openAPIV3Schema: {
                  type: "object",
                  properties: {
                    spec: {
                      type: "object",
                      required: ["size"],
                      properties: { size: { type: "integer", minimum: 1 } },
                    },
                  },
                },
              },
            },
          ],
        },
      },
    });
    try {
      await waitFor(`CRD ${crdName} Established`, async (observe) => {
        const crd = await apiExtensions.readCustomResourceDefinition({ name: crdName });
        observe(crd.status?.conditions);
        return crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True");
      });

      const target = { group, version: "v1", namespace, plural };
      const body = {
        apiVersion: `${group}/v1`,
        kind: "Widget",
        metadata: { name: "first" },
        spec: { size: 3 },
      };
      await customObjects.createNamespacedCustomObject({ ...target, body });
      const stored = (await customObjects.getNamespacedCustomObject({
        ...target,
        name: "first",
      })) as typeof body;
      expect(stored.spec).toEqual({ size: 3 });

      const invalid = { ...body, metadata: { name: "second" }, spec: { size: 0 } };
      const rejection = await customObjects.createNamespacedCustomObject({ ...target, body: invalid }).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(apiStatusCode(rejection)).toBe(422);
    } finally {
      await apiExtensions.deleteCustomResourceDefinition({ name: crdName });
    }
  });

  it("runs a DaemonSet's pod on every simulated node", async () => {
    const name = uniqueName("it-ds");
    await apps.createNamespacedDaemonSet({
      namespace,
      body: {
        metadata: { name, namespace },
        spec: {
          selector: { matchLabels: { app: name } },
          template: {
            metadata: { labels: { app: name } },
            spec: {
              nodeSelector: { [SIMULATED_NODE_LABEL]: "true" },
              containers: [{ name: "main", image: "registry.k8s.io/pause:3.10.1" }],
            },
          },
        },
      },
    });

    const podsByNode = await waitFor(
      `pods of DaemonSet ${name} Running on ${cluster.nodeNames.join(", ")}`,
      async (observe) => {
        const pods = await core.listNamespacedPod({ namespace, labelSelector: `app=${name}` });
        observe(pods.items.map((p) => `${p.metadata?.name}@${p.spec?.nodeName ?? "-"}:${p.status?.phase}`));
        const running = pods.items.filter((p) => p.status?.phase === "Running");
        const nodes = running.map((p) => p.spec?.nodeName ?? "").sort();
        return (
          nodes.length === cluster.nodeNames.length && nodes.join() === cluster.nodeNames.join() && nodes
        );
      },
      { timeoutMs: 60_000 },
    );
    expect(podsByNode).toEqual(cluster.nodeNames);

    await waitFor(`DaemonSet ${name} status to count every pod ready`, async (observe) => {
      const status = (await apps.readNamespacedDaemonSetStatus({ name, namespace })).status;
      observe(status);
      return (
        status?.numberReady === cluster.nodeNames.length &&
        status.desiredNumberScheduled === status.numberReady
      );
    });
  });

  it("garbage-collects an object whose owner is deleted, and only that one", async () => {
    const owner = await core.createNamespacedConfigMap({
      namespace,
      body: { metadata: { name: uniqueName("owner") }, data: { role: "owner" } },
    });
    const ownerName = owner.metadata!.name!;
    const dependentName = uniqueName("dependent");
    const bystanderName = uniqueName("bystander");
    await core.createNamespacedConfigMap({
      namespace,
      body: {
        metadata: {
          name: dependentName,
          ownerReferences: [
            { apiVersion: "v1", kind: "ConfigMap", name: ownerName, uid: owner.metadata!.uid! },
          ],
        },
      },
    });
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: bystanderName } } });

    await core.deleteNamespacedConfigMap({ name: ownerName, namespace });
    await waitFor(
      `ConfigMap ${dependentName} deleted by the garbage collector`,
      () => isGone(() => core.readNamespacedConfigMap({ name: dependentName, namespace })),
      { timeoutMs: 60_000 },
    );
    await expect(core.readNamespacedConfigMap({ name: bystanderName, namespace })).resolves.toBeDefined();
  });

  it("shows a Node status capacity patch to a watch, and KWOK's heartbeats keep it", async () => {
    const nodeName = cluster.nodeNames[0]!;
    const resource = "hardware-vendor.example/foo";
    const events: V1Node[] = [];
    const watch = await new Watch(kubeconfig).watch(
      "/api/v1/nodes",
      { fieldSelector: `metadata.name=${nodeName}` },
      (_phase, node: V1Node) => events.push(node),
      () => undefined,
    );
    const heartbeat = (node: V1Node): number =>
      Date.parse(String(node.status?.conditions?.find((c) => c.type === "Ready")?.lastHeartbeatTime ?? 0));
    const summary = (node: V1Node): string =>
      `rv=${node.metadata?.resourceVersion} ${resource}=${node.status?.capacity?.[resource] ?? "-"} heartbeat=${heartbeat(node)}`;
    try {
      // The watch starts with the node as it is: from then on no event can be missed.
      await waitFor("the watch to deliver the node", () => events.length > 0);

      await core.patchNodeStatus(
        {
          name: nodeName,
          body: { status: { capacity: { [resource]: "4" }, allocatable: { [resource]: "4" } } },
        },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
      const patched = await waitFor(`a watch event with ${resource}=4 on ${nodeName}`, (observe) => {
        observe(events.map(summary));
        return events.find((node) => node.status?.capacity?.[resource] === "4");
      });
      expect(patched.status?.allocatable?.[resource]).toBe("4");

      // KWOK refreshes the node's conditions every few seconds; the first refresh after the patch
      // must leave the patched capacity (and the original one) in place.
      const refreshed = await waitFor(
        `KWOK to refresh ${nodeName}'s heartbeat after the patch`,
        (observe) => {
          observe(events.map(summary));
          return events.find((node) => heartbeat(node) > heartbeat(patched));
        },
        { timeoutMs: 60_000 },
      );
      expect(refreshed.status?.capacity).toMatchObject({
        [resource]: "4",
        cpu: "32",
        memory: "256Gi",
        pods: "110",
      });
      expect(refreshed.status?.allocatable?.[resource]).toBe("4");
    } finally {
      watch.abort();
      await core.patchNodeStatus(
        {
          name: nodeName,
          body: { status: { capacity: { [resource]: null }, allocatable: { [resource]: null } } },
        },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
    }
  });

  it("enforces RBAC: a ServiceAccount without bindings may not list nodes until it is granted", async () => {
    const serviceAccount = uniqueName("it-sa");
    const user = `system:serviceaccount:${namespace}:${serviceAccount}`;
    await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: serviceAccount } } });
    const tokenRequest = await core.createNamespacedServiceAccountToken({
      name: serviceAccount,
      namespace,
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    const asServiceAccount = kubeConfigWithToken(issuedToken(tokenRequest, serviceAccount));

    // Authenticated as the ServiceAccount, so a 403 below is the authorizer's answer, not a bad token.
    const review = await asServiceAccount
      .makeApiClient(AuthenticationV1Api)
      .createSelfSubjectReview({ body: {} });
    expect(review.status?.userInfo?.username).toBe(user);

    const denied = await asServiceAccount
      .makeApiClient(CoreV1Api)
      .listNode()
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(apiStatusCode(denied)).toBe(403);
    const canI = await kubectl(["auth", "can-i", "list", "nodes", `--as=${user}`], { allowFailure: true });
    expect({ answer: canI.stdout.trim(), exitCode: canI.exitCode }).toEqual({ answer: "no", exitCode: 1 });

    // The positive control: with a binding, the same token may list nodes.
    const grant = uniqueName("it-node-reader");
    await rbac.createClusterRole({
      body: {
        metadata: { name: grant },
        rules: [{ apiGroups: [""], resources: ["nodes"], verbs: ["list"] }],
      },
    });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: grant },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: grant },
        subjects: [{ kind: "ServiceAccount", name: serviceAccount, namespace }],
      },
    });
    try {
      await waitFor(`${user} to list nodes once bound`, () =>
        asServiceAccount.makeApiClient(CoreV1Api).listNode(),
      );
      const allowed = await kubectl(["auth", "can-i", "list", "nodes", `--as=${user}`]);
      expect(allowed.stdout.trim()).toBe("yes");
    } finally {
      await rbac.deleteClusterRoleBinding({ name: grant });
      await rbac.deleteClusterRole({ name: grant });
    }
  });
});
