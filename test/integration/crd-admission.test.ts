// The generated CRDs on a real API server: the invalid corpus refused at the field path `dpo validate` names, valid manifests defaulted as zod does.
import { CoreV1Api } from "@kubernetes/client-node";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { toV1beta1, type AlphaObject } from "../../src/api/conversion/convert.js";
import { validateDevicePluginConfig } from "../../src/api/validate.js";
import { serveConversionFromTest, type TestConversionWebhook } from "../cluster/conversion-webhook.js";
import {
  kubeConfigFromInjected,
  kubectl,
  uniqueName,
  waitFor,
  type KubectlResult,
  installCrds,
} from "../cluster/helpers.js";

const repoRoot = join(import.meta.dirname, "..", "..");
const crdDir = join(repoRoot, "crds");
const invalidDir = join(repoRoot, "test", "fixtures", "invalid");
const validDir = join(repoRoot, "test", "fixtures", "valid");
const validAlphaDir = join(repoRoot, "test", "fixtures", "valid-v1alpha1");
/**
 * Both versions are served. One v1alpha1 fixture is for `dpo validate` only: a conversion annotation that
 * contradicts the v1alpha1 fields is what every edit through v1alpha1 leaves behind (the annotation was
 * written by the last down-conversion), so the webhook skips the contradicted fields with a warning
 * instead of refusing the edit; `dpo validate` flags it so a repository can be cleaned up.
 */
const SERVED_API_VERSIONS = ["dpo.dev/v1beta1", "dpo.dev/v1alpha1"];
const OFFLINE_ONLY = new Set(["v1alpha1-annotation-stale.yaml"]);
const invalidFiles = readdirSync(invalidDir)
  .filter((f) => f.endsWith(".yaml"))
  .filter((f) => !OFFLINE_ONLY.has(f))
  .filter((f) =>
    SERVED_API_VERSIONS.includes((parse(readFileSync(join(invalidDir, f), "utf8")) as Manifest).apiVersion),
  );
const validFiles = readdirSync(validDir).filter((f) => f.endsWith(".yaml"));
const validAlphaFiles = readdirSync(validAlphaDir).filter((f) => f.endsWith(".yaml"));
const FIELD_MANAGER = "dpo-crd-admission-test";

const kubeconfig = kubeConfigFromInjected();
const core = kubeconfig.makeApiClient(CoreV1Api);

interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  spec: Record<string, unknown>;
  status?: Record<string, unknown>;
}

/** Every object this file creates, deleted at the end so a reused cluster stays clean. */
const createdConfigs = new Set<string>();
let webhook: TestConversionWebhook | undefined;
const namespace = uniqueName("it-crd");

/** A fixture under a fresh name: names are cluster-wide for DevicePluginConfig, and clusters may be reused. */
function fixture(dir: string, file: string): Manifest {
  const manifest = parse(readFileSync(join(dir, file), "utf8")) as Manifest;
  manifest.metadata.name = uniqueName(file.replace(/\.yaml$/, ""));
  return manifest;
}

function expectedPath(file: string): string {
  const match = /^# expect-path: (.+)$/m.exec(readFileSync(join(invalidDir, file), "utf8"));
  if (!match?.[1]) throw new Error(`${file} has no '# expect-path:' line`);
  return match[1].trim();
}

/** Server-side apply with the default (Strict) field validation, the way GitOps tools and users apply. */
function serverSideApply(manifest: object, extraArgs: string[] = []): Promise<KubectlResult> {
  return kubectl(["apply", "--server-side", `--field-manager=${FIELD_MANAGER}`, ...extraArgs, "-f", "-"], {
    input: stringify(manifest),
    allowFailure: true,
  });
}

/** A plain create with fieldValidation=Strict, the path typed clients (and the operator's tests) take. */
function strictCreate(manifest: Manifest): Promise<KubectlResult> {
  return kubectl(["create", "--validate=strict", "-f", "-"], {
    input: stringify(manifest),
    allowFailure: true,
  });
}

async function readConfig(name: string): Promise<Manifest> {
  const { stdout } = await kubectl(["get", "devicepluginconfigs.dpo.dev", name, "-o", "json"]);
  return JSON.parse(stdout) as Manifest;
}

beforeAll(async () => {
  const crdFiles = readdirSync(crdDir).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml");
  expect(crdFiles).toHaveLength(2);
  await installCrds(FIELD_MANAGER);
  // v1alpha1 objects are stored as v1beta1: creating one goes through the conversion webhook.
  webhook = await serveConversionFromTest();
  // Established comes before the endpoint serves; a dry run proves requests reach the new schema.
  const probe = fixture(validDir, "mock-basic.yaml");
  await waitFor("DevicePluginConfig endpoint serving", async (observe) => {
    const result = await serverSideApply(probe, ["--dry-run=server"]);
    observe(result.stderr.trim());
    return result.exitCode === 0;
  });
  await core.createNamespace({ body: { metadata: { name: namespace } } });
});

afterAll(async () => {
  if (createdConfigs.size > 0) {
    await kubectl(["delete", "devicepluginconfigs.dpo.dev", "--ignore-not-found", ...createdConfigs]);
  }
  await webhook?.stop();
  await core.deleteNamespace({ name: namespace }).catch(() => undefined);
});

describe("invalid manifests are refused by the API server with the field path dpo validate names", () => {
  it("has a corpus to apply, in both versions", () => {
    expect(invalidFiles.length).toBeGreaterThanOrEqual(20);
    const alpha = invalidFiles.filter((f) => fixture(invalidDir, f).apiVersion === "dpo.dev/v1alpha1");
    expect(alpha.length).toBeGreaterThanOrEqual(10);
  });

  it.each(invalidFiles)("server-side apply refuses %s", async (file) => {
    const manifest = fixture(invalidDir, file);
    const result = await serverSideApply(manifest);
    if (result.exitCode === 0) createdConfigs.add(manifest.metadata.name);
    expect(result.exitCode, `accepted: ${result.stdout}`).not.toBe(0);
    expect(result.stderr, "the API server's message names the field").toContain(expectedPath(file));
  });

  it.each(invalidFiles)("create with strict field validation refuses %s", async (file) => {
    const manifest = fixture(invalidDir, file);
    const result = await strictCreate(manifest);
    if (result.exitCode === 0) createdConfigs.add(manifest.metadata.name);
    expect(result.exitCode, `accepted: ${result.stdout}`).not.toBe(0);
    expect(result.stderr, "the API server's message names the field").toContain(expectedPath(file));
  });
});

describe("valid manifests", () => {
  it.each(validFiles)("%s is accepted and stored with the same defaults zod applies", async (file) => {
    const manifest = fixture(validDir, file);
    const result = await serverSideApply(manifest);
    expect(result.exitCode, result.stderr).toBe(0);
    createdConfigs.add(manifest.metadata.name);

    const parsed = validateDevicePluginConfig(manifest);
    if (!parsed.ok) throw new Error(`${file} is invalid offline: ${JSON.stringify(parsed.errors)}`);
    const stored = await readConfig(manifest.metadata.name);
    expect(stored.spec).toEqual(parsed.value.spec);
    expect(stored.spec).toMatchObject({
      plugin: { priorityClassName: "system-node-critical" },
      topology: { allocationPolicy: expect.any(String) as string },
    });
  });

  it.each(validAlphaFiles)(
    "v1alpha1 %s is accepted, stored as v1beta1 with zod's defaults, and reads back unchanged",
    async (file) => {
      const manifest = fixture(validAlphaDir, file);
      const result = await serverSideApply(manifest);
      expect(result.exitCode, result.stderr).toBe(0);
      createdConfigs.add(manifest.metadata.name);

      const converted = toV1beta1(manifest as unknown as AlphaObject);
      if (!converted.ok) throw new Error(converted.error);
      const parsed = validateDevicePluginConfig(converted.value);
      if (!parsed.ok)
        throw new Error(`${file} converts to an invalid object: ${JSON.stringify(parsed.errors)}`);
      expect((await readConfig(manifest.metadata.name)).spec).toEqual(parsed.value.spec);
      // Read in its own version, what the user wrote is there as written (defaults may add to it).
      const { stdout } = await kubectl([
        "get",
        "devicepluginconfigs.v1alpha1.dpo.dev",
        manifest.metadata.name,
        "-o",
        "json",
      ]);
      expect((JSON.parse(stdout) as Manifest).spec).toMatchObject(manifest.spec);
    },
  );

  it("defaults an omitted topology to allocationPolicy None", async () => {
    const manifest = fixture(validDir, "mock-basic.yaml");
    delete manifest.spec.topology;
    expect((await serverSideApply(manifest)).exitCode).toBe(0);
    createdConfigs.add(manifest.metadata.name);
    expect((await readConfig(manifest.metadata.name)).spec.topology).toEqual({ allocationPolicy: "None" });
  });
});

describe("spec.plugin.env", () => {
  it("is a list keyed by name: a name twice is refused by create and by server-side apply", async () => {
    const manifest = fixture(validDir, "mock-plugin-pod.yaml");
    const plugin = manifest.spec.plugin as { env: unknown[] };
    plugin.env = [
      { name: "TZ", value: "UTC" },
      { name: "TZ", value: "CET" },
    ];
    // dpo validate names the repeat's index, as a create does; server-side apply names the list.
    expect(validateDevicePluginConfig(manifest)).toMatchObject({
      ok: false,
      errors: [{ path: "spec.plugin.env[1]", message: "must not repeat the name TZ" }],
    });
    const created = await strictCreate(manifest);
    if (created.exitCode === 0) createdConfigs.add(manifest.metadata.name);
    expect(created.exitCode, `accepted: ${created.stdout}`).not.toBe(0);
    expect(created.stderr).toContain("spec.plugin.env[1]: Duplicate value");
    const applied = await serverSideApply(manifest);
    if (applied.exitCode === 0) createdConfigs.add(manifest.metadata.name);
    expect(applied.exitCode, `accepted: ${applied.stdout}`).not.toBe(0);
    expect(applied.stderr).toContain('.spec.plugin.env: duplicate entries for key [name="TZ"]');
  });

  it("names a repeat beside the items' own errors, and a name's second appearance only, as dpo validate does", async () => {
    const manifest = fixture(validDir, "mock-plugin-pod.yaml");
    const plugin = manifest.spec.plugin as { env: unknown[] };
    plugin.env = [{ name: "TZ" }, { value: "x" }, { name: "TZ" }, { name: "TZ" }];
    expect(validateDevicePluginConfig(manifest)).toMatchObject({
      ok: false,
      errors: [
        { path: "spec.plugin.env[1].name", message: "must be set" },
        { path: "spec.plugin.env[2]", message: "must not repeat the name TZ" },
      ],
    });
    const created = await strictCreate(manifest);
    if (created.exitCode === 0) createdConfigs.add(manifest.metadata.name);
    expect(created.exitCode, `accepted: ${created.stdout}`).not.toBe(0);
    expect(created.stderr).toContain("spec.plugin.env[1].name: Required value");
    expect(created.stderr).toContain("spec.plugin.env[2]: Duplicate value");
    expect(created.stderr).not.toContain("spec.plugin.env[3]");
  });
});

describe("resourceName", () => {
  it("cannot change once created, while the rest of the spec can", async () => {
    const manifest = fixture(validDir, "mock-basic.yaml");
    expect((await serverSideApply(manifest)).exitCode).toBe(0);
    createdConfigs.add(manifest.metadata.name);

    const renamed = structuredClone(manifest);
    renamed.spec.resourceName = "hardware-vendor.example/renamed";
    const refused = await serverSideApply(renamed);
    expect(refused.exitCode).not.toBe(0);
    expect(refused.stderr).toContain("spec.resourceName");
    expect(refused.stderr).toContain("is immutable");

    const repacked = structuredClone(manifest);
    repacked.spec.topology = { allocationPolicy: "Packed" };
    const accepted = await serverSideApply(repacked);
    expect(accepted.exitCode, accepted.stderr).toBe(0);
    const stored = await readConfig(manifest.metadata.name);
    expect(stored.spec).toMatchObject({
      resourceName: manifest.spec.resourceName,
      topology: { allocationPolicy: "Packed" },
    });
  });
});

/** A DeviceNodeState of config example-foo on dpo-node-0 under a fresh name, without status. */
function newReport(): Manifest {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DeviceNodeState",
    metadata: { name: uniqueName("state"), namespace },
    spec: { configName: "example-foo", nodeName: "dpo-node-0", resourceName: "hardware-vendor.example/foo" },
  };
}

describe("printer columns", () => {
  it("kubectl get dpc shows resource, backend, node and device summaries and readiness from the status", async () => {
    const manifest = fixture(validDir, "mock-timeslicing.yaml");
    expect((await serverSideApply(manifest)).exitCode).toBe(0);
    createdConfigs.add(manifest.metadata.name);
    const status = {
      observedGeneration: 1,
      conditions: [
        {
          type: "Ready",
          status: "False",
          reason: "UnhealthyDevices",
          message: "1 node has unhealthy devices",
          lastTransitionTime: "2025-01-01T00:00:00Z",
        },
      ],
      nodes: { desired: 3, ready: 2, updated: 3, summary: "2/3" },
      devices: { capacity: 32, allocatable: 30, unhealthy: 2, allocated: 5, summary: "30/32" },
      upgrade: {
        phase: "Progressing",
        currentRevision: "1a2b3c4d5e",
        updateRevision: "6f7a8b9c0d",
        updated: 1,
        total: 3,
        summary: "1/3",
        inFlight: ["n2"],
      },
    };
    const written = await serverSideApply(
      { apiVersion: manifest.apiVersion, kind: manifest.kind, metadata: manifest.metadata, status },
      ["--subresource=status"],
    );
    expect(written.exitCode, written.stderr).toBe(0);

    const { stdout } = await kubectl(["get", "dpc", manifest.metadata.name, "-o", "wide"]);
    const [header, row] = stdout.trim().split("\n");
    expect(header?.split(/\s+/)).toEqual([
      "NAME",
      "RESOURCE",
      "BACKEND",
      "NODES",
      "DEVICES",
      "UNHEALTHY",
      "UPDATED",
      "READY",
      "AGE",
      "ALLOCATED",
      "SHARING",
      "POLICY",
      "MODE",
      "SERVING",
      "REASON",
    ]);
    const cells = row?.split(/\s+/) ?? [];
    // SERVING is empty (no other config of the resource name), so the row has one cell fewer than the header.
    expect([...cells.slice(0, 8), ...cells.slice(9)]).toEqual([
      manifest.metadata.name,
      "hardware-vendor.example/foo-shared",
      "Mock",
      "2/3",
      "30/32",
      "2",
      "1/3",
      "False",
      "5",
      "TimeSlicing",
      "Packed",
      "DevicePlugin",
      "UnhealthyDevices",
    ]);
  });

  it("kubectl get dnstate shows a node's registration and device counts", async () => {
    const report = newReport();
    const { name } = report.metadata;
    const created = await serverSideApply(report);
    expect(created.exitCode, created.stderr).toBe(0);
    const status = {
      pluginVersion: "0.1.0",
      kubeletAPIVersion: "v1beta1",
      registration: { state: "Registered", since: "2025-01-01T00:00:00Z" },
      advertised: 4,
      healthy: 3,
      allocated: 2,
      devices: [{ id: "foo-0", health: "Unhealthy", since: "2025-01-01T00:00:00Z", replicas: 1 }],
      updateTime: "2025-01-01T00:00:00Z",
    };
    const { spec: _spec, ...identity } = report;
    const written = await serverSideApply({ ...identity, status }, ["--subresource=status"]);
    expect(written.exitCode, written.stderr).toBe(0);

    const { stdout } = await kubectl(["get", "dnstate", "-n", namespace, name]);
    const [header, row] = stdout.trim().split("\n");
    expect(header?.split(/\s+/)).toEqual([
      "NAME",
      "CONFIG",
      "NODE",
      "REGISTRATION",
      "HEALTHY",
      "ADVERTISED",
      "ALLOCATED",
      "VERSION",
      "AGE",
    ]);
    expect(row?.split(/\s+/).slice(0, 8)).toEqual([
      name,
      "example-foo",
      "dpo-node-0",
      "Registered",
      "3",
      "4",
      "2",
      "0.1.0",
    ]);
  });

  it("a report's typed attributes take exactly one member, as the schema says, and keep their types", async () => {
    const report = newReport();
    const { name } = report.metadata;
    expect((await serverSideApply(report)).exitCode).toBe(0);
    const statusWith = (typedAttributes: Record<string, unknown>) => ({
      pluginVersion: "0.1.0",
      kubeletAPIVersion: "v1beta1",
      registration: { state: "Registered", since: "2025-01-01T00:00:00Z" },
      advertised: 1,
      healthy: 1,
      devices: [
        {
          id: "foo-0",
          health: "Healthy",
          since: "2025-01-01T00:00:00Z",
          replicas: 1,
          typedAttributes,
          capacity: { memory: { value: "80Gi" } },
        },
      ],
      updateTime: "2025-01-01T00:00:00Z",
    });
    const { spec: _spec, ...identity } = report;
    const refused = await serverSideApply(
      { ...identity, status: statusWith({ model: { string: "X100", int: 1 } }) },
      ["--subresource=status"],
    );
    expect(refused.exitCode).not.toBe(0);
    expect(refused.stderr).toContain("status.devices[0].typedAttributes[model]");
    expect(refused.stderr).toContain("must set exactly one of int, bool, string, version");
    const typed = {
      model: { string: "X100" },
      numaNode: { int: 1 },
      mig: { bool: false },
      driver: { version: "550.54.15" },
    };
    const written = await serverSideApply({ ...identity, status: statusWith(typed) }, [
      "--subresource=status",
    ]);
    expect(written.exitCode, written.stderr).toBe(0);
    const { stdout } = await kubectl(["get", "dnstate", "-n", namespace, name, "-o", "json"]);
    const device = (JSON.parse(stdout) as { status: { devices: Record<string, unknown>[] } }).status
      .devices[0];
    expect(device?.typedAttributes).toEqual(typed);
    expect(device?.capacity).toEqual({ memory: { value: "80Gi" } });
  });
});
