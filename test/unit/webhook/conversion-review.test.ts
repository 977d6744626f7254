// The conversion webhook's answer to ConversionReviews: both directions, and a Failure result naming the
// object and field for every kind of broken request.
import { describe, expect, it } from "vitest";
import { LOST_FIELDS_ANNOTATION } from "../../../src/api/conversion/convert.js";
import fc from "fast-check";
import { validateDevicePluginConfig, validateDevicePluginConfigV1alpha1 } from "../../../src/api/validate.js";
import { alphaObject as arbitraryAlpha, betaObject as arbitraryBeta } from "../support/api-arbitraries.js";
import { reviewConversion } from "../../../src/webhook/conversion.js";

const ALPHA = "dpo.dev/v1alpha1";
const BETA = "dpo.dev/v1beta1";

function alphaObject(name = "gpu", spec: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: ALPHA,
    kind: "DevicePluginConfig",
    metadata: { name, uid: "u-1", resourceVersion: "7", generation: 2, labels: { team: "a" } },
    spec: {
      resourceName: "example.com/gpu",
      backend: "Mock",
      mock: { devices: 4 },
      sharedDevNum: 3,
      preferredAllocationPolicy: "balanced",
      ...spec,
    },
    status: { observedGeneration: 2 },
  };
}

function betaObject(name = "gpu", spec: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: BETA,
    kind: "DevicePluginConfig",
    metadata: { name, uid: "u-2", resourceVersion: "9", generation: 1 },
    spec: {
      resourceName: "example.com/gpu",
      backend: { type: "Mock", mock: { devices: 4 } },
      sharing: { strategy: "TimeSlicing", replicas: 3, failRequestsGreaterThanOne: true },
      topology: { allocationPolicy: "Spread" },
      cdi: { enabled: true },
      ...spec,
    },
  };
}

/** A v1beta1 spec as the API server stores it: zod's defaults are the CRD's (test/unit/api/crd.test.ts). */
function withDefaults(spec: Record<string, unknown>): unknown {
  const parsed = validateDevicePluginConfig({
    apiVersion: BETA,
    kind: "DevicePluginConfig",
    metadata: { name: "x" },
    spec,
  });
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  return parsed.value.spec;
}

function review(desiredAPIVersion: unknown, objects: unknown, uid: unknown = "req-1"): string {
  return JSON.stringify({
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "ConversionReview",
    request: { uid, desiredAPIVersion, objects },
  });
}

function converted(body: string): unknown[] {
  const { review: r } = reviewConversion(body);
  if (r.response.result.status !== "Success") throw new Error(r.response.result.message);
  return r.response.convertedObjects ?? [];
}

describe("reviewConversion: successful conversions", () => {
  it("converts v1alpha1 to v1beta1 with the uid echoed and metadata kept", () => {
    const { review: r } = reviewConversion(review(BETA, [alphaObject()]));
    expect(r).toMatchObject({
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "ConversionReview",
      response: { uid: "req-1", result: { status: "Success" } },
    });
    expect(r.response.convertedObjects).toEqual([
      {
        apiVersion: BETA,
        kind: "DevicePluginConfig",
        metadata: { name: "gpu", uid: "u-1", resourceVersion: "7", generation: 2, labels: { team: "a" } },
        // v1beta1's defaults filled in, as the API server does for objects stored as v1beta1.
        spec: withDefaults({
          resourceName: "example.com/gpu",
          backend: { type: "Mock", mock: { devices: 4 } },
          sharing: { strategy: "TimeSlicing", replicas: 3 },
          topology: { allocationPolicy: "Spread" },
        }),
        status: { observedGeneration: 2 },
      },
    ]);
  });

  it("keeps the v1beta1-only fields in the annotation on the way down and restores them on the way up", () => {
    // As the API server holds it: with v1beta1's defaults.
    const [original] = converted(review(BETA, [alphaObject()])) as Record<string, unknown>[];
    const withBetaOnly = {
      ...original,
      spec: {
        ...(original?.spec as object),
        sharing: { strategy: "TimeSlicing", replicas: 3, failRequestsGreaterThanOne: true },
        cdi: { enabled: true },
      },
    };
    const [down] = converted(review(ALPHA, [withBetaOnly])) as Record<string, Record<string, unknown>>[];
    expect(down?.spec).toMatchObject({
      resourceName: "example.com/gpu",
      backend: "Mock",
      mock: { devices: 4 },
      sharedDevNum: 3,
      preferredAllocationPolicy: "balanced",
    });
    expect(
      JSON.parse((down?.metadata?.annotations as Record<string, string>)[LOST_FIELDS_ANNOTATION]!),
    ).toMatchObject({
      spec: {
        cdi: { enabled: true },
        sharing: { failRequestsGreaterThanOne: true },
        plugin: { priorityClassName: "system-node-critical" },
      },
    });
    expect(converted(review(BETA, [down]))).toEqual([withBetaOnly]);
  });

  it("converts every object of a list in order, and keeps one already in the desired version as it is", () => {
    const objects = [alphaObject("a"), betaObject("b"), alphaObject("c")];
    const out = converted(review(BETA, objects)) as { apiVersion: string; metadata: { name: string } }[];
    expect(out.map((o) => [o.metadata.name, o.apiVersion])).toEqual([
      ["a", BETA],
      ["b", BETA],
      ["c", BETA],
    ]);
    expect(out[1]).toEqual(objects[1]);
  });

  it("answers an empty list with an empty list", () => {
    expect(converted(review(ALPHA, []))).toEqual([]);
  });

  it("reports annotation fields that contradict the v1alpha1 fields as warnings, and skips them", () => {
    const alpha = alphaObject("stale");
    (alpha.metadata as Record<string, unknown>).annotations = {
      [LOST_FIELDS_ANNOTATION]: JSON.stringify({
        spec: { sharing: { replicas: 8 }, cdi: { enabled: true } },
      }),
    };
    const outcome = reviewConversion(review(BETA, [alpha]));
    const [beta] = outcome.review.response.convertedObjects as { spec: Record<string, unknown> }[];
    expect(beta?.spec.sharing).toEqual({
      strategy: "TimeSlicing",
      replicas: 3,
      failRequestsGreaterThanOne: false,
    });
    expect(beta?.spec.cdi).toMatchObject({ enabled: true });
    expect(outcome.warnings).toEqual([
      `DevicePluginConfig stale: annotation ${LOST_FIELDS_ANNOTATION}: ignored spec.sharing.replicas (it contradicts the v1alpha1 fields)`,
    ]);
  });
});

describe("reviewConversion: broken requests get a Failure result naming what is wrong", () => {
  const notAnAnnotation = alphaObject("bad-annotation");
  (notAnAnnotation.metadata as Record<string, unknown>).annotations = { [LOST_FIELDS_ANNOTATION]: "{nope" };
  const smuggled = alphaObject("smuggled");
  (smuggled.metadata as Record<string, unknown>).annotations = {
    [LOST_FIELDS_ANNOTATION]: JSON.stringify({ spec: { cdi: { enabled: "yes" } } }),
  };

  it.each<[string, string, string, RegExp]>([
    ["a body that is not JSON", "{apiVersion:", "", /^the request body is not JSON: /],
    ["a JSON array", "[]", "", /^the request body is not a JSON object$/],
    [
      "a wrong apiVersion",
      JSON.stringify({
        apiVersion: "apiextensions.k8s.io/v1beta1",
        kind: "ConversionReview",
        request: { uid: "x" },
      }),
      "x",
      /^apiVersion "apiextensions.k8s.io\/v1beta1" is not apiextensions.k8s.io\/v1$/,
    ],
    [
      "an unknown kind",
      JSON.stringify({
        apiVersion: "apiextensions.k8s.io/v1",
        kind: "AdmissionReview",
        request: { uid: "x" },
      }),
      "x",
      /^kind "AdmissionReview" is not ConversionReview$/,
    ],
    [
      "no request",
      JSON.stringify({ apiVersion: "apiextensions.k8s.io/v1", kind: "ConversionReview" }),
      "",
      /^request is missing$/,
    ],
    ["no uid", review(BETA, [], ""), "", /^request.uid is missing$/],
    [
      "an unknown desired version",
      review("dpo.dev/v2", []),
      "req-1",
      /desiredAPIVersion "dpo.dev\/v2" is not one of/,
    ],
    [
      "objects that are not a list",
      review(BETA, { a: 1 }),
      "req-1",
      /^request.objects is \{"a":1\}, not a list$/,
    ],
    ["an object that is not an object", review(BETA, ["x"]), "req-1", /^objects\[0\] is "x", not an object$/],
    [
      "an object of another kind",
      review(BETA, [{ ...alphaObject("n"), kind: "Pod" }]),
      "req-1",
      /^DevicePluginConfig n \(objects\[0\], dpo.dev\/v1alpha1\): kind "Pod" is not DevicePluginConfig$/,
    ],
    [
      "an object of an unknown version",
      review(BETA, [alphaObject("ok"), { ...alphaObject("v9"), apiVersion: "dpo.dev/v9" }]),
      "req-1",
      /^DevicePluginConfig v9 \(objects\[1\], dpo.dev\/v9\): apiVersion "dpo.dev\/v9" is not one of/,
    ],
    [
      "a v1alpha1 object that fails its schema",
      review(BETA, [alphaObject("zero", { sharedDevNum: 0 })]),
      "req-1",
      /^DevicePluginConfig zero \(objects\[0\], dpo.dev\/v1alpha1\): spec.sharedDevNum: must be >= 1/,
    ],
    [
      "a v1beta1 object that fails its schema",
      review(ALPHA, [betaObject("badname", { resourceName: "gpu" })]),
      "req-1",
      /^DevicePluginConfig badname \(objects\[0\], dpo.dev\/v1beta1\): spec.resourceName: /,
    ],
    [
      "a conversion annotation that is not JSON",
      review(BETA, [notAnAnnotation]),
      "req-1",
      /^DevicePluginConfig bad-annotation \(objects\[0\], dpo.dev\/v1alpha1\): metadata.annotations\[dpo.dev\/v1beta1-fields\]: is not JSON/,
    ],
    [
      "an annotation that restores an invalid field",
      review(BETA, [smuggled]),
      "req-1",
      /^DevicePluginConfig smuggled .*: metadata.annotations\[dpo.dev\/v1beta1-fields\]: restores an invalid spec.cdi.enabled: /,
    ],
  ])("%s", (_what, body, uid, message) => {
    const { review: r } = reviewConversion(body);
    expect(r.apiVersion).toBe("apiextensions.k8s.io/v1");
    expect(r.kind).toBe("ConversionReview");
    expect(r.response.uid).toBe(uid);
    expect(r.response.convertedObjects).toBeUndefined();
    const result = r.response.result;
    if (result.status !== "Failure") throw new Error("expected a Failure result");
    expect(result.message).toMatch(message);
  });
});

describe("reviewConversion: round trips as the API server makes them", () => {
  const validBeta = arbitraryBeta({ invalid: false }).filter((b) => validateDevicePluginConfig(b).ok);
  const validAlpha = arbitraryAlpha({ invalid: false }).filter(
    (a) => validateDevicePluginConfigV1alpha1(a).ok,
  );

  /** One object through the webhook, as JSON on the wire. */
  function through(desired: string, obj: unknown): Record<string, unknown> {
    const { review: r } = reviewConversion(review(desired, [obj]));
    if (r.response.result.status !== "Success") throw new Error(r.response.result.message);
    return r.response.convertedObjects![0] as Record<string, unknown>;
  }

  it("v1beta1 as stored (defaults filled in) → v1alpha1 → v1beta1 is the identity", () => {
    fc.assert(
      fc.property(validBeta, (beta) => {
        const stored = JSON.parse(JSON.stringify({ ...beta, spec: withDefaults(beta.spec) })) as object;
        expect(through(BETA, through(ALPHA, stored))).toEqual(stored);
      }),
      { numRuns: 500 },
    );
  });

  it("v1alpha1 → v1beta1 gives the v1beta1 object with its defaults, and a second round trip changes nothing", () => {
    fc.assert(
      fc.property(validAlpha, (alpha) => {
        const up = through(BETA, JSON.parse(JSON.stringify(alpha)));
        expect(validateDevicePluginConfig(up).ok).toBe(true);
        expect(up.spec).toEqual(withDefaults(up.spec as never));
        expect(through(BETA, through(ALPHA, up))).toEqual(up);
      }),
      { numRuns: 500 },
    );
  });
});
