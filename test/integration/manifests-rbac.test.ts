// config/rbac against a real API server: the rules it lists, and what each ServiceAccount can do once applied
// (only what is listed).
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import type { V1ClusterRole, V1PolicyRule, V1Role } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { kubectl, uniqueName } from "../cluster/helpers.js";
import {
  configDir,
  FIELD_MANAGER,
  render,
  applyConfigCrds,
  waitForCrdsEstablished,
} from "./manifests-support.js";

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
