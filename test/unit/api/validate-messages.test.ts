// The sentences dpo validate gives for each kind of bad input: the CRD's CEL wording ("must be ...") with
// the field path, never zod's own ("Invalid option: expected one of ...", "Too small: ...").
import { describe, expect, it } from "vitest";
import { celStyleMessage } from "../../../src/api/issue-messages.js";
import { validateAnyVersion, type FieldError } from "../../../src/api/validate.js";

type Manifest = Record<string, unknown>;

const beta = (spec: Manifest, top: Manifest = {}): Manifest => ({
  apiVersion: "dpo.dev/v1beta1",
  kind: "DevicePluginConfig",
  metadata: { name: "x" },
  spec: { resourceName: "vendor.example/x", backend: { type: "Mock", mock: { devices: 1 } }, ...spec },
  ...top,
});

const alpha = (spec: Manifest): Manifest => ({
  apiVersion: "dpo.dev/v1alpha1",
  kind: "DevicePluginConfig",
  metadata: { name: "x" },
  spec: { resourceName: "vendor.example/x", backend: "Mock", mock: { devices: 1 }, ...spec },
});

function errorsOf(manifest: Manifest): FieldError[] {
  const r = validateAnyVersion(manifest);
  return r.ok ? [] : r.errors;
}

describe("dpo validate's sentences for each kind of bad input", () => {
  it.each<{ what: string; manifest: Manifest; errors: FieldError[] }>([
    {
      what: "a value outside an enum",
      manifest: beta({ sharing: { strategy: "Sometimes" } }),
      errors: [{ path: "spec.sharing.strategy", message: "must be one of None, TimeSlicing" }],
    },
    {
      what: "a required enum left out",
      manifest: beta({ backend: { mock: { devices: 1 } } }),
      errors: [{ path: "spec.backend.type", message: "must be set to one of Mock, DevFS, PCI, NVIDIA" }],
    },
    {
      what: "a required string left out",
      manifest: beta({ resourceName: undefined }),
      errors: [{ path: "spec.resourceName", message: "must be set" }],
    },
    {
      what: "a number below its minimum, beside the CEL rule's own sentence",
      manifest: beta({ sharing: { strategy: "TimeSlicing", replicas: 0 } }),
      errors: [
        { path: "spec.sharing.replicas", message: "must be >= 1" },
        { path: "spec.sharing.replicas", message: "must be >= 2 when strategy is TimeSlicing" },
      ],
    },
    {
      what: "a number above its maximum",
      manifest: beta({ sharing: { strategy: "TimeSlicing", replicas: 1025 } }),
      errors: [{ path: "spec.sharing.replicas", message: "must be <= 1024" }],
    },
    {
      what: "a fraction where an integer belongs",
      manifest: beta({ upgrade: { progressDeadlineSeconds: 30.5 } }),
      errors: [{ path: "spec.upgrade.progressDeadlineSeconds", message: "must be an integer" }],
    },
    {
      what: "a number where a string belongs",
      manifest: beta({ plugin: { image: 3 } }),
      errors: [{ path: "spec.plugin.image", message: "must be a string" }],
    },
    {
      what: "a string where a boolean belongs",
      manifest: beta({ cdi: { enabled: "yes" } }),
      errors: [{ path: "spec.cdi.enabled", message: "must be a boolean" }],
    },
    {
      what: "a string where an object belongs",
      manifest: beta({ topology: "Packed" }),
      errors: [{ path: "spec.topology", message: "must be an object" }],
    },
    {
      what: "an object where a list belongs",
      manifest: beta({ tolerations: { key: "a" } }),
      errors: [{ path: "spec.tolerations", message: "must be a list" }],
    },
    {
      what: "a string too long",
      manifest: beta({ plugin: { image: "x".repeat(1025) } }),
      errors: [{ path: "spec.plugin.image", message: "must be at most 1024 characters" }],
    },
    {
      what: "an empty list that needs an item",
      manifest: beta({ backend: { type: "DevFS", devFS: { paths: [] } } }),
      errors: [{ path: "spec.backend.devFS.paths", message: "must not be empty" }],
    },
    {
      what: "a list too long",
      manifest: beta({ tolerations: Array.from({ length: 65 }, () => ({})) }),
      errors: [{ path: "spec.tolerations", message: "must have at most 64 items" }],
    },
    {
      what: "a map value of the wrong type",
      manifest: beta({ nodeSelector: { "feature.example/a": 3 } }),
      errors: [{ path: "spec.nodeSelector.feature.example/a", message: "must be a string" }],
    },
    {
      what: "an unknown field",
      manifest: beta({ bogus: 1 }),
      errors: [{ path: "spec.bogus", message: "unknown field" }],
    },
    {
      what: "another kind",
      manifest: beta({}, { kind: "DeviceConfig" }),
      errors: [{ path: "kind", message: "must be DevicePluginConfig" }],
    },
    {
      what: "an empty name",
      manifest: beta({}, { metadata: { name: "" } }),
      errors: [
        { path: "metadata.name", message: "must not be empty" },
        { path: "metadata.name", message: "must be a lowercase RFC 1123 subdomain, e.g. example-foo" },
      ],
    },
    {
      what: "maxUnavailable as a percentage out of range: the CEL rule's sentence",
      manifest: beta({ upgrade: { maxUnavailable: "0%" } }),
      errors: [
        {
          path: "spec.upgrade.maxUnavailable",
          message: "must be a number of nodes >= 1 or a percentage from 1% to 100%",
        },
      ],
    },
    {
      what: "maxUnavailable as a count of 0: the CEL rule's sentence",
      manifest: beta({ upgrade: { maxUnavailable: 0 } }),
      errors: [
        {
          path: "spec.upgrade.maxUnavailable",
          message: "must be a number of nodes >= 1 or a percentage from 1% to 100%",
        },
      ],
    },
    {
      what: "a v1alpha1 enum",
      manifest: alpha({ preferredAllocationPolicy: "Packed" }),
      errors: [
        { path: "spec.preferredAllocationPolicy", message: "must be one of none, packed, balanced, numa" },
      ],
    },
    {
      what: "a v1alpha1 bound with a sentence of its own keeps it",
      manifest: alpha({ sharedDevNum: 0 }),
      errors: [{ path: "spec.sharedDevNum", message: "must be >= 1 (1 means no sharing)" }],
    },
  ])("$what", ({ manifest, errors }) => {
    expect(errorsOf(manifest)).toEqual(errors);
  });
});

describe("celStyleMessage", () => {
  // Kinds of zod issue the schemas do not raise today, so that a new field gets a sentence too.
  it.each<[string, Parameters<typeof celStyleMessage>[0], string | undefined]>([
    [
      "exclusive minimum",
      { code: "too_small", origin: "number", minimum: 0, inclusive: false, input: 0 },
      "must be > 0",
    ],
    [
      "exclusive maximum",
      { code: "too_big", origin: "number", maximum: 9, inclusive: false, input: 9 },
      "must be < 9",
    ],
    [
      "string minimum",
      { code: "too_small", origin: "string", minimum: 3, inclusive: true, input: "a" },
      "must be at least 3 characters",
    ],
    [
      "list minimum",
      { code: "too_small", origin: "array", minimum: 2, inclusive: true, input: [] },
      "must have at least 2 items",
    ],
    [
      "one character at most",
      { code: "too_big", origin: "string", maximum: 1, inclusive: true, input: "ab" },
      "must be at most 1 character",
    ],
    [
      "a pattern without a sentence",
      { code: "invalid_format", format: "regex", pattern: "^a$", input: "b" },
      "must match ^a$",
    ],
    ["another format", { code: "invalid_format", format: "email", input: "b" }, "must be a valid email"],
    ["a multiple", { code: "not_multiple_of", divisor: 4, input: 3 }, "must be a multiple of 4"],
    ["a literal", { code: "invalid_value", values: [2], input: 3 }, "must be 2"],
    ["a refinement's own message stays", { code: "custom", input: 1 }, undefined],
  ])("%s", (_what, issue, want) => {
    expect(celStyleMessage(issue)).toBe(want);
  });
});
