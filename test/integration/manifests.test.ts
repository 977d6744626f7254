// The deployment manifests in config/ and the image entrypoint against a real API server: they render, the
// server accepts them, the operator pod meets Pod Security `restricted`, and RBAC grants only what is listed.
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import type {
  V1ClusterRole,
  V1Deployment,
  V1Namespace,
  V1PolicyRule,
  V1Role,
  V1Secret,
  V1Service,
  V1ServiceAccount,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SERVICE_CLIENT_CONFIG, setClientConfig } from "../cluster/conversion-webhook.js";
import { parseAllDocuments, stringify } from "yaml";
import { injectedCluster, kubectl, uniqueName, waitFor } from "../cluster/helpers.js";

const repoRoot = join(import.meta.dirname, "..", "..");
const configDir = join(repoRoot, "config");
const FIELD_MANAGER = "dpo-manifests-test";
const OPERATOR_NAMESPACE = "dpo-system";
const packageVersion = (
  JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version: string }
).version;

interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
}

function parseObjects(yamlText: string): KubeObject[] {
  return parseAllDocuments(yamlText)
    .map((doc) => doc.toJS() as KubeObject | null)
    .filter((obj): obj is KubeObject => obj !== null);
}

async function render(dir: string): Promise<KubeObject[]> {
  return parseObjects((await kubectl(["kustomize", dir])).stdout);
}

/** config/crd applied for real, after putting the webhook's clientConfig back to what it names. */
async function applyConfigCrds(): Promise<void> {
  await setClientConfig(SERVICE_CLIENT_CONFIG);
  await kubectl([
    "apply",
    "--server-side",
    "--force-conflicts",
    `--field-manager=${FIELD_MANAGER}`,
    "-k",
    join(configDir, "crd"),
  ]);
}

function find<T>(objects: KubeObject[], kind: string, name: string): T {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) {
    throw new Error(
      `no ${kind}/${name} among ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(", ")}`,
    );
  }
  return found as T;
}

function operatorDeployment(objects: KubeObject[]): V1Deployment {
  return find<V1Deployment>(objects, "Deployment", "dpo-operator");
}

function managerContainer(deployment: V1Deployment) {
  const container = deployment.spec?.template.spec?.containers.find((c) => c.name === "manager");
  if (!container) throw new Error("the operator Deployment has no 'manager' container");
  return container;
}

async function waitForCrdsEstablished(): Promise<void> {
  for (const name of ["devicepluginconfigs.dpo.dev", "devicenodestates.dpo.dev"]) {
    await waitFor(`CRD ${name} Established`, async (observe) => {
      const { stdout } = await kubectl([
        "get",
        "crd",
        name,
        "-o",
        "jsonpath={.status.conditions[?(@.type=='Established')].status}",
      ]);
      observe(stdout);
      return stdout === "True";
    });
  }
}

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

describe("config/rbac rules", () => {
  let rules: { owner: string; rule: V1PolicyRule }[] = [];

  beforeAll(async () => {
    const objects = await render(join(configDir, "rbac"));
    rules = objects
      .filter((o) => o.kind === "ClusterRole" || o.kind === "Role")
      .flatMap((o) =>
        ((o as V1ClusterRole | V1Role).rules ?? []).map((rule) => ({
          owner: `${o.kind}/${o.metadata.name}`,
          rule,
        })),
      );
  });

  it("has no wildcard group, resource, verb or name", () => {
    expect(rules.length).toBeGreaterThan(0);
    for (const { owner, rule } of rules) {
      const fields = [...(rule.apiGroups ?? []), ...(rule.resources ?? []), ...rule.verbs];
      expect(
        fields.filter((f) => f.includes("*")),
        owner,
      ).toEqual([]);
      expect(rule.nonResourceURLs ?? [], owner).toEqual([]);
    }
  });

  it("never touches secrets (but the webhook's own, by name), RBAC, tokens, or pods beyond reading them", () => {
    expect(rules.length).toBeGreaterThan(0);
    for (const { owner, rule } of rules) {
      const where = `${owner}: ${JSON.stringify(rule)}`;
      expect(rule.apiGroups ?? [], where).not.toContain("rbac.authorization.k8s.io");
      if ((rule.resources ?? []).includes("secrets")) {
        // The conversion webhook's certificates: one Secret, named, read and rewritten, never created or listed.
        expect({ owner, resources: rule.resources, names: rule.resourceNames, verbs: rule.verbs }).toEqual({
          owner: "Role/dpo-operator",
          resources: ["secrets"],
          names: ["dpo-webhook-cert"],
          verbs: ["get", "update"],
        });
      }
      for (const verb of ["bind", "impersonate", "escalate"]) expect(rule.verbs, where).not.toContain(verb);
      for (const resource of rule.resources ?? []) {
        expect(resource, where).not.toMatch(/^(pods\/.+|serviceaccounts\/token)$/);
        if (resource === "pods") expect(rule.verbs, where).toEqual(["list", "watch"]);
      }
    }
  });

  it("gives the operator no write to any DevicePluginConfig but its status and the migration's patch", () => {
    // patch stays: the storage-version migration sends an empty patch, which RBAC cannot tell apart.
    const writes = new Set(["create", "update", "delete", "deletecollection"]);
    const onConfigs = rules.filter(({ rule }) => (rule.resources ?? []).includes("devicepluginconfigs"));
    // The operator reads its configs, so some rule names them; without one the loop would check nothing.
    expect(onConfigs.length).toBeGreaterThan(0);
    for (const { owner, rule } of onConfigs) {
      expect(
        rule.verbs.filter((v) => writes.has(v)),
        owner,
      ).toEqual([]);
    }
  });

  it("lets the operator read and patch its own CRD only, by name, and nothing else on CRDs", () => {
    const onCrds = rules.filter(({ rule }) =>
      (rule.resources ?? []).some((r) => r.startsWith("customresourcedefinitions")),
    );
    expect(onCrds.length).toBeGreaterThan(0);
    for (const { owner, rule } of onCrds) {
      const where = `${owner}: ${JSON.stringify(rule)}`;
      expect(rule.apiGroups, where).toEqual(["apiextensions.k8s.io"]);
      expect(rule.resourceNames, where).toEqual(["devicepluginconfigs.dpo.dev"]);
      expect(["get", "patch"], where).toEqual(expect.arrayContaining(rule.verbs));
    }
  });
});

const CRD = "customresourcedefinitions.apiextensions.k8s.io";

/** `kubectl auth can-i` as a ServiceAccount, with the groups a real token of it carries. */
async function canI(namespace: string, account: string, args: string[]): Promise<boolean> {
  const result = await kubectl(
    [
      "auth",
      "can-i",
      ...args,
      `--as=system:serviceaccount:${namespace}:${account}`,
      "--as-group=system:serviceaccounts",
      `--as-group=system:serviceaccounts:${namespace}`,
      "--as-group=system:authenticated",
    ],
    { allowFailure: true },
  );
  const answer = result.stdout.trim();
  if (answer !== "yes" && answer !== "no") {
    throw new Error(`kubectl auth can-i ${args.join(" ")}: ${result.stderr.trim()}`);
  }
  return answer === "yes";
}

describe("config/rbac applied for real: what each ServiceAccount can do", () => {
  // A variant in its own namespace with suffixed names, so it never meets a real install or another test.
  const namespace = uniqueName("it-rbac");
  const suffix = `-${namespace.slice(-8)}`;
  const operator = `dpo-operator${suffix}`;
  const plugin = `dpo-plugin${suffix}`;
  let variantDir = "";

  beforeAll(async () => {
    variantDir = await mkdtemp(join(tmpdir(), "dpo-rbac-variant-"));
    await writeFile(
      join(variantDir, "kustomization.yaml"),
      stringify({
        apiVersion: "kustomize.config.k8s.io/v1beta1",
        kind: "Kustomization",
        namespace,
        nameSuffix: suffix,
        // kustomize takes bases by relative path only.
        resources: [relative(variantDir, join(configDir, "rbac"))],
      }),
    );
    await applyConfigCrds();
    await waitForCrdsEstablished();
    await kubectl(["create", "namespace", namespace]);
    await kubectl(["apply", "--server-side", `--field-manager=${FIELD_MANAGER}`, "-k", variantDir]);
  });

  afterAll(async () => {
    if (variantDir !== "") {
      await kubectl(["delete", "-k", variantDir, "--ignore-not-found", "--wait=false"], {
        allowFailure: true,
      });
      await rm(variantDir, { recursive: true, force: true });
    }
    await kubectl(["delete", "namespace", namespace, "--ignore-not-found", "--wait=false"]);
  });

  it.each([
    ["list nodes", ["list", "nodes"], true],
    ["watch configs", ["watch", "devicepluginconfigs.dpo.dev"], true],
    ["patch config status", ["patch", "devicepluginconfigs.dpo.dev", "--subresource=status"], true],
    ["create its DaemonSets", ["create", "daemonsets.apps", "-n", "@ns"], true],
    ["delete its ConfigMaps", ["delete", "configmaps", "-n", "@ns"], true],
    ["watch its pods", ["watch", "pods", "-n", "@ns"], true],
    ["delete DeviceNodeStates", ["delete", "devicenodestates.dpo.dev", "-n", "@ns"], true],
    ["update its Lease", ["update", "leases.coordination.k8s.io", "-n", "@ns"], true],
    ["record Events about configs", ["create", "events", "-n", "default"], true],
    ["record events.k8s.io Events", ["create", "events.events.k8s.io", "-n", "default"], true],
    ["bump the count of its Events", ["patch", "events", "-n", "default"], true],
    ["delete Events", ["delete", "events", "-n", "default"], false],
    ["update a config's spec", ["update", "devicepluginconfigs.dpo.dev"], false],
    // The storage-version migration's empty patch; RBAC cannot restrict a patch to `{}`.
    ["patch a config (storage migration)", ["patch", "devicepluginconfigs.dpo.dev"], true],
    ["get its CRD", ["get", `${CRD}/devicepluginconfigs.dpo.dev`], true],
    ["record migration progress on its CRD", ["patch", `${CRD}/devicepluginconfigs.dpo.dev`], true],
    [
      "trim its CRD's storedVersions",
      ["patch", `${CRD}/devicepluginconfigs.dpo.dev`, "--subresource=status"],
      true,
    ],
    ["update its CRD", ["update", `${CRD}/devicepluginconfigs.dpo.dev`], false],
    ["delete its CRD", ["delete", `${CRD}/devicepluginconfigs.dpo.dev`], false],
    ["patch another CRD", ["patch", `${CRD}/devicenodestates.dpo.dev`], false],
    [
      "patch another CRD's status",
      ["patch", `${CRD}/devicenodestates.dpo.dev`, "--subresource=status"],
      false,
    ],
    ["list CRDs", ["list", CRD], false],
    ["create CRDs", ["create", CRD], false],
    ["delete a config", ["delete", "devicepluginconfigs.dpo.dev"], false],
    ["get secrets in its namespace", ["get", "secrets", "-n", "@ns"], false],
    ["list secrets anywhere", ["list", "secrets", "--all-namespaces"], false],
    ["read its webhook Secret", ["get", "secrets/dpo-webhook-cert", "-n", "@ns"], true],
    ["rewrite its webhook Secret", ["update", "secrets/dpo-webhook-cert", "-n", "@ns"], true],
    ["read another Secret", ["get", "secrets/other", "-n", "@ns"], false],
    ["create Secrets", ["create", "secrets", "-n", "@ns"], false],
    ["delete its webhook Secret", ["delete", "secrets/dpo-webhook-cert", "-n", "@ns"], false],
    [
      "read the webhook Secret's namesake elsewhere",
      ["get", "secrets/dpo-webhook-cert", "-n", "default"],
      false,
    ],
    ["create ClusterRoles", ["create", "clusterroles.rbac.authorization.k8s.io"], false],
    ["create RoleBindings", ["create", "rolebindings.rbac.authorization.k8s.io", "-n", "@ns"], false],
    ["exec into pods", ["create", "pods", "--subresource=exec", "-n", "@ns"], false],
    ["create pods", ["create", "pods", "-n", "@ns"], false],
    ["request tokens", ["create", "serviceaccounts", "--subresource=token", "-n", "@ns"], false],
    ["create DaemonSets elsewhere", ["create", "daemonsets.apps", "-n", "default"], false],
    ["take a Lease elsewhere", ["update", "leases.coordination.k8s.io", "-n", "kube-system"], false],
    // Revision labels during an upgrade (ADR 0004); the admission policy dpo-operator-node-labels limits
    // the patch to them (test/integration/operator-node-policy.test.ts).
    ["patch nodes", ["patch", "nodes"], true],
    ["patch node status", ["patch", "nodes", "--subresource=status"], false],
    ["create DeviceClasses", ["create", "deviceclasses.resource.k8s.io"], true],
    ["update DeviceClasses", ["update", "deviceclasses.resource.k8s.io"], true],
    ["delete DeviceClasses", ["delete", "deviceclasses.resource.k8s.io"], true],
    ["watch ResourceSlices", ["watch", "resourceslices.resource.k8s.io"], true],
    ["delete ResourceSlices", ["delete", "resourceslices.resource.k8s.io"], true],
    ["create ResourceSlices", ["create", "resourceslices.resource.k8s.io"], false],
    ["update ResourceSlices", ["update", "resourceslices.resource.k8s.io"], false],
    ["read ResourceClaims", ["get", "resourceclaims.resource.k8s.io", "-n", "default"], false],
  ])("the operator can %s: %j → %s", async (_what, args, expected) => {
    expect(
      await canI(
        namespace,
        operator,
        args.map((a) => (a === "@ns" ? namespace : a)),
      ),
    ).toBe(expected);
  });

  it.each([
    ["create its DeviceNodeState", ["create", "devicenodestates.dpo.dev", "-n", "@ns"], true],
    [
      "patch DeviceNodeState status",
      ["patch", "devicenodestates.dpo.dev", "--subresource=status", "-n", "@ns"],
      true,
    ],
    ["get DeviceNodeStates", ["get", "devicenodestates.dpo.dev", "-n", "@ns"], false],
    ["get a Node", ["get", "nodes"], true],
    ["list nodes", ["list", "nodes"], false],
    ["watch nodes", ["watch", "nodes"], false],
    ["patch nodes", ["patch", "nodes"], false],
    ["read configs", ["get", "devicepluginconfigs.dpo.dev"], false],
    ["delete DeviceNodeStates", ["delete", "devicenodestates.dpo.dev", "-n", "@ns"], false],
    ["get secrets", ["get", "secrets", "-n", "@ns"], false],
    ["read ConfigMaps", ["get", "configmaps", "-n", "@ns"], false],
    ["list pods", ["list", "pods", "-n", "@ns"], false],
    ["create ResourceSlices", ["create", "resourceslices.resource.k8s.io"], true],
    ["update ResourceSlices", ["update", "resourceslices.resource.k8s.io"], true],
    ["patch ResourceSlices", ["patch", "resourceslices.resource.k8s.io"], true],
    ["delete ResourceSlices", ["delete", "resourceslices.resource.k8s.io"], true],
    ["watch ResourceSlices", ["watch", "resourceslices.resource.k8s.io"], true],
    ["deletecollection ResourceSlices", ["deletecollection", "resourceslices.resource.k8s.io"], false],
    ["get a ResourceClaim", ["get", "resourceclaims.resource.k8s.io", "-n", "default"], true],
    ["list ResourceClaims", ["list", "resourceclaims.resource.k8s.io", "-n", "default"], false],
    ["update ResourceClaims", ["update", "resourceclaims.resource.k8s.io", "-n", "default"], false],
    [
      "update ResourceClaim status",
      ["update", "resourceclaims.resource.k8s.io", "--subresource=status", "-n", "default"],
      false,
    ],
    ["write DeviceClasses", ["create", "deviceclasses.resource.k8s.io"], false],
    [
      "write DeviceNodeStates elsewhere",
      ["patch", "devicenodestates.dpo.dev", "--subresource=status", "-n", "default"],
      false,
    ],
  ])("a plugin can %s: %j → %s", async (_what, args, expected) => {
    expect(
      await canI(
        namespace,
        plugin,
        args.map((a) => (a === "@ns" ? namespace : a)),
      ),
    ).toBe(expected);
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
