// The Helm values users expect of an operator chart (the release's namespace, imagePullSecrets, priority
// class, pod labels and annotations, the ServiceAccount, security contexts, log level, extra arguments,
// topology spread, the CRD upgrade hook), each rendered with `helm template`, and values.schema.json refusing
// wrong values in `helm lint --strict`, naming the value. The monitoring values: helm-monitoring-values.test.ts.
import type {
  RbacV1Subject as V1Subject,
  V1ClusterRole,
  V1Job,
  V1ServiceAccount,
} from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { objectKey, type KubeObject } from "../../tools/manifests/compare.js";
import {
  chartDir,
  CONFIG_NAMESPACE,
  find,
  helm,
  managerContainer,
  renderChart,
  useHelmHome,
} from "./helm-support.js";

useHelmHome();

const NAMESPACE = "gpu-operators";
const SELECTOR_LABELS = {
  "app.kubernetes.io/name": "dpo-operator",
  "app.kubernetes.io/component": "operator",
};

async function render(values: string[] = []): Promise<KubeObject[]> {
  return (await renderChart(values, NAMESPACE)).objects;
}

function podSpec(objects: KubeObject[]) {
  const { deployment } = managerContainer(objects);
  const spec = deployment.spec?.template.spec;
  if (!spec) throw new Error("the operator Deployment has no pod spec");
  return spec;
}

/** The subjects of every binding that names the operator's ServiceAccount (by its namespace). */
function operatorSubjects(objects: KubeObject[]): { binding: string; subject: V1Subject }[] {
  return objects
    .filter((o) => o.kind === "RoleBinding" || o.kind === "ClusterRoleBinding")
    .flatMap((o) =>
      ((o as KubeObject & { subjects?: V1Subject[] }).subjects ?? []).map((subject) => ({
        binding: objectKey(o),
        subject,
      })),
    )
    .filter(({ subject }) => subject.kind === "ServiceAccount" && subject.name !== "dpo-plugin");
}

describe("the release's namespace", () => {
  it("holds every namespaced object, names it wherever config/ names dpo-system, and is never an object of the chart", async () => {
    const { text, objects } = await renderChart(
      ["samples.enabled=true", "webhook.certManager.enabled=true", "metrics.serviceMonitor.enabled=true"],
      NAMESPACE,
    );
    const withoutCrds = objects.filter((o) => o.kind !== "CustomResourceDefinition");
    expect(withoutCrds.filter((o) => o.kind === "Namespace")).toEqual([]);
    const namespaced = withoutCrds.filter((o) => o.metadata.namespace !== undefined);
    expect(namespaced.length).toBeGreaterThan(10);
    for (const object of namespaced) expect(object.metadata.namespace, objectKey(object)).toBe(NAMESPACE);
    // Binding subjects, the webhook's DNS names, the ServiceMonitor's namespaceSelector: none says dpo-system.
    const crdText = text
      .split(/^---$/m)
      .filter((doc) => !doc.includes("kind: CustomResourceDefinition"))
      .join("---");
    expect(crdText).not.toContain(CONFIG_NAMESPACE);
    const certificate = find<KubeObject & { spec: { dnsNames: string[] } }>(
      objects,
      "Certificate",
      "dpo-webhook",
    );
    expect(certificate.spec.dnsNames).toEqual([
      `dpo-webhook.${NAMESPACE}.svc`,
      `dpo-webhook.${NAMESPACE}.svc.cluster.local`,
    ]);
    for (const { binding, subject } of operatorSubjects(objects)) {
      expect(subject.namespace, binding).toBe(NAMESPACE);
    }
  });
});

describe("pluginPolicy", () => {
  it("sets the operator's --plugin-image-allow and --plugin-host-path-allow", async () => {
    const objects = await render([
      "pluginPolicy.images={registry.example/team/,ghcr.io/dpo-dev/dpo}",
      "pluginPolicy.hostPaths={/dev,/sys,/opt/health}",
    ]);
    const args = managerContainer(objects).container.args;
    expect(args).toContain("--plugin-image-allow=registry.example/team/,ghcr.io/dpo-dev/dpo");
    expect(args).toContain("--plugin-host-path-allow=/dev,/sys,/opt/health");
  });

  it("leaves both to the operator's defaults (its own repository; /dev, /sys, /run/dpo) by default", async () => {
    const args = managerContainer(await render()).container.args?.join(" ") ?? "";
    expect(args).not.toContain("--plugin-image-allow");
    expect(args).not.toContain("--plugin-host-path-allow");
  });
});

describe("imagePullSecrets", () => {
  it("go to the operator pods and, through --plugin-image-pull-secrets, to the plugin pods, as names or {name}", async () => {
    const objects = await render(["imagePullSecrets[0]=regcred", "imagePullSecrets[1].name=mirror"]);
    expect(podSpec(objects).imagePullSecrets).toEqual([{ name: "regcred" }, { name: "mirror" }]);
    expect(managerContainer(objects).container.args).toContain("--plugin-image-pull-secrets=regcred,mirror");
  });

  it("leave both out by default", async () => {
    const objects = await render();
    expect(podSpec(objects)).not.toHaveProperty("imagePullSecrets");
    expect(managerContainer(objects).container.args?.join(" ")).not.toContain("--plugin-image-pull-secrets");
  });
});

describe("the operator pods", () => {
  it("priorityClassName: set when given, absent by default", async () => {
    expect(podSpec(await render(["priorityClassName=system-cluster-critical"])).priorityClassName).toBe(
      "system-cluster-critical",
    );
    expect(podSpec(await render())).not.toHaveProperty("priorityClassName");
  });

  it("podLabels and podAnnotations: added, without changing the labels the selector and Services use", async () => {
    const objects = await render([
      "podLabels.team=gpu",
      "podLabels.app\\.kubernetes\\.io/name=something-else",
      "podAnnotations.example\\.com/owner=gpu-team",
    ]);
    const { deployment } = managerContainer(objects);
    expect(deployment.spec?.template.metadata?.labels).toEqual({ ...SELECTOR_LABELS, team: "gpu" });
    expect(deployment.spec?.template.metadata?.annotations).toEqual({ "example.com/owner": "gpu-team" });
    expect(deployment.spec?.selector.matchLabels).toEqual({ "app.kubernetes.io/name": "dpo-operator" });

    const defaults = managerContainer(await render()).deployment;
    expect(defaults.spec?.template.metadata?.labels).toEqual(SELECTOR_LABELS);
    expect(defaults.spec?.template.metadata).not.toHaveProperty("annotations");
  });

  it("podSecurityContext and securityContext: the defaults, a key overridden, a key dropped with null", async () => {
    const defaults = await render();
    expect(podSpec(defaults).securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(managerContainer(defaults).container.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ["ALL"] },
    });
    const changed = await render([
      "podSecurityContext.runAsUser=1000",
      "podSecurityContext.fsGroup=2000",
      "podSecurityContext.seccompProfile=null",
      "securityContext.readOnlyRootFilesystem=false",
      "securityContext.runAsNonRoot=true",
    ]);
    expect(podSpec(changed).securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 1000,
      runAsGroup: 65532,
      fsGroup: 2000,
    });
    expect(managerContainer(changed).container.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: false,
      runAsNonRoot: true,
      capabilities: { drop: ["ALL"] },
    });
  });

  it("topologySpreadConstraints: passed through, absent by default", async () => {
    const objects = await render([
      "topologySpreadConstraints[0].maxSkew=1",
      "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
      "topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
      "topologySpreadConstraints[0].labelSelector.matchLabels.app\\.kubernetes\\.io/name=dpo-operator",
    ]);
    expect(podSpec(objects).topologySpreadConstraints).toEqual([
      {
        maxSkew: 1,
        topologyKey: "topology.kubernetes.io/zone",
        whenUnsatisfiable: "ScheduleAnyway",
        labelSelector: { matchLabels: { "app.kubernetes.io/name": "dpo-operator" } },
      },
    ]);
    expect(podSpec(await render())).not.toHaveProperty("topologySpreadConstraints");
  });
});

describe("the operator's arguments", () => {
  it("logLevel: --log-level, info by default", async () => {
    expect(managerContainer(await render()).container.args).toContain("--log-level=info");
    const debug = managerContainer(await render(["logLevel=debug"])).container.args ?? [];
    expect(debug).toContain("--log-level=debug");
    expect(debug).not.toContain("--log-level=info");
  });

  it("extraArgs: after the chart's own, in order", async () => {
    const defaults = managerContainer(await render()).container.args ?? [];
    const args = managerContainer(
      await render(["extraArgs[0]=--concurrency=8", "extraArgs[1]=--status-write-interval=1000"]),
    ).container.args;
    expect(args).toEqual([...defaults, "--concurrency=8", "--status-write-interval=1000"]);
  });
});

describe("serviceAccount", () => {
  it("by default creates dpo-operator, which the Deployment runs as and the bindings name", async () => {
    const objects = await render();
    const account = find<V1ServiceAccount>(objects, "ServiceAccount", "dpo-operator");
    expect(account.metadata?.namespace).toBe(NAMESPACE);
    expect(account.metadata).not.toHaveProperty("annotations");
    expect(podSpec(objects).serviceAccountName).toBe("dpo-operator");
    const subjects = operatorSubjects(objects);
    expect(subjects.map((s) => s.binding).sort()).toEqual(
      ["ClusterRoleBinding dpo-operator", `RoleBinding ${NAMESPACE}/dpo-operator`].sort(),
    );
    for (const { binding, subject } of subjects) {
      expect(subject, binding).toEqual({
        kind: "ServiceAccount",
        name: "dpo-operator",
        namespace: NAMESPACE,
      });
    }
  });

  it("name and annotations: the account, the Deployment and the bindings follow", async () => {
    const objects = await render([
      "serviceAccount.name=gpu-operator",
      "serviceAccount.annotations.iam\\.example\\.com/role=dpo",
    ]);
    const account = find<V1ServiceAccount>(objects, "ServiceAccount", "gpu-operator");
    expect(account.metadata?.annotations).toEqual({ "iam.example.com/role": "dpo" });
    expect(
      objects
        .filter((o) => o.kind === "ServiceAccount")
        .map((o) => o.metadata.name)
        .sort(),
    ).toEqual(["dpo-plugin", "gpu-operator"]);
    expect(podSpec(objects).serviceAccountName).toBe("gpu-operator");
    const subjects = operatorSubjects(objects);
    expect(subjects).toHaveLength(2);
    for (const { binding, subject } of subjects) expect(subject.name, binding).toBe("gpu-operator");
  });

  it("name: the operator's Node admission policy matches the account of that name, in any namespace", async () => {
    const expressions = (objects: KubeObject[]) =>
      (
        find<KubeObject & { spec: { matchConditions: { name: string; expression: string }[] } }>(
          objects,
          "ValidatingAdmissionPolicy",
          "dpo-operator-node-labels",
        ).spec.matchConditions ?? []
      ).map((c) => c.expression.replace(/\s+/g, " "));
    const account = (name: string) =>
      `request.userInfo.username.startsWith('system:serviceaccount:') && request.userInfo.username.endsWith(':${name}')`;
    expect(expressions(await render())).toEqual([account("dpo-operator")]);
    // A renamed account patches Nodes through the operator's ClusterRole: the policy must still limit it.
    expect(expressions(await render(["serviceAccount.name=gpu-operator"]))).toEqual([
      account("gpu-operator"),
    ]);
    expect(
      expressions(await render(["serviceAccount.create=false", "serviceAccount.name=existing"])),
    ).toEqual([account("existing")]);
  });

  it("create=false: no operator account, the bindings and the Deployment use the one named", async () => {
    const objects = await render(["serviceAccount.create=false", "serviceAccount.name=existing"]);
    expect(objects.filter((o) => o.kind === "ServiceAccount").map((o) => o.metadata.name)).toEqual([
      "dpo-plugin",
    ]);
    expect(podSpec(objects).serviceAccountName).toBe("existing");
    for (const { binding, subject } of operatorSubjects(objects))
      expect(subject.name, binding).toBe("existing");
  });
});

describe("crds.upgrade", () => {
  const isHook = (o: KubeObject): boolean => o.metadata.annotations?.["helm.sh/hook"] !== undefined;

  it("renders no hook by default", async () => {
    expect((await render()).filter(isHook)).toEqual([]);
  });

  it("renders a pre-install and pre-upgrade Job running `dpo crds apply` for the release's namespace, with RBAC for dpo's CRDs only, all deleted once it succeeds and the RBAC once it fails too", async () => {
    const objects = await render(["crds.upgrade=true", "imagePullSecrets[0]=regcred", "image.tag=9.9.9"]);
    const hooks = objects.filter(isHook);
    expect(hooks.map(objectKey).sort()).toEqual(
      [
        "ClusterRole dpo-crd-upgrade",
        "ClusterRoleBinding dpo-crd-upgrade",
        `Job ${NAMESPACE}/dpo-crd-upgrade`,
        `ServiceAccount ${NAMESPACE}/dpo-crd-upgrade`,
      ].sort(),
    );
    const weight = (kind: string) =>
      Number(hooks.find((o) => o.kind === kind)?.metadata.annotations?.["helm.sh/hook-weight"]);
    for (const hook of hooks) {
      expect(hook.metadata.annotations?.["helm.sh/hook"], objectKey(hook)).toBe("pre-install,pre-upgrade");
      // The cluster-wide right to patch CRDs goes whatever the Job's outcome; a failed Job stays for its logs.
      expect(hook.metadata.annotations?.["helm.sh/hook-delete-policy"], objectKey(hook)).toBe(
        hook.kind === "Job"
          ? "before-hook-creation,hook-succeeded"
          : "before-hook-creation,hook-succeeded,hook-failed",
      );
    }
    // Helm runs hooks by weight: the account and its rights before the Job that uses them.
    expect(weight("ServiceAccount")).toBeLessThan(weight("Job"));
    expect(weight("ClusterRole")).toBeLessThan(weight("Job"));
    expect(weight("ClusterRoleBinding")).toBeLessThan(weight("Job"));

    const job = find<V1Job>(hooks, "Job", "dpo-crd-upgrade");
    const pod = job.spec?.template.spec;
    expect(pod?.serviceAccountName).toBe("dpo-crd-upgrade");
    expect(pod?.restartPolicy).toBe("Never");
    expect(pod?.imagePullSecrets).toEqual([{ name: "regcred" }]);
    const container = pod?.containers[0];
    expect(container?.image).toBe(managerContainer(objects).container.image);
    expect(container?.image).toBe("ghcr.io/dpo-dev/dpo:9.9.9");
    expect(container?.command).toEqual(["node", "/app/dist/dpo.js"]);
    expect(container?.args).toEqual(["crds", "apply", `--webhook-namespace=${NAMESPACE}`]);

    const role = find<V1ClusterRole>(hooks, "ClusterRole", "dpo-crd-upgrade");
    for (const rule of role.rules ?? []) {
      expect(rule.apiGroups).toEqual(["apiextensions.k8s.io"]);
      expect(rule.resources).toEqual(["customresourcedefinitions"]);
      // Only create, which RBAC cannot limit by name, goes without resourceNames.
      if (rule.resourceNames === undefined) expect(rule.verbs).toEqual(["create"]);
      else
        expect(rule.resourceNames.sort()).toEqual([
          "devicenodestates.dpo.dev",
          "devicepluginconfigs.dpo.dev",
        ]);
    }
    const binding = find<KubeObject & { subjects: V1Subject[] }>(
      hooks,
      "ClusterRoleBinding",
      "dpo-crd-upgrade",
    );
    expect(binding.subjects).toEqual([
      { kind: "ServiceAccount", name: "dpo-crd-upgrade", namespace: NAMESPACE },
    ]);
  });
});

describe("values.schema.json in helm lint --strict", () => {
  it("passes every value set as documented", async () => {
    const result = await helm(
      [
        "lint",
        "--strict",
        chartDir,
        "--set",
        [
          "imagePullSecrets[0]=regcred",
          "imagePullSecrets[1].name=mirror",
          "priorityClassName=high",
          "podLabels.team=gpu",
          "podAnnotations.owner=gpu-team",
          "serviceAccount.create=false",
          "serviceAccount.name=existing",
          "serviceAccount.annotations.role=dpo",
          "podSecurityContext.runAsUser=1000",
          "securityContext.readOnlyRootFilesystem=false",
          "logLevel=debug",
          "extraArgs[0]=--concurrency=8",
          "topologySpreadConstraints[0].maxSkew=1",
          "topologySpreadConstraints[0].topologyKey=zone",
          "topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
          "crds.upgrade=true",
          "metrics.podMonitor.enabled=true",
          "metrics.podMonitor.interval=30s",
          "metrics.podMonitor.relabelings[0].targetLabel=team",
          "metrics.podMonitor.metricRelabelings[0].action=drop",
          "metrics.prometheusRule.enabled=true",
          "metrics.prometheusRule.additionalRuleLabels.team=gpu",
          "metrics.prometheusRule.runbookBaseUrl=https://runbooks.example.com/dpo",
          "metrics.prometheusRule.alerts.DpoOperatorDown.enabled=false",
          "metrics.prometheusRule.alerts.DpoConfigNotReady.for=1h30m",
          "metrics.prometheusRule.alerts.DpoDevicesUnhealthy.threshold=2",
          "metrics.prometheusRule.alerts.DpoReconcileErrors.threshold=10",
          "metrics.prometheusRule.alerts.DpoRolloutStalled.noProgressFor=1h",
          "metrics.prometheusRule.alerts.DpoWebhookCertificateExpiring.daysLeft=14",
          "metrics.prometheusRule.alerts.DpoStorageMigrationFailed.enabled=false",
        ].join(","),
      ],
      { allowFailure: true },
    );
    expect(result.exitCode, result.stdout + result.stderr).toBe(0);
  });

  it.each([
    ["a word for a number", "replicas=two", "/replicas"],
    ["an unknown log level", "logLevel=loud", "/logLevel"],
    ["a string for a boolean", "crds.upgrade=yes", "/crds/upgrade"],
    ["a misspelt value", "serviceAcount.create=false", "serviceAcount"],
    ["a map for a list", "imagePullSecrets.name=regcred", "/imagePullSecrets"],
    ["a pull Secret item without a name", "imagePullSecrets[0].nme=regcred", "/imagePullSecrets/0"],
    ["a Secret name that is not one", "imagePullSecrets[0]=Reg_Cred", "/imagePullSecrets/0"],
    ["an extra argument that is no flag", "extraArgs[0]=operator", "/extraArgs/0"],
    ["a label value that is a number", "podLabels.tier=1", "/podLabels/tier"],
    [
      "a spread constraint without a key",
      "topologySpreadConstraints[0].maxSkew=1",
      "/topologySpreadConstraints/0",
    ],
    ["a digest that is not one", "image.digest=latest", "/image/digest"],
    [
      "a PodMonitor interval that is not a duration",
      "metrics.podMonitor.interval=often",
      "/metrics/podMonitor/interval",
    ],
    [
      "an alert's for: that is not a duration",
      "metrics.prometheusRule.alerts.DpoConfigStalled.for=5 minutes",
      "/metrics/prometheusRule/alerts/DpoConfigStalled/for",
    ],
    ["a misspelt alert", "metrics.prometheusRule.alerts.DpoOperatorDwn.enabled=false", "DpoOperatorDwn"],
    [
      "a threshold that is a word",
      "metrics.prometheusRule.alerts.DpoDevicesUnhealthy.threshold=many",
      "/metrics/prometheusRule/alerts/DpoDevicesUnhealthy/threshold",
    ],
    [
      "a threshold the alert does not have",
      "metrics.prometheusRule.alerts.DpoOperatorDown.threshold=1",
      "/metrics/prometheusRule/alerts/DpoOperatorDown",
    ],
    [
      "a severity among the labels for every alert",
      "metrics.prometheusRule.additionalRuleLabels.severity=info",
      "/metrics/prometheusRule/additionalRuleLabels",
    ],
    [
      "a runbook base that is no URL",
      "metrics.prometheusRule.runbookBaseUrl=docs/runbooks",
      "/metrics/prometheusRule/runbookBaseUrl",
    ],
  ])("refuses %s, naming the value", async (_what, value, path) => {
    const result = await helm(["lint", "--strict", chartDir, "--set", value], { allowFailure: true });
    expect(result.exitCode, result.stdout + result.stderr).not.toBe(0);
    expect(result.stdout + result.stderr).toContain(path);
  });
});
