// spec.nodeSelectorTerm and spec.priority: the operator/values combinations the API server accepts for node
// affinity, each refusal naming its field; the CRD carries the same rules as CEL with the same sentences.
import { describe, expect, it } from "vitest";
import { validateAnyVersion, type FieldError } from "../../../src/api/validate.js";
import { NodeSelectorRequirementSchema } from "../../../src/api/v1beta1/targeting.js";

type Manifest = Record<string, unknown>;

const beta = (spec: Manifest): Manifest => ({
  apiVersion: "dpo.dev/v1beta1",
  kind: "DevicePluginConfig",
  metadata: { name: "x" },
  spec: { resourceName: "vendor.example/x", backend: { type: "Mock", mock: { devices: 1 } }, ...spec },
});

const term = (...matchExpressions: Manifest[]) => beta({ nodeSelectorTerm: { matchExpressions } });

function errorsOf(manifest: Manifest): FieldError[] {
  const r = validateAnyVersion(manifest);
  return r.ok ? [] : r.errors;
}

const PATH = "spec.nodeSelectorTerm.matchExpressions[0].values";

describe("spec.nodeSelectorTerm", () => {
  it.each<{ what: string; manifest: Manifest; errors: FieldError[] }>([
    { what: "In with values", manifest: term({ key: "pool", operator: "In", values: ["a"] }), errors: [] },
    {
      what: "NotIn with values",
      manifest: term({ key: "pool", operator: "NotIn", values: ["a", "b"] }),
      errors: [],
    },
    {
      what: "Exists without values",
      manifest: term({ key: "example.com/pool", operator: "Exists" }),
      errors: [],
    },
    {
      what: "DoesNotExist, empty values",
      manifest: term({ key: "pool", operator: "DoesNotExist", values: [] }),
      errors: [],
    },
    {
      what: "Gt with one integer",
      manifest: term({ key: "mem", operator: "Gt", values: ["80"] }),
      errors: [],
    },
    {
      what: "Lt with a negative integer",
      manifest: term({ key: "mem", operator: "Lt", values: ["-1"] }),
      errors: [],
    },
    {
      what: "In without values",
      manifest: term({ key: "pool", operator: "In" }),
      errors: [{ path: PATH, message: "must be non-empty when operator is In or NotIn" }],
    },
    {
      what: "NotIn with an empty list",
      manifest: term({ key: "pool", operator: "NotIn", values: [] }),
      errors: [{ path: PATH, message: "must be non-empty when operator is In or NotIn" }],
    },
    {
      what: "Exists with values",
      manifest: term({ key: "pool", operator: "Exists", values: ["a"] }),
      errors: [{ path: PATH, message: "must be empty when operator is Exists or DoesNotExist" }],
    },
    {
      what: "Gt with two values",
      manifest: term({ key: "mem", operator: "Gt", values: ["1", "2"] }),
      errors: [
        { path: PATH, message: "must be a single integer of at most 18 digits when operator is Gt or Lt" },
      ],
    },
    {
      what: "Lt with no integer",
      manifest: term({ key: "mem", operator: "Lt", values: ["80Gi"] }),
      errors: [
        { path: PATH, message: "must be a single integer of at most 18 digits when operator is Gt or Lt" },
      ],
    },
    {
      what: "Gt beyond 18 digits",
      manifest: term({ key: "mem", operator: "Gt", values: ["1234567890123456789"] }),
      errors: [
        { path: PATH, message: "must be a single integer of at most 18 digits when operator is Gt or Lt" },
      ],
    },
    {
      what: "an unknown operator",
      manifest: term({ key: "pool", operator: "Equals", values: ["a"] }),
      errors: [
        {
          path: "spec.nodeSelectorTerm.matchExpressions[0].operator",
          message: "must be one of In, NotIn, Exists, DoesNotExist, Gt, Lt",
        },
      ],
    },
    {
      what: "a key that is no label key",
      manifest: term({ key: "bad key", operator: "Exists" }),
      errors: [
        {
          path: "spec.nodeSelectorTerm.matchExpressions[0].key",
          message:
            "name 'bad key' must be at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric",
        },
      ],
    },
    {
      what: "a key with a prefix that is no DNS subdomain",
      manifest: term({ key: "Example.com/pool", operator: "Exists" }),
      errors: [
        {
          path: "spec.nodeSelectorTerm.matchExpressions[0].key",
          message: "prefix 'Example.com' must be a lowercase DNS subdomain of at most 253 characters",
        },
      ],
    },
    {
      what: "the second of two expressions names its index",
      manifest: term({ key: "a", operator: "Exists" }, { key: "b", operator: "In" }),
      errors: [
        {
          path: "spec.nodeSelectorTerm.matchExpressions[1].values",
          message: "must be non-empty when operator is In or NotIn",
        },
      ],
    },
  ])("$what", ({ manifest, errors }) => {
    expect(errorsOf(manifest)).toEqual(errors);
  });

  it("the CRD's CEL rules say the same sentences at the same field", () => {
    const rules = (
      NodeSelectorRequirementSchema.meta() as {
        "x-kubernetes-validations": { message: string; fieldPath: string }[];
      }
    )["x-kubernetes-validations"];
    expect(rules.map((r) => [r.fieldPath, r.message])).toEqual([
      [".values", "must be non-empty when operator is In or NotIn"],
      [".values", "must be empty when operator is Exists or DoesNotExist"],
      [".values", "must be a single integer of at most 18 digits when operator is Gt or Lt"],
    ]);
  });
});

describe("spec.priority", () => {
  it.each<{ priority: unknown; errors: FieldError[] }>([
    { priority: 0, errors: [] },
    { priority: -1000, errors: [] },
    { priority: 1000, errors: [] },
    { priority: 1001, errors: [{ path: "spec.priority", message: "must be <= 1000" }] },
    { priority: 1.5, errors: [{ path: "spec.priority", message: "must be an integer" }] },
  ])("$priority", ({ priority, errors }) => {
    expect(errorsOf(beta({ priority }))).toEqual(errors);
  });

  it("defaults to 0", () => {
    const r = validateAnyVersion(beta({}));
    expect(r.ok && (r.value.spec as { priority?: number }).priority).toBe(0);
  });
});
