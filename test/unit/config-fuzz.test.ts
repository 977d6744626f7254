// The config fuzzer's own parts that need no cluster: the generator (replayable, derived from every node
// of both schemas, valid where it says so) and the judges' rules (path spellings, what the API server's
// refusals name, and exactly which differences are allowed).
import { describe, expect, it } from "vitest";
import { validateAnyVersion, type FieldError } from "../../src/api/validate.js";
import { InvalidError, KubeApiError, TransientError } from "../../src/kube/errors.js";
import {
  checkSchemaCoverage,
  generateConfigCase,
  generateConfigCases,
  specSchema,
  type ConfigCase,
  type JsonObject,
} from "../fuzz/config-gen.js";
import {
  judge,
  judgeDpoValidate,
  judgeLoader,
  manifestYaml,
  memberOfMistypedObject,
  normalizeFieldPath,
  offlineOnlyLint,
  refusalPaths,
  sizeUncheckedAroundNonInteger,
  valuesAt,
  type ApiVerdict,
  type DpoVerdict,
} from "../fuzz/config-judges.js";

const SEED = 424242;

describe("config-gen", () => {
  const cases = generateConfigCases(SEED, 400);

  it("knows every pattern and CEL rule of both schemas", () => {
    const { patterns, rules } = checkSchemaCoverage();
    expect(patterns).toBeGreaterThanOrEqual(9);
    expect(rules).toBeGreaterThanOrEqual(20);
  });

  it("replays a case from its seed and index alone", () => {
    expect(generateConfigCase(SEED, 17)).toEqual(cases[17]);
    expect(generateConfigCase(SEED + 1, 17)).not.toEqual(cases[17]);
  });

  it("covers both versions, every backend, v1alpha1 with the conversion annotation, and every kind of mutation", () => {
    const origins = new Set(cases.map((c) => c.origin.replace(/ \(.*$/, "")));
    for (const version of ["v1beta1", "v1alpha1"])
      for (const type of ["Mock", "DevFS", "PCI", "NVIDIA"]) expect(origins).toContain(`${version} ${type}`);
    expect(cases.some((c) => c.origin.includes("with annotation"))).toBe(true);
    const kinds = new Set(cases.flatMap((c) => c.mutations.map((m) => m.replace(/:.*$/, ""))));
    for (const kind of [
      "wrong type",
      "integer out of range",
      "bad enum",
      "pattern mismatch",
      "string too long",
      "string too short",
      "too many items",
      "too few items",
      "missing required",
      "unknown field",
      "CEL rule broken",
      "metadata.name",
      "metadata.annotations[dpo.dev/v1beta1-fields]",
    ]) {
      expect(kinds).toContain(kind);
    }
    const unmutated = cases.filter((c) => c.mutations.length === 0).length;
    expect(unmutated).toBeGreaterThan(cases.length / 5);
    expect(unmutated).toBeLessThan(cases.length / 2);
  });

  it("generates unmutated manifests that dpo validate accepts", () => {
    const refused = cases
      .filter((c) => c.mutations.length === 0)
      .map((c) => ({ c: c.index, r: validateAnyVersion(c.manifest) }))
      .filter(({ r }) => !r.ok);
    expect(refused).toEqual([]);
  });

  it("writes manifests as YAML that reads back as the same manifest", () => {
    for (const c of cases.slice(0, 100)) expect(() => manifestYaml(c.manifest)).not.toThrow();
  });
});

describe("normalizeFieldPath", () => {
  it.each([
    ["spec.sharing.replicas", "spec.sharing.replicas"],
    [".spec.sharing.replicas", "spec.sharing.replicas"],
    ["spec.sharing.replicas: Invalid value: 3: must be unset", "spec.sharing.replicas"],
    ["spec.tolerations[0].value: Too long: may not be more than 63 bytes", "spec.tolerations[0].value"],
    ["spec.backend.mock: Required value", "spec.backend.mock"],
    ["spec.nodeSelector.feature.example/foo", "spec.nodeSelector.feature.example/foo"],
    ["  spec.x  ", "spec.x"],
    ["<nil>", undefined],
    ["", undefined],
  ])("%j → %j", (raw, want) => {
    expect(normalizeFieldPath(raw)).toBe(want);
  });
});

describe("refusalPaths", () => {
  it.each<{
    what: string;
    error: KubeApiError;
    paths: string[];
    unknownFields?: string[];
    tooMany?: string[];
  }>([
    {
      what: "schema and CEL causes, without the note that CEL was skipped",
      error: new InvalidError("is invalid", {
        code: 422,
        causes: [
          { field: "spec.tolerations", reason: "FieldValueTooMany" },
          { field: "spec.sharing.replicas", reason: "FieldValueInvalid" },
          { field: "<nil>", reason: "FieldValueInvalid" },
        ],
      }),
      paths: ["spec.tolerations", "spec.sharing.replicas"],
      tooMany: ["spec.tolerations"],
    },
    {
      what: "unknown fields from strict decoding",
      error: new KubeApiError(
        'DevicePluginConfig in version "v1beta1" cannot be handled as a DevicePluginConfig: strict decoding error: unknown field "spec.foo", unknown field "spec.image.a"',
        { code: 400 },
      ),
      paths: ["spec.foo", "spec.image.a"],
      unknownFields: ["spec.foo", "spec.image.a"],
    },
    {
      what: "the conversion webhook's problem",
      error: new TransientError(
        "Internal error occurred: conversion webhook for dpo.dev/v1alpha1, Kind=DevicePluginConfig failed: DevicePluginConfig x (objects[0], dpo.dev/v1alpha1): metadata.annotations[dpo.dev/v1beta1-fields]: restores an invalid spec.cdi.kind: must be a CDI kind",
        { code: 500 },
      ),
      paths: ["metadata.annotations[dpo.dev/v1beta1-fields]"],
    },
  ])("$what", ({ error, paths, unknownFields = [], tooMany = [] }) => {
    expect(refusalPaths(error)).toEqual({ paths, unknownFields, tooMany });
  });
});

function caseOf(manifest: JsonObject, mutated = true): ConfigCase {
  return {
    seed: 1,
    index: 0,
    version: "v1beta1",
    manifest,
    origin: "test",
    mutations: mutated ? ["test"] : [],
  };
}

const MANIFEST: JsonObject = {
  apiVersion: "dpo.dev/v1beta1",
  kind: "DevicePluginConfig",
  metadata: { name: "x" },
  spec: {
    resourceName: "vendor.example/x",
    backend: { type: "Mock", mock: { devices: 1 } },
    plugin: { image: { a: 1 } },
    nodeSelector: { "feature.example/a.b": { c: 1 } },
  },
};

const refused = (...errors: [string, string][]): DpoVerdict => ({
  accepted: false,
  errors: errors.map(([path, message]) => ({ path, message })),
});
const apiRefused = (paths: string[], extra: Partial<ApiVerdict> = {}): ApiVerdict => ({
  accepted: false,
  paths,
  unknownFields: [],
  tooMany: [],
  message: "refused",
  ...extra,
});
const ACCEPTED_API: ApiVerdict = { accepted: true, paths: [], unknownFields: [], tooMany: [], message: "" };
const LOST = "metadata.annotations[dpo.dev/v1beta1-fields]";

describe("judge", () => {
  it.each<{
    what: string;
    dpo: DpoVerdict;
    api: ApiVerdict;
    unmutated?: boolean;
    agree: boolean;
    outcome?: string;
  }>([
    {
      what: "both refuse at the same field",
      dpo: refused(["spec.sharing.replicas", "m"]),
      api: apiRefused(["spec.sharing.replicas"]),
      agree: true,
    },
    {
      what: "the API server names fewer fields (it stopped early)",
      dpo: refused(["spec.a", "m"], ["spec.b", "m"]),
      api: apiRefused(["spec.b"]),
      agree: true,
    },
    {
      what: "the API server names a field dpo validate does not",
      dpo: refused(["spec.a", "m"]),
      api: apiRefused(["spec.a", "spec.b"]),
      agree: false,
    },
    {
      what: "the API server names no field",
      dpo: refused(["spec.a", "m"]),
      api: apiRefused([]),
      agree: false,
    },
    { what: "dpo validate refuses alone", dpo: refused(["spec.a", "m"]), api: ACCEPTED_API, agree: false },
    {
      what: "the API server refuses alone",
      dpo: { accepted: true, errors: [] },
      api: apiRefused(["spec.a"]),
      agree: false,
    },
    {
      what: "an unknown field inside an object given for a string",
      dpo: refused(["spec.plugin.image", "must be a string"]),
      api: apiRefused(["spec.plugin.image.a"], { unknownFields: ["spec.plugin.image.a"] }),
      agree: true,
    },
    {
      what: "an unknown field inside an object given for a map value whose key holds dots",
      dpo: refused(["spec.nodeSelector.feature.example/a.b", "must be a string"]),
      api: apiRefused(["spec.nodeSelector.feature.example/a.b.c"], {
        unknownFields: ["spec.nodeSelector.feature.example/a.b.c"],
      }),
      agree: true,
    },
    {
      what: "an unknown field under a field dpo validate names for another reason",
      dpo: refused(["spec.backend", "must not be set"]),
      api: apiRefused(["spec.backend.bogus"], { unknownFields: ["spec.backend.bogus"] }),
      agree: false,
    },
    {
      what: "a list too long with a non-integer number inside",
      dpo: refused(["spec.tolerations[47].tolerationSeconds", "must be an integer"]),
      api: apiRefused(["spec.tolerations", "spec.tolerations[47].tolerationSeconds"], {
        tooMany: ["spec.tolerations"],
      }),
      agree: true,
    },
    {
      what: "a list too long that dpo validate does not measure otherwise",
      dpo: refused(["spec.tolerations[3].operator", "must be one of Exists, Equal"]),
      api: apiRefused(["spec.tolerations", "spec.tolerations[3].operator"], {
        tooMany: ["spec.tolerations"],
      }),
      agree: false,
    },
    {
      what: "dpo validate's offline lint of a stale annotation",
      dpo: refused([LOST, "would set spec.x, but it contradicts the v1alpha1 fields; remove it"]),
      api: ACCEPTED_API,
      agree: true,
      outcome: "offline-only",
    },
    {
      what: "an unmutated case refused by both",
      dpo: refused(["spec.a", "m"]),
      api: apiRefused(["spec.a"]),
      unmutated: true,
      agree: false,
    },
  ])("$what", ({ dpo, api, unmutated, agree, outcome }) => {
    const j = judge(
      caseOf(MANIFEST, !unmutated),
      dpo,
      api,
      api.accepted ? { accepted: true, problems: [] } : undefined,
    );
    expect(j.disagreements.length === 0, j.disagreements.join("\n")).toBe(agree);
    if (outcome) expect(j.outcome).toBe(outcome);
  });

  it("takes an accepted manifest only with a loader that reads it as dpo validate does", () => {
    const dpo: DpoVerdict = { accepted: true, errors: [] };
    expect(judge(caseOf(MANIFEST), dpo, ACCEPTED_API).disagreements).toEqual([
      "no loader verdict for an accepted manifest",
    ]);
    expect(
      judge(caseOf(MANIFEST), dpo, ACCEPTED_API, { accepted: false, problems: ["p"] }).disagreements,
    ).toEqual(["p"]);
  });
});

describe("the allowed differences are exact", () => {
  it.each<[string, FieldError[], boolean]>([
    [
      "a contradicting field",
      [{ path: LOST, message: "would set spec.x, but it contradicts the v1alpha1 fields; remove it" }],
      true,
    ],
    [
      "a rewritten annotation",
      [{ path: LOST, message: "is not what a conversion writes for this object: expected '{}'" }],
      true,
    ],
    ["an invalid restored field", [{ path: LOST, message: "restores an invalid spec.cdi.kind: bad" }], false],
    [
      "lint beside another problem",
      [
        { path: LOST, message: "is not what a conversion writes for this object: expected '{}'" },
        { path: "spec.a", message: "m" },
      ],
      false,
    ],
    ["nothing", [], false],
  ])("offline-only lint: %s", (_what, errors, want) => {
    expect(offlineOnlyLint(errors)).toBe(want);
  });

  it("matches an unknown field only inside an object given where the schema wants no object", () => {
    const spec = specSchema("v1beta1");
    const typeError = [{ path: "spec.plugin.image", message: "must be a string" }];
    expect(memberOfMistypedObject("spec.plugin.image.a", typeError, MANIFEST, spec)).toBe(true);
    expect(memberOfMistypedObject("spec.plugin.imageX", typeError, MANIFEST, spec)).toBe(false);
    const backend = [{ path: "spec.backend", message: "x" }];
    expect(memberOfMistypedObject("spec.backend.bogus", backend, MANIFEST, spec)).toBe(false);
    expect(valuesAt(MANIFEST, spec, "spec.nodeSelector.feature.example/a.b").map((v) => v.value)).toEqual([
      { c: 1 },
    ]);
  });

  it("matches a list too long only by a non-integer number inside it", () => {
    const error = (path: string, message: string): FieldError[] => [{ path, message }];
    const nonInteger = "must be an integer";
    expect(
      sizeUncheckedAroundNonInteger(
        "spec.tolerations",
        error("spec.tolerations[3].tolerationSeconds", nonInteger),
      ),
    ).toBe(true);
    expect(
      sizeUncheckedAroundNonInteger("spec.tolerations", error("spec.tolerationsX[3].a", nonInteger)),
    ).toBe(false);
    expect(
      sizeUncheckedAroundNonInteger(
        "spec.tolerations",
        error("spec.tolerations[3].key", "must be at most 316 characters"),
      ),
    ).toBe(false);
  });
});

describe("judgeLoader", () => {
  const stored = {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: "x", uid: "u" },
    spec: { resourceName: "vendor.example/x", backend: { type: "Mock", mock: { devices: 2 } } },
  };

  it("accepts what the operator renders and reads the spec dpo validate gives it", () => {
    const dpo = judgeDpoValidate(manifestYaml(stored));
    expect(judgeLoader(stored, dpo.betaSpec)).toEqual({ accepted: true, problems: [] });
  });

  it("says when the spec differs from dpo validate's", () => {
    const dpo = judgeDpoValidate(
      manifestYaml({ ...stored, spec: { ...stored.spec, topology: { allocationPolicy: "Packed" } } }),
    );
    expect(judgeLoader(stored, dpo.betaSpec).problems).toEqual([
      expect.stringContaining('spec.topology.allocationPolicy: "None" vs "Packed"') as string,
    ]);
  });

  it("says when the operator refuses the stored object", () => {
    const bad = { ...stored, spec: { ...stored.spec, backend: { type: "Mock", mock: { devices: 0 } } } };
    expect(judgeLoader(bad, undefined)).toEqual({
      accepted: false,
      problems: [
        expect.stringMatching(/^the operator refuses the stored object: spec.backend.mock.devices/) as string,
      ],
    });
  });
});
