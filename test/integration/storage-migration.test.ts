// The storage-version migrator on a real API server, with a private two-version CRD per test: every object is
// rewritten (its resourceVersion moves) before storedVersions is trimmed, a recorded progress annotation is
// resumed from, and an object the API server refuses keeps storedVersions as it is until it can be rewritten.
import { randomBytes } from "node:crypto";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { EventRecorder } from "../../src/kube/events.js";
import { kubeRequest } from "../../src/kube/request.js";
import {
  compareKeys,
  formatProgress,
  objectKey,
  STORAGE_MIGRATION_ANNOTATION,
} from "../../src/operator/migration/plan.js";
import { migrateStorage } from "../../src/operator/migration/storage-migration.js";
import { kubeConfigFromInjected, kubectl, uniqueName, waitFor } from "../cluster/helpers.js";

const GROUP = "migration.test.dpo.dev";
const FIELD_MANAGER = "dpo-storage-migration-test";
const OBJECTS = 30;
/** Small pages, so a run records progress several times and follows continue tokens. */
const PAGE_SIZE = 7;
const FROZEN_LABEL = "migration.test.dpo.dev/frozen";

const kc = kubeConfigFromInjected();
const logger = pino({ level: process.env["DPO_TEST_LOG"] ?? "silent" });
const events = new EventRecorder(kc, { component: FIELD_MANAGER, instance: "integration-test", logger });
// Two namespaces, so the migrator lists across namespaces and keys sort by namespace first.
const namespaces = [uniqueName("it-migrate-a"), uniqueName("it-migrate-b")].sort(compareKeys);
const createdCrds: string[] = [];
const createdPolicies: string[] = [];

interface TestCrd {
  name: string;
  plural: string;
  kind: string;
}

interface Listed {
  metadata: { name: string; namespace: string; resourceVersion: string; labels?: Record<string, string> };
}

interface CrdObject {
  metadata: { annotations?: Record<string, string> };
  status?: { storedVersions?: string[] };
}

function crdManifest(crd: TestCrd, storage: "v1" | "v2"): object {
  const schema = {
    openAPIV3Schema: {
      type: "object",
      properties: { spec: { type: "object", properties: { value: { type: "integer" } } } },
    },
  };
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: crd.name },
    spec: {
      group: GROUP,
      scope: "Namespaced",
      names: { plural: crd.plural, singular: crd.plural.replace(/s$/, ""), kind: crd.kind },
      // Identical schemas and no conversion: the API server only relabels apiVersion, so a rewrite is
      // visible as a write (new resourceVersion) and nothing else.
      conversion: { strategy: "None" },
      versions: (["v1", "v2"] as const).map((name) => ({
        name,
        served: true,
        storage: name === storage,
        schema,
      })),
    },
  };
}

async function applyCrd(crd: TestCrd, storage: "v1" | "v2"): Promise<void> {
  await kubectl(
    ["apply", "--server-side", "--force-conflicts", `--field-manager=${FIELD_MANAGER}`, "-f", "-"],
    {
      input: stringify(crdManifest(crd, storage)),
    },
  );
}

function readCrd(crd: TestCrd): Promise<CrdObject> {
  return kubeRequest<CrdObject>(kc, {
    method: "GET",
    path: `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.name}`,
  });
}

/** Every object, sorted by key as the migrator walks them. */
async function listObjects(crd: TestCrd): Promise<Listed[]> {
  const list = await kubeRequest<{ items: Listed[] }>(kc, {
    method: "GET",
    path: `/apis/${GROUP}/v2/${crd.plural}`,
  });
  return list.items.sort((a, b) => compareKeys(objectKey(a.metadata), objectKey(b.metadata)));
}

function resourceVersions(objects: Listed[]): Map<string, string> {
  return new Map(objects.map((o) => [objectKey(o.metadata), o.metadata.resourceVersion]));
}

function objectPath(crd: TestCrd, namespace: string, name: string): string {
  return `/apis/${GROUP}/v2/namespaces/${namespace}/${crd.plural}/${name}`;
}

/** The empty merge patch the migrator sends; `dryRun` asks admission without writing. */
function emptyPatch(crd: TestCrd, namespace: string, name: string, dryRun = false): Promise<Listed> {
  return kubeRequest<Listed>(kc, {
    method: "PATCH",
    path: objectPath(crd, namespace, name),
    query: { dryRun: dryRun ? "All" : undefined },
    body: {},
    contentType: "application/merge-patch+json",
  });
}

/**
 * A fresh CRD stored in v1 holding OBJECTS objects, then switched to store v2, so storedVersions is
 * [v1, v2] and every object is still stored as v1. `frozen` (indexes in key order) get FROZEN_LABEL.
 */
async function crdNeedingMigration(frozen: number[] = []): Promise<TestCrd> {
  const suffix = randomBytes(4).toString("hex");
  const crd: TestCrd = {
    plural: `widgets${suffix}s`,
    name: `widgets${suffix}s.${GROUP}`,
    kind: `Widget${suffix}`,
  };
  createdCrds.push(crd.name);
  await applyCrd(crd, "v1");
  await kubectl(["wait", "--for=condition=Established", "--timeout=30s", `crd/${crd.name}`]);

  // Names padded so that key order and creation order agree, which keeps "the 10th key" readable.
  const objects = Array.from({ length: OBJECTS }, (_, i) => ({
    apiVersion: `${GROUP}/v1`,
    kind: crd.kind,
    metadata: {
      namespace: namespaces[i < OBJECTS / 2 ? 0 : 1],
      name: `widget-${String(i).padStart(2, "0")}`,
      ...(frozen.includes(i) ? { labels: { [FROZEN_LABEL]: "true" } } : {}),
    },
    spec: { value: i },
  }));
  const probe = {
    apiVersion: `${GROUP}/v1`,
    kind: crd.kind,
    metadata: { namespace: namespaces[0], name: "probe" },
    spec: { value: -1 },
  };
  // Established comes before the endpoint serves: apply (idempotent) until it is accepted.
  await waitFor(`${crd.plural} served`, async (observe) => {
    const result = await kubectl(["apply", "--server-side", `--field-manager=${FIELD_MANAGER}`, "-f", "-"], {
      input: stringify({ apiVersion: "v1", kind: "List", items: [...objects, probe] }),
      allowFailure: true,
    });
    observe(result.stderr.trim());
    return result.exitCode === 0;
  });

  const probeBefore = await kubeRequest<Listed>(kc, {
    method: "GET",
    path: `/apis/${GROUP}/v1/namespaces/${namespaces[0]}/${crd.plural}/probe`,
  });
  await applyCrd(crd, "v2");
  await waitFor(`${crd.name} storedVersions [v1, v2]`, async (observe) => {
    const stored = (await readCrd(crd)).status?.storedVersions;
    observe(stored);
    return JSON.stringify(stored) === JSON.stringify(["v1", "v2"]);
  });
  // The API server swaps its storage for the CRD a moment after the update; until then an empty patch
  // is a no-op in v1. The probe (stored as v1) getting a new resourceVersion proves v2 is the storage.
  // Meanwhile the new storage answers 429 "storage is (re)initializing", which the wait rides out.
  await waitFor(`${crd.plural} stored as v2`, async (observe) => {
    const after = await emptyPatch(crd, namespaces[0]!, "probe");
    observe(after.metadata.resourceVersion);
    return after.metadata.resourceVersion !== probeBefore.metadata.resourceVersion;
  });
  await waitFor(`${crd.plural} listed from the new storage`, () => listObjects(crd));
  await kubectl(["delete", crd.plural, "probe", "-n", namespaces[0]!, "--wait=true"]);
  return crd;
}

async function eventMessages(crd: TestCrd, reason: string): Promise<string[]> {
  const { stdout } = await kubectl([
    "get",
    "events",
    "-n",
    "default",
    `--field-selector=involvedObject.name=${crd.name},reason=${reason}`,
    "-o",
    "json",
  ]);
  return (JSON.parse(stdout) as { items: { message: string }[] }).items.map((e) => e.message);
}

function migrate(crd: TestCrd) {
  return migrateStorage({ kubeConfig: kc, crdName: crd.name, logger, events, pageSize: PAGE_SIZE });
}

beforeAll(async () => {
  for (const namespace of namespaces) await kubectl(["create", "namespace", namespace]);
});

afterAll(async () => {
  for (const policy of createdPolicies) {
    await kubectl(
      ["delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", policy, "--ignore-not-found"],
      { allowFailure: true },
    );
  }
  for (const crd of createdCrds) {
    await kubectl(["delete", "crd", crd, "--ignore-not-found", "--wait=false"], { allowFailure: true });
    await kubectl(["delete", "events", "-n", "default", `--field-selector=involvedObject.name=${crd}`], {
      allowFailure: true,
    });
  }
  for (const namespace of namespaces) {
    await kubectl(["delete", "namespace", namespace, "--ignore-not-found", "--wait=false"]);
  }
});

describe("migrateStorage on a real API server", () => {
  it("rewrites every object, then trims storedVersions, removes its annotation and records an Event", async () => {
    const crd = await crdNeedingMigration();
    const before = resourceVersions(await listObjects(crd));
    expect(before.size).toBe(OBJECTS);

    const outcome = await migrate(crd);

    expect(outcome).toMatchObject({
      state: "Migrated",
      storageVersion: "v2",
      from: ["v1"],
      objects: OBJECTS,
    });
    const after = resourceVersions(await listObjects(crd));
    for (const [key, rv] of before) expect(after.get(key), key).not.toBe(rv);
    const stored = await readCrd(crd);
    expect(stored.status?.storedVersions).toEqual(["v2"]);
    expect(stored.metadata.annotations?.[STORAGE_MIGRATION_ANNOTATION]).toBeUndefined();
    const messages = await waitFor("a StorageMigrated Event", async () => {
      const found = await eventMessages(crd, "StorageMigrated");
      return found.length > 0 ? found : undefined;
    });
    expect(messages).toEqual([`rewrote ${OBJECTS} objects from v1 to v2; storedVersions is now [v2]`]);

    // Once stored as v2, the same empty patch writes nothing: the new resourceVersions were the rewrite.
    const first = [...after.keys()][0]!.split("/");
    expect((await emptyPatch(crd, first[0]!, first[1]!)).metadata.resourceVersion).toBe(
      after.get(first.join("/")),
    );

    // A second run finds nothing to do and writes nothing.
    expect(await migrate(crd)).toEqual({ state: "UpToDate" });
    expect(resourceVersions(await listObjects(crd))).toEqual(after);
  });

  it("resumes after the last key the progress annotation names, skipping the objects before it", async () => {
    const crd = await crdNeedingMigration();
    const objects = await listObjects(crd);
    const before = resourceVersions(objects);
    const tenth = objectKey(objects[9]!.metadata);
    const progress = { storageVersion: "v2", storedVersions: ["v1", "v2"], lastKey: tenth, count: 10 };
    await kubectl([
      "annotate",
      "crd",
      crd.name,
      `${STORAGE_MIGRATION_ANNOTATION}=${formatProgress(progress)}`,
    ]);

    const outcome = await migrate(crd);

    expect(outcome).toMatchObject({ state: "Migrated", objects: OBJECTS });
    const after = resourceVersions(await listObjects(crd));
    const keys = [...before.keys()];
    for (const key of keys.slice(0, 10)) expect(after.get(key), `${key} skipped`).toBe(before.get(key));
    for (const key of keys.slice(10)) expect(after.get(key), `${key} rewritten`).not.toBe(before.get(key));
    const stored = await readCrd(crd);
    expect(stored.status?.storedVersions).toEqual(["v2"]);
    expect(stored.metadata.annotations?.[STORAGE_MIGRATION_ANNOTATION]).toBeUndefined();
  });

  it.each([
    {
      what: "progress recorded for another migration",
      annotation: formatProgress({
        storageVersion: "v1",
        storedVersions: ["v1"],
        lastKey: "zzz/zzz",
        count: 99,
      }),
    },
    { what: "unreadable progress", annotation: '{"lastKey": "zzz/zzz"' },
  ])("starts from the first object despite $what", async ({ annotation }) => {
    const crd = await crdNeedingMigration();
    const before = resourceVersions(await listObjects(crd));
    await kubectl(["annotate", "crd", crd.name, `${STORAGE_MIGRATION_ANNOTATION}=${annotation}`]);
    expect(await migrate(crd)).toMatchObject({ state: "Migrated", objects: OBJECTS });
    const after = resourceVersions(await listObjects(crd));
    for (const [key, rv] of before) expect(after.get(key), key).not.toBe(rv);
  });

  it("stops between objects when its signal aborts, leaving progress for the next run", async () => {
    const crd = await crdNeedingMigration();
    const keys = [...resourceVersions(await listObjects(crd)).keys()];
    const abort = new AbortController();
    // Abort as the first page's progress line is logged: the run stops before the second page.
    const abortingLogger = pino(
      { level: "info" },
      {
        write(line: string) {
          if (line.includes("storage migration progress")) abort.abort();
        },
      },
    );

    const stopped = await migrateStorage({
      kubeConfig: kc,
      crdName: crd.name,
      logger: abortingLogger,
      signal: abort.signal,
      pageSize: PAGE_SIZE,
    });

    expect(stopped).toMatchObject({ state: "Aborted", lastKey: keys[PAGE_SIZE - 1], objects: PAGE_SIZE });
    const afterStop = await readCrd(crd);
    expect(afterStop.status?.storedVersions).toEqual(["v1", "v2"]);
    expect(JSON.parse(afterStop.metadata.annotations?.[STORAGE_MIGRATION_ANNOTATION] ?? "{}")).toEqual({
      storageVersion: "v2",
      storedVersions: ["v1", "v2"],
      lastKey: keys[PAGE_SIZE - 1],
      count: PAGE_SIZE,
    });

    expect(await migrate(crd)).toMatchObject({ state: "Migrated", objects: OBJECTS });
    expect((await readCrd(crd)).status?.storedVersions).toEqual(["v2"]);
  });

  it("leaves storedVersions alone while an object cannot be rewritten, and trims it once it can", async () => {
    const frozenIndex = 11;
    const crd = await crdNeedingMigration([frozenIndex]);
    const objects = await listObjects(crd);
    const frozen = objects[frozenIndex]!.metadata;
    expect(frozen.labels?.[FROZEN_LABEL]).toBe("true");
    const frozenKey = objectKey(frozen);
    const before = resourceVersions(objects);

    // A ValidatingAdmissionPolicy refusing every update of the labelled object, the empty patch included.
    const policy = `${crd.plural}-freeze`;
    createdPolicies.push(policy);
    await kubectl(["apply", "--server-side", `--field-manager=${FIELD_MANAGER}`, "-f", "-"], {
      input: [
        {
          apiVersion: "admissionregistration.k8s.io/v1",
          kind: "ValidatingAdmissionPolicy",
          metadata: { name: policy },
          spec: {
            failurePolicy: "Fail",
            matchConstraints: {
              resourceRules: [
                { apiGroups: [GROUP], apiVersions: ["*"], operations: ["UPDATE"], resources: [crd.plural] },
              ],
            },
            validations: [
              {
                expression: `!has(object.metadata.labels) || !('${FROZEN_LABEL}' in object.metadata.labels)`,
                message: "frozen by the storage migration test",
              },
            ],
          },
        },
        {
          apiVersion: "admissionregistration.k8s.io/v1",
          kind: "ValidatingAdmissionPolicyBinding",
          metadata: { name: policy },
          spec: { policyName: policy, validationActions: ["Deny"] },
        },
      ]
        .map((doc) => stringify(doc))
        .join("---\n"),
    });
    // Policies take effect a moment after they are created: wait until a dry run is refused.
    await waitFor("the policy refusing the frozen object", async (observe) => {
      try {
        await emptyPatch(crd, frozen.namespace, frozen.name, true);
        observe("admitted");
        return false;
      } catch (err) {
        observe(String(err));
        return String(err).includes("frozen by the storage migration test");
      }
    });

    const failed = await migrate(crd);

    expect(failed).toMatchObject({ state: "Failed", storageVersion: "v2" });
    if (failed.state !== "Failed") throw new Error("unreachable");
    expect(failed.failures.map((f) => f.key)).toEqual([frozenKey]);
    expect(failed.failures[0]?.message).toContain("frozen by the storage migration test");
    const afterFailure = await readCrd(crd);
    expect(afterFailure.status?.storedVersions).toEqual(["v1", "v2"]);
    // Progress stops before the refused object, so the next run tries it again.
    expect(
      JSON.parse(afterFailure.metadata.annotations?.[STORAGE_MIGRATION_ANNOTATION] ?? "{}"),
    ).toMatchObject({
      lastKey: objectKey(objects[frozenIndex - 1]!.metadata),
      count: frozenIndex,
    });
    const afterFirst = resourceVersions(await listObjects(crd));
    expect(afterFirst.get(frozenKey)).toBe(before.get(frozenKey));
    for (const [key, rv] of before) if (key !== frozenKey) expect(afterFirst.get(key), key).not.toBe(rv);
    const warnings = await waitFor("a StorageMigrationFailed Event", async () => {
      const found = await eventMessages(crd, "StorageMigrationFailed");
      return found.length > 0 ? found : undefined;
    });
    expect(warnings[0]).toContain(frozenKey);

    await kubectl(["delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", policy]);
    await waitFor("the policy gone", async (observe) => {
      try {
        await emptyPatch(crd, frozen.namespace, frozen.name, true);
        return true;
      } catch (err) {
        observe(String(err));
        return false;
      }
    });

    const retried = await migrate(crd);

    expect(retried).toMatchObject({ state: "Migrated", objects: OBJECTS });
    expect(resourceVersions(await listObjects(crd)).get(frozenKey)).not.toBe(before.get(frozenKey));
    const done = await readCrd(crd);
    expect(done.status?.storedVersions).toEqual(["v2"]);
    expect(done.metadata.annotations?.[STORAGE_MIGRATION_ANNOTATION]).toBeUndefined();
  });
});
