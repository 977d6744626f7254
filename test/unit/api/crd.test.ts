// The generated CRDs: committed copies are fresh, and the DevicePluginConfig and DeviceNodeState schemas'
// defaults and CEL rules match zod.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import {
  deviceNodeStateCrd,
  devicePluginConfigCrd,
  renderCrdsYamlStream,
  type CustomResourceDefinition,
} from "../../../src/api/crd.js";
import { validateDevicePluginConfig } from "../../../src/api/validate.js";
import { EXTENDED_RESOURCE_NAME_PATTERN } from "../../../src/api/v1beta1/spec.js";
import { runCrdsCommand } from "../../../src/cli/crds.js";
import { GENERATED_DIRS, renderManifestFiles } from "../../../tools/manifests/manifests.js";
import { repoRoot, validDir, rootSchema, specSchema, schemaAt, applyDefaults } from "./crd-support.js";

describe("committed manifests", () => {
  const files = renderManifestFiles();

  it.each([...files.keys()])("%s equals the generated output", (relative) => {
    let committed: string;
    try {
      committed = readFileSync(join(repoRoot, relative), "utf8");
    } catch {
      throw new Error(`${relative} is missing: run make manifests`);
    }
    expect(committed, `${relative} is stale: run make manifests`).toBe(files.get(relative));
  });

  it("has no generated files left over from removed or renamed CRDs", () => {
    const present = GENERATED_DIRS.flatMap((dir) =>
      readdirSync(join(repoRoot, dir))
        .filter((f) => f.endsWith(".yaml"))
        .map((f) => `${dir}/${f}`),
    );
    expect(
      present.filter((f) => !files.has(f)),
      "stale files: run make manifests",
    ).toEqual([]);
  });

  it("dpo crds prints both CRDs as one YAML stream, the same as the committed files", () => {
    let printed = "";
    const sink = { write: (chunk: string) => (printed += chunk) } as unknown as NodeJS.WritableStream;
    expect(runCrdsCommand([], sink)).toBe(0);
    expect(printed).toBe(renderCrdsYamlStream());
    const docs = parseAllDocuments(printed).map((d) =>
      "toJS" in d ? (d.toJS() as CustomResourceDefinition) : undefined,
    );
    expect(docs.map((d) => d?.metadata.name)).toEqual([
      "devicepluginconfigs.dpo.dev",
      "devicenodestates.dpo.dev",
    ]);
    const committed = readFileSync(join(repoRoot, "crds", "dpo.dev_devicepluginconfigs.yaml"), "utf8");
    expect(parseAllDocuments(committed)[0]?.toJS()).toEqual(docs[0]);
  });
});

describe("DevicePluginConfig CRD", () => {
  const crd = devicePluginConfigCrd();
  const spec = specSchema(crd);

  it("is cluster-scoped dpo.dev/v1beta1 with its short name, category and status subresource", () => {
    expect(crd.spec.scope).toBe("Cluster");
    expect(crd.spec.group).toBe("dpo.dev");
    expect(crd.spec.names).toMatchObject({
      kind: "DevicePluginConfig",
      plural: "devicepluginconfigs",
      singular: "devicepluginconfig",
      shortNames: ["dpc"],
      categories: ["devices"],
    });
    expect(crd.spec.versions.map((v) => [v.name, v.served, v.storage])).toEqual([
      ["v1beta1", true, true],
      ["v1alpha1", true, false],
    ]);
    for (const version of crd.spec.versions) expect(version.subresources).toEqual({ status: {} });
  });

  it("converts between its versions through the operator's webhook Service, speaking ConversionReview v1", () => {
    expect(crd.spec.conversion).toEqual({
      strategy: "Webhook",
      webhook: {
        conversionReviewVersions: ["v1"],
        clientConfig: {
          service: { namespace: "dpo-system", name: "dpo-webhook", path: "/convert", port: 443 },
        },
      },
    });
    // The operator fills in the caBundle at run time; a committed one would be stale on every cluster.
    expect(JSON.stringify(crd)).not.toContain("caBundle");
  });

  it("prints the v1alpha1 columns from v1alpha1 field names", () => {
    const columns = crd.spec.versions.find((v) => v.name === "v1alpha1")?.additionalPrinterColumns ?? [];
    expect(columns.map((c) => [c.name.toUpperCase(), c.type, c.jsonPath, c.priority ?? 0])).toEqual([
      ["RESOURCE", "string", ".spec.resourceName", 0],
      ["BACKEND", "string", ".spec.backend", 0],
      ["NODES", "string", ".status.nodes.summary", 0],
      ["DEVICES", "string", ".status.devices.summary", 0],
      ["UNHEALTHY", "integer", ".status.devices.unhealthy", 0],
      ["UPDATED", "string", ".status.upgrade.summary", 0],
      ["READY", "string", '.status.conditions[?(@.type=="Ready")].status', 0],
      ["AGE", "date", ".metadata.creationTimestamp", 0],
      ["ALLOCATED", "integer", ".status.devices.allocated", 1],
      ["SHARED", "integer", ".spec.sharedDevNum", 1],
      ["POLICY", "string", ".spec.preferredAllocationPolicy", 1],
      ["MODE", "string", ".spec.publish", 1],
      ["SERVING", "string", ".status.serving.summary", 1],
      ["REASON", "string", '.status.conditions[?(@.type=="Ready")].reason', 1],
    ]);
  });

  it("serves the v1alpha1 schema generated from its own zod schema, with its CEL rules", () => {
    const alpha = crd.spec.versions.find((v) => v.name === "v1alpha1")?.schema.openAPIV3Schema;
    const alphaSpec = alpha?.properties?.spec;
    expect(alphaSpec?.properties?.backend).toMatchObject({
      type: "string",
      enum: ["Mock", "DevFS", "PCI", "NVIDIA"],
    });
    expect(alphaSpec?.properties?.sharedDevNum).toMatchObject({ type: "integer", minimum: 1, maximum: 1024 });
    expect(alphaSpec?.["x-kubernetes-validations"]?.map((r) => r.fieldPath)).toEqual([
      ".dra.driverName",
      ".takeover",
      ".mock",
      ".mock",
      ".devfs",
      ".devfs",
      ".pci",
      ".pci",
    ]);
    expect(alpha?.properties?.status).toEqual(rootSchema(crd).properties?.status);
  });

  it("prints the columns a user checks first, and more with -o wide", () => {
    const columns = crd.spec.versions[0]?.additionalPrinterColumns ?? [];
    expect(columns.map((c) => [c.name.toUpperCase(), c.type, c.jsonPath, c.priority ?? 0])).toEqual([
      ["RESOURCE", "string", ".spec.resourceName", 0],
      ["BACKEND", "string", ".spec.backend.type", 0],
      ["NODES", "string", ".status.nodes.summary", 0],
      ["DEVICES", "string", ".status.devices.summary", 0],
      ["UNHEALTHY", "integer", ".status.devices.unhealthy", 0],
      ["UPDATED", "string", ".status.upgrade.summary", 0],
      ["READY", "string", '.status.conditions[?(@.type=="Ready")].status', 0],
      ["AGE", "date", ".metadata.creationTimestamp", 0],
      ["ALLOCATED", "integer", ".status.devices.allocated", 1],
      ["SHARING", "string", ".spec.sharing.strategy", 1],
      ["POLICY", "string", ".spec.topology.allocationPolicy", 1],
      ["MODE", "string", ".spec.publish", 1],
      ["SERVING", "string", ".status.serving.summary", 1],
      ["REASON", "string", '.status.conditions[?(@.type=="Ready")].reason', 1],
    ]);
  });

  it.each([
    ["topology.allocationPolicy", "None"],
    ["plugin.priorityClassName", "system-node-critical"],
    ["plugin.logLevel", "info"],
    ["sharing.strategy", "None"],
    ["sharing.failRequestsGreaterThanOne", false],
    ["cdi.enabled", false],
    ["backend.mock.idPrefix", "mock"],
    ["backend.mock.numaNodes", 1],
    ["backend.devFS.root", "/"],
    ["backend.devFS.paths[*].permissions", "rw"],
    ["backend.devFS.paths[*].type", "CharDevice"],
    ["backend.devFS.paths[*].maxContainersPerDevice", 1],
    ["backend.pci.sysfsRoot", "/sys"],
    ["backend.nvidia.nvidiaSmiPath", "/usr/bin/nvidia-smi"],
    ["backend.nvidia.pollIntervalSeconds", 10],
    ["backend.nvidia.ignoredXids", [13, 31, 43, 45, 68, 109]],
    ["tolerations", []],
    ["nodeSelector", {}],
    ["upgrade.strategy", "Auto"],
    ["upgrade.maxUnavailable", 1],
    ["upgrade.progressDeadlineSeconds", 300],
    ["upgrade.paused", false],
    ["upgrade.autoRollback", true],
  ])("defaults spec.%s to %j", (path, value) => {
    expect(schemaAt(spec, path).default).toEqual(value);
  });

  // Found by config fuzzing: the CRD dropped zod's `.int()` bounds, so the API server stored a
  // tolerationSeconds of 2^62 that the operator (JSON.parse) cannot read back exactly and refused.
  it.each([
    ["tolerations[*].tolerationSeconds", -Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
    ["backend.mock.devices", 1, 4096],
    ["upgrade.progressDeadlineSeconds", 10, 86_400],
  ])("bounds spec.%s to the integers JavaScript reads exactly (%d..%d)", (path, minimum, maximum) => {
    expect(schemaAt(spec, path)).toMatchObject({ minimum, maximum });
  });

  it.each(readdirSync(validDir).filter((f) => f.endsWith(".yaml")))(
    "fills in %s exactly as zod does",
    (file) => {
      const manifest = parseAllDocuments(readFileSync(join(validDir, file), "utf8"))[0]?.toJS() as {
        spec: unknown;
      };
      const parsed = validateDevicePluginConfig(manifest);
      if (!parsed.ok) throw new Error(`${file}: ${JSON.stringify(parsed.errors)}`);
      expect(applyDefaults(spec, manifest.spec)).toEqual(parsed.value.spec);
    },
  );

  it("requires the backend member that matches type and forbids the others, at the member's path", () => {
    const rules = schemaAt(spec, "backend")["x-kubernetes-validations"] ?? [];
    expect(rules.map((r) => [r.rule, r.fieldPath, r.reason])).toEqual([
      ["self.type != 'Mock' || has(self.mock)", ".mock", "FieldValueRequired"],
      ["self.type == 'Mock' || !has(self.mock)", ".mock", "FieldValueForbidden"],
      ["self.type != 'DevFS' || has(self.devFS)", ".devFS", "FieldValueRequired"],
      ["self.type == 'DevFS' || !has(self.devFS)", ".devFS", "FieldValueForbidden"],
      ["self.type != 'PCI' || has(self.pci)", ".pci", "FieldValueRequired"],
      ["self.type == 'PCI' || !has(self.pci)", ".pci", "FieldValueForbidden"],
      ["self.type != 'NVIDIA' || has(self.nvidia)", ".nvidia", "FieldValueRequired"],
      ["self.type == 'NVIDIA' || !has(self.nvidia)", ".nvidia", "FieldValueForbidden"],
    ]);
  });

  it("checks replicas against the sharing strategy at spec.sharing.replicas", () => {
    const rules = schemaAt(spec, "sharing")["x-kubernetes-validations"] ?? [];
    expect(rules.map((r) => [r.rule, r.fieldPath])).toEqual([
      ["self.strategy != 'TimeSlicing' || (has(self.replicas) && self.replicas >= 2)", ".replicas"],
      ["self.strategy != 'None' || !has(self.replicas) || self.replicas == 1", ".replicas"],
    ]);
  });

  it("keeps resourceName immutable and outside kubernetes.io", () => {
    const resourceName = schemaAt(spec, "resourceName");
    const rules = (resourceName["x-kubernetes-validations"] ?? []).map((r) => r.rule);
    expect(rules).toContain("self == oldSelf");
    expect(rules).toContain("!self.contains('kubernetes.io/')");
    expect(rules).toContain("!self.startsWith('requests.')");
    expect(resourceName.pattern).toBe(EXTENDED_RESOURCE_NAME_PATTERN);
  });

  it("keys conditions by type so several writers can own them with server-side apply", () => {
    const status = rootSchema(crd).properties?.status;
    const conditions = status?.properties?.conditions;
    expect(conditions?.["x-kubernetes-list-type"]).toBe("map");
    expect(conditions?.["x-kubernetes-list-map-keys"]).toEqual(["type"]);
  });
});

describe("DeviceNodeState CRD", () => {
  const crd = deviceNodeStateCrd();

  it("is namespaced with its short name, category, status subresource and columns", () => {
    expect(crd.spec.scope).toBe("Namespaced");
    expect(crd.spec.names).toMatchObject({
      kind: "DeviceNodeState",
      plural: "devicenodestates",
      shortNames: ["dnstate"],
      categories: ["devices"],
    });
    expect(crd.spec.versions[0]?.subresources).toEqual({ status: {} });
    const columns = crd.spec.versions[0]?.additionalPrinterColumns ?? [];
    expect(columns.map((c) => [c.name.toUpperCase(), c.jsonPath])).toEqual([
      ["CONFIG", ".spec.configName"],
      ["NODE", ".spec.nodeName"],
      ["REGISTRATION", ".status.registration.state"],
      ["HEALTHY", ".status.healthy"],
      ["ADVERTISED", ".status.advertised"],
      ["ALLOCATED", ".status.allocated"],
      ["VERSION", ".status.pluginVersion"],
      ["AGE", ".metadata.creationTimestamp"],
    ]);
  });
});
