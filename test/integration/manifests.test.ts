// The deployment manifests in config/ and the image entrypoint against a real API server: they render, the
// server accepts them, the operator pod meets Pod Security `restricted`, and the Node flags each workload of
// the image runs with. test/integration/manifests-rbac.test.ts checks RBAC grants only what is listed.
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import type {
  V1Deployment,
  V1Namespace,
  V1Secret,
  V1Service,
  V1ServiceAccount,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments, stringify } from "yaml";
import { injectedCluster, kubectl, uniqueName, waitFor } from "../cluster/helpers.js";
import {
  repoRoot,
  configDir,
  FIELD_MANAGER,
  OPERATOR_NAMESPACE,
  packageVersion,
  type KubeObject,
  render,
  applyConfigCrds,
  find,
  operatorDeployment,
  managerContainer,
  waitForCrdsEstablished,
} from "./manifests-support.js";

describe("config/default", () => {
  let objects: KubeObject[] = [];
  let createdOperatorNamespace = false;

  beforeAll(async () => {
    objects = await render(join(configDir, "default"));
    // CRDs for real (the same YAML the cluster tests use), so the dry run below can resolve the kinds.
    await applyConfigCrds();
    await waitForCrdsEstablished();
    // A server-side dry run does not create the Namespace, and nothing can be created in a missing one.
    const existing = await kubectl(["get", "namespace", OPERATOR_NAMESPACE], { allowFailure: true });
    if (existing.exitCode !== 0) {
      await kubectl(["create", "namespace", OPERATOR_NAMESPACE]);
      createdOperatorNamespace = true;
    }
  });

  afterAll(async () => {
    if (!createdOperatorNamespace) return;
    await kubectl(["delete", "namespace", OPERATOR_NAMESPACE, "--ignore-not-found", "--wait=false"]);
    // Later files may create it again; a Terminating namespace would refuse them.
    await waitFor(`namespace ${OPERATOR_NAMESPACE} gone`, async (observe) => {
      const result = await kubectl(["get", "namespace", OPERATOR_NAMESPACE, "-o", "name"], {
        allowFailure: true,
      });
      observe(result.stdout.trim() || result.stderr.trim());
      return result.exitCode !== 0 && result.stderr.includes("NotFound");
    });
  });

  it("renders the CRDs, RBAC and the operator, every namespaced object in dpo-system", () => {
    const kinds = objects.map((o) => `${o.kind}/${o.metadata.name}`).sort();
    expect(kinds).toEqual(
      [
        "ClusterRole/dpo-operator",
        "ClusterRoleBinding/dpo-operator",
        "ClusterRole/dpo-plugin",
        "ClusterRoleBinding/dpo-plugin",
        "CustomResourceDefinition/devicenodestates.dpo.dev",
        "CustomResourceDefinition/devicepluginconfigs.dpo.dev",
        "Deployment/dpo-operator",
        "Namespace/dpo-system",
        "PodDisruptionBudget/dpo-operator",
        "Role/dpo-operator",
        "Role/dpo-plugin",
        "RoleBinding/dpo-operator",
        "RoleBinding/dpo-plugin",
        "Secret/dpo-webhook-cert",
        "Service/dpo-operator-metrics",
        "Service/dpo-webhook",
        "ServiceAccount/dpo-operator",
        "ServiceAccount/dpo-plugin",
        "ValidatingAdmissionPolicy/dpo-operator-node-labels",
        "ValidatingAdmissionPolicy/dpo-plugin-own-node",
        "ValidatingAdmissionPolicyBinding/dpo-operator-node-labels",
        "ValidatingAdmissionPolicyBinding/dpo-plugin-own-node",
        "ValidatingAdmissionPolicy/dpo-plugin-own-node-slices",
        "ValidatingAdmissionPolicyBinding/dpo-plugin-own-node-slices",
      ].sort(),
    );
    const clusterScoped = new Set([
      "ClusterRole",
      "ClusterRoleBinding",
      "CustomResourceDefinition",
      "Namespace",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
    ]);
    const namespaced = objects.filter((o) => !clusterScoped.has(o.kind));
    // The loop below passes on no object at all.
    expect(namespaced.map((o) => o.kind)).toEqual(expect.arrayContaining(["Deployment", "ServiceAccount"]));
    for (const o of namespaced) {
      expect(o.metadata.namespace, `${o.kind}/${o.metadata.name}`).toBe(OPERATOR_NAMESPACE);
    }
    // kustomize does not know every cluster-scoped kind (admission policies); config/default unsets theirs.
    for (const o of objects.filter((o) => clusterScoped.has(o.kind))) {
      expect(o.metadata.namespace, `${o.kind}/${o.metadata.name}`).toBeUndefined();
    }
  });

  it("binds the plugin node policy, for the plugin ServiceAccount the operator hands its DaemonSets", () => {
    const policy = find<{
      metadata: { name: string };
      spec: { failurePolicy: string; matchConditions: { expression: string }[] };
    }>(objects, "ValidatingAdmissionPolicy", "dpo-plugin-own-node");
    const binding = find<{ spec: { policyName: string; validationActions: string[] } }>(
      objects,
      "ValidatingAdmissionPolicyBinding",
      "dpo-plugin-own-node",
    );
    expect(binding.spec).toEqual({ policyName: policy.metadata.name, validationActions: ["Deny"] });
    expect(policy.spec.failurePolicy).toBe("Fail");
    // The namespace comes from the request, so a namespace overlay cannot leave the policy matching nobody.
    const account = find<V1ServiceAccount>(objects, "ServiceAccount", "dpo-plugin").metadata?.name ?? "";
    expect(policy.spec.matchConditions.map((c) => c.expression)).toEqual([
      `request.userInfo.username == 'system:serviceaccount:' + request.namespace + ':${account}'`,
    ]);
    expect(managerContainer(operatorDeployment(objects)).args).toContain(
      `--plugin-service-account=${account}`,
    );
  });

  it("labels the namespace for Pod Security privileged, which the plugins' hostPath mounts need", () => {
    const namespace = find<V1Namespace>(objects, "Namespace", OPERATOR_NAMESPACE);
    expect(namespace.metadata?.labels).toMatchObject({
      "pod-security.kubernetes.io/enforce": "privileged",
      "pod-security.kubernetes.io/audit": "privileged",
      "pod-security.kubernetes.io/warn": "privileged",
    });
  });

  it("runs the released image and hands the same image to the plugin DaemonSets", () => {
    const container = managerContainer(operatorDeployment(objects));
    expect(container.image).toBe(`ghcr.io/dpo-dev/dpo:${packageVersion}`);
    const pluginImage = container.env?.find((e) => e.name === "DPO_PLUGIN_IMAGE");
    expect(pluginImage?.value).toBe(container.image);
  });

  it("runs two replicas with leader election, in the operator ServiceAccount, telling plugins theirs", () => {
    const deployment = operatorDeployment(objects);
    const pod = deployment.spec?.template.spec;
    const container = managerContainer(deployment);
    expect(deployment.spec?.replicas).toBe(2);
    expect(pod?.serviceAccountName).toBe("dpo-operator");
    expect(container.args?.[0]).toBe("operator");
    expect(container.env).toEqual(
      expect.arrayContaining([
        { name: "DPO_LEADER_ELECT", value: "true" },
        {
          name: "POD_NAMESPACE",
          valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } },
        },
      ]),
    );
    const pluginAccount = find<V1ServiceAccount>(objects, "ServiceAccount", "dpo-plugin");
    expect(container.args).toContain(`--plugin-service-account=${pluginAccount.metadata?.name}`);
    expect(container.args).toContain("--leader-election-id=dpo-operator");
  });

  it("probes /healthz and /readyz on the health port and exposes metrics", () => {
    const container = managerContainer(operatorDeployment(objects));
    expect(container.ports).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: "metrics", containerPort: 8080 }),
        expect.objectContaining({ name: "health", containerPort: 8081 }),
      ]),
    );
    expect(container.args).toEqual(expect.arrayContaining(["--metrics-addr=:8080", "--health-addr=:8081"]));
    expect(container.livenessProbe?.httpGet).toMatchObject({ path: "/healthz", port: "health" });
    expect(container.readinessProbe?.httpGet).toMatchObject({ path: "/readyz", port: "health" });
  });

  it("routes the CRD's conversion webhook to the operator's webhook port, with the certificate Secret it keeps", () => {
    const crd = objects.find(
      (o) => o.kind === "CustomResourceDefinition" && o.metadata.name === "devicepluginconfigs.dpo.dev",
    ) as unknown as {
      spec: {
        conversion: { webhook: { clientConfig: { service: Record<string, unknown>; caBundle?: string } } };
      };
    };
    const clientConfig = crd.spec.conversion.webhook.clientConfig;
    expect(clientConfig.service).toEqual({
      namespace: OPERATOR_NAMESPACE,
      name: "dpo-webhook",
      path: "/convert",
      port: 443,
    });
    // The operator writes the caBundle; a GitOps tool applying these files must not own (and reset) it.
    expect(clientConfig.caBundle).toBeUndefined();
    const service = find<V1Service>(objects, "Service", "dpo-webhook");
    expect(service.spec?.ports).toEqual([
      { name: "webhook", port: 443, targetPort: "webhook", protocol: "TCP" },
    ]);
    const deployment = operatorDeployment(objects);
    expect(service.spec?.selector).toEqual(deployment.spec?.selector?.matchLabels);
    const container = managerContainer(deployment);
    expect(container.ports).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: "webhook", containerPort: 9443 })]),
    );
    expect(container.args).toContain("--webhook-addr=:9443");
    const secret = find<V1Secret>(objects, "Secret", "dpo-webhook-cert");
    expect(secret.type).toBe("Opaque");
    expect(secret.data).toBeUndefined();
  });

  it("is accepted by the API server as a whole (server-side apply, dry run)", async () => {
    const result = await kubectl(
      [
        "apply",
        "--server-side",
        "--dry-run=server",
        "--force-conflicts",
        `--field-manager=${FIELD_MANAGER}`,
        "-k",
        join(configDir, "default"),
      ],
      { allowFailure: true },
    );
    expect(result.exitCode, result.stderr).toBe(0);
    const applied = result.stdout.split("\n").filter((line) => line.includes("(server dry run)"));
    expect(applied).toHaveLength(objects.length);
  });

  it("gives the operator a pod that Pod Security `restricted` admits", async () => {
    const namespace = uniqueName("it-restricted");
    await kubectl(["create", "-f", "-"], {
      input: stringify({
        apiVersion: "v1",
        kind: "Namespace",
        metadata: {
          name: namespace,
          labels: {
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "latest",
          },
        },
      }),
    });
    try {
      const template = operatorDeployment(objects).spec?.template;
      // The ServiceAccount admission plugin refuses a pod whose account does not exist.
      await kubectl(["create", "serviceaccount", "-n", namespace, template?.spec?.serviceAccountName ?? ""]);
      const pod = {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "dpo-operator", namespace, labels: template?.metadata?.labels },
        spec: template?.spec,
      };
      const admitted = await kubectl(["create", "--dry-run=server", "-f", "-"], {
        input: stringify(pod),
        allowFailure: true,
      });
      expect(admitted.exitCode, admitted.stderr).toBe(0);

      // The same pod as root is refused: Pod Security is enforced here, so the admission above means something.
      const asRoot = structuredClone(pod);
      if (asRoot.spec?.securityContext) asRoot.spec.securityContext.runAsUser = 0;
      const refused = await kubectl(["create", "--dry-run=server", "-f", "-"], {
        input: stringify(asRoot),
        allowFailure: true,
      });
      expect(refused.exitCode).not.toBe(0);
      expect(refused.stderr).toContain("violates PodSecurity");
    } finally {
      await kubectl(["delete", "namespace", namespace, "--ignore-not-found", "--wait=false"]);
    }
  });
});

describe("config/components/cert-manager and config/local", () => {
  let overlayDir = "";
  afterAll(async () => {
    if (overlayDir !== "") await rm(overlayDir, { recursive: true, force: true });
  });

  it("hands the webhook's certificate to cert-manager: mounted, served from the directory, CA injected", async () => {
    overlayDir = await mkdtemp(join(tmpdir(), "dpo-cert-manager-overlay-"));
    await writeFile(
      join(overlayDir, "kustomization.yaml"),
      stringify({
        apiVersion: "kustomize.config.k8s.io/v1beta1",
        kind: "Kustomization",
        resources: [relative(overlayDir, join(configDir, "default"))],
        components: [relative(overlayDir, join(configDir, "components", "cert-manager"))],
      }),
    );
    const objects = await render(overlayDir);
    const crd = find<{ metadata: { annotations?: Record<string, string> } }>(
      objects,
      "CustomResourceDefinition",
      "devicepluginconfigs.dpo.dev",
    );
    const certificate = find<{
      metadata: { name: string };
      spec: { secretName: string; dnsNames: string[] };
    }>(objects, "Certificate", "dpo-webhook");
    const service = find<V1Service>(objects, "Service", "dpo-webhook");
    expect(crd.metadata.annotations?.["cert-manager.io/inject-ca-from"]).toBe(
      `${OPERATOR_NAMESPACE}/${certificate.metadata.name}`,
    );
    expect(certificate.spec.dnsNames).toContain(`${service.metadata?.name}.${OPERATOR_NAMESPACE}.svc`);
    const deployment = operatorDeployment(objects);
    const container = managerContainer(deployment);
    const mount = container.volumeMounts?.find((m) => m.name === "webhook-certs");
    expect(container.args).toContain(`--webhook-cert-dir=${mount?.mountPath}`);
    expect(deployment.spec?.template.spec?.volumes).toEqual(
      expect.arrayContaining([
        { name: "webhook-certs", secret: { secretName: certificate.spec.secretName } },
      ]),
    );
  });

  it("points the CRD of a local run at 127.0.0.1:9443, where `make run` serves the webhook", async () => {
    const crd = find<{ spec: { conversion: { webhook: { clientConfig: unknown } } } }>(
      await render(join(configDir, "local")),
      "CustomResourceDefinition",
      "devicepluginconfigs.dpo.dev",
    );
    expect(crd.spec.conversion.webhook.clientConfig).toEqual({ url: "https://127.0.0.1:9443/convert" });
    const makefile = readFileSync(join(configDir, "..", "Makefile"), "utf8");
    expect(makefile).toMatch(/--webhook-addr 127\.0\.0\.1:9443 --webhook-hosts 127\.0\.0\.1/);
  });
});

describe("the Node flags each workload of the image runs with", () => {
  const runList = async (command: string[], script: string): Promise<{ stdout: string; stderr: string }> => {
    const [program, ...rest] = command;
    expect(program).toBe("node");
    const nodeFlags = rest.filter((arg) => arg.startsWith("--"));
    return promisify(execFile)(process.execPath, [...nodeFlags, "--input-type=module", "-e", script], {
      cwd: repoRoot,
      env: { ...process.env, TEST_KUBECONFIG: injectedCluster().kubeconfigPath },
      timeout: 60_000,
    });
  };

  it("let the plugin (the ENTRYPOINT's flags, lite mode) reach the API server with its own client", async () => {
    const entrypoint = /^ENTRYPOINT (\[.*\])$/m.exec(readFileSync(join(repoRoot, "Dockerfile"), "utf8"))?.[1];
    if (entrypoint === undefined) throw new Error("the Dockerfile has no exec-form ENTRYPOINT");
    const { stdout, stderr } = await runList(
      JSON.parse(entrypoint) as string[],
      `
      import { ApiClient, loadKubeconfig } from "./dist/plugin-runtime/report/api-client.js";
      const client = new ApiClient(await loadKubeconfig(process.env.TEST_KUBECONFIG));
      const namespaces = await client.request({ method: "GET", path: "/api/v1/namespaces" });
      process.stdout.write(JSON.stringify(namespaces.items.map((n) => n.metadata.name)));
      process.exit(0);
    `,
    );
    expect(JSON.parse(stdout)).toContain("kube-system");
    expect(stderr).toBe("");
  });

  it("let the operator (the Deployment's command) reach the API server with @kubernetes/client-node", async () => {
    const deployment = parseAllDocuments(readFileSync(join(configDir, "manager", "deployment.yaml"), "utf8"))
      .map((doc) => doc.toJS() as V1Deployment)
      .find((doc) => doc.kind === "Deployment");
    const command = deployment?.spec?.template.spec?.containers[0]?.command;
    if (command === undefined) throw new Error("config/manager/deployment.yaml sets no command");
    const { stdout, stderr } = await runList(
      command,
      `
      import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
      const kubeconfig = new KubeConfig();
      kubeconfig.loadFromFile(process.env.TEST_KUBECONFIG);
      const namespaces = await kubeconfig.makeApiClient(CoreV1Api).listNamespace();
      process.stdout.write(JSON.stringify(namespaces.items.map((n) => n.metadata.name)));
    `,
    );
    expect(JSON.parse(stdout)).toContain("kube-system");
    expect(stderr).toBe("");
  });
});
