// The ConversionReview (apiextensions.k8s.io/v1) the API server sends to convert DevicePluginConfigs
// between dpo.dev/v1alpha1 and dpo.dev/v1beta1, answered by a pure function: the HTTPS server around it
// only reads the body and writes the answer.
//
// Every problem is answered with a `Failure` result whose message names the object (by name, position
// and version) and the field, never with a crash or an object converted without one of its fields: the
// API server then refuses the read or write that needed the conversion and shows the message.
import {
  LOST_FIELDS_PATH,
  toV1alpha1,
  toV1beta1,
  type AlphaObject,
  type BetaObject,
} from "../api/conversion/convert.js";
import {
  missingLostFieldsErrors,
  SUPPORTED_API_VERSIONS,
  validateDevicePluginConfig,
  validateDevicePluginConfigSchemaOnly,
  type FieldError,
  type SupportedApiVersion,
} from "../api/validate.js";
import { V1ALPHA1_API_VERSION } from "../api/v1alpha1/config.js";
import { KIND } from "../api/v1beta1/config.js";

export const CONVERSION_REVIEW_API_VERSION = "apiextensions.k8s.io/v1";
export const CONVERSION_REVIEW_KIND = "ConversionReview";

export interface ConversionReviewResponse {
  apiVersion: typeof CONVERSION_REVIEW_API_VERSION;
  kind: typeof CONVERSION_REVIEW_KIND;
  response: {
    uid: string;
    convertedObjects?: unknown[];
    result:
      | { status: "Success" }
      | { status: "Failure"; message: string; reason: "BadRequest" | "Invalid"; code: 400 | 422 };
  };
}

/** The answer to one review, with what the server logs and counts. */
export interface ConversionOutcome {
  review: ConversionReviewResponse;
  /** The versions converted from and to, when the request said them. */
  desiredAPIVersion?: string;
  objects: number;
  /** Annotation fields that were not restored, one message each (the conversion still succeeded). */
  warnings: string[];
}

type JsonObject = Record<string, unknown>;

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

class ReviewError extends Error {
  constructor(
    message: string,
    readonly reason: "BadRequest" | "Invalid",
  ) {
    super(message);
  }
}

function describe(value: unknown): string {
  if (value === undefined) return "nothing";
  const text = JSON.stringify(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** `DevicePluginConfig foo (objects[2], dpo.dev/v1alpha1)`: enough to find the object the API server sent. */
function objectLabel(obj: JsonObject, index: number): string {
  const metadata = isObject(obj.metadata) ? obj.metadata : {};
  const name = typeof metadata.name === "string" && metadata.name !== "" ? metadata.name : "<unnamed>";
  const version = typeof obj.apiVersion === "string" ? `, ${obj.apiVersion}` : "";
  return `DevicePluginConfig ${name} (objects[${index}]${version})`;
}

function fieldErrors(errors: readonly FieldError[]): string {
  return errors.map((e) => `${e.path}: ${e.message}`).join("; ");
}

function convertOne(obj: unknown, index: number, desired: SupportedApiVersion, warnings: string[]): unknown {
  if (!isObject(obj))
    throw new ReviewError(`objects[${index}] is ${describe(obj)}, not an object`, "BadRequest");
  const label = objectLabel(obj, index);
  if (obj.kind !== KIND) {
    throw new ReviewError(`${label}: kind ${describe(obj.kind)} is not ${KIND}`, "BadRequest");
  }
  const from = SUPPORTED_API_VERSIONS.find((v) => v === obj.apiVersion);
  if (from === undefined) {
    throw new ReviewError(
      `${label}: apiVersion ${describe(obj.apiVersion)} is not one of ${SUPPORTED_API_VERSIONS.join(", ")}`,
      "BadRequest",
    );
  }
  // The API server sends only objects that need converting; one already in the desired version is kept.
  if (from === desired) return obj;
  const source = validateDevicePluginConfigSchemaOnly(obj);
  if (!source.ok) throw new ReviewError(`${label}: ${fieldErrors(source.errors)}`, "Invalid");
  if (desired === V1ALPHA1_API_VERSION) return toV1alpha1(obj as unknown as BetaObject);
  const missing = missingLostFieldsErrors(obj as unknown as AlphaObject);
  if (missing.length > 0)
    throw new ReviewError(`${label}: ${LOST_FIELDS_PATH}: ${missing.join("; ")}`, "Invalid");
  const converted = toV1beta1(obj as unknown as AlphaObject);
  if (!converted.ok) throw new ReviewError(`${label}: ${LOST_FIELDS_PATH}: ${converted.problem}`, "Invalid");
  warnings.push(...converted.warnings);
  // A field restored from the annotation is checked as v1beta1 checks it: a hand-edited annotation must
  // not smuggle an invalid field past validation.
  const restored = validateDevicePluginConfig(converted.value);
  if (!restored.ok) {
    const what = restored.errors.map((e) => `restores an invalid ${e.path}: ${e.message}`).join("; ");
    throw new ReviewError(`${label}: ${LOST_FIELDS_PATH}: ${what}`, "Invalid");
  }
  // With v1beta1's defaults, as the API server fills them in for objects stored as v1beta1: a v1beta1
  // reader sees the same spec whichever version an object is stored in, and rewriting an object stored as
  // v1alpha1 in v1beta1 (the storage migration) changes no field, so its generation stays.
  return { ...converted.value, spec: restored.value.spec };
}

function failure(uid: string, err: ReviewError): ConversionReviewResponse {
  return {
    apiVersion: CONVERSION_REVIEW_API_VERSION,
    kind: CONVERSION_REVIEW_KIND,
    response: {
      uid,
      result: {
        status: "Failure",
        message: err.message,
        reason: err.reason,
        code: err.reason === "BadRequest" ? 400 : 422,
      },
    },
  };
}

/** Answers one ConversionReview request body (the raw bytes as text). Never throws. */
export function reviewConversion(body: string): ConversionOutcome {
  let uid = "";
  const warnings: string[] = [];
  let desiredAPIVersion: string | undefined;
  let objects = 0;
  try {
    let review: unknown;
    try {
      review = JSON.parse(body);
    } catch (err) {
      throw new ReviewError(`the request body is not JSON: ${(err as Error).message}`, "BadRequest");
    }
    if (!isObject(review)) throw new ReviewError("the request body is not a JSON object", "BadRequest");
    const request = isObject(review.request) ? review.request : undefined;
    if (typeof request?.uid === "string") uid = request.uid;
    if (review.apiVersion !== CONVERSION_REVIEW_API_VERSION) {
      throw new ReviewError(
        `apiVersion ${describe(review.apiVersion)} is not ${CONVERSION_REVIEW_API_VERSION}`,
        "BadRequest",
      );
    }
    if (review.kind !== CONVERSION_REVIEW_KIND) {
      throw new ReviewError(`kind ${describe(review.kind)} is not ${CONVERSION_REVIEW_KIND}`, "BadRequest");
    }
    if (request === undefined) throw new ReviewError("request is missing", "BadRequest");
    if (uid === "") throw new ReviewError("request.uid is missing", "BadRequest");
    const desired = SUPPORTED_API_VERSIONS.find((v) => v === request.desiredAPIVersion);
    if (typeof request.desiredAPIVersion === "string") desiredAPIVersion = request.desiredAPIVersion;
    if (desired === undefined) {
      throw new ReviewError(
        `request.desiredAPIVersion ${describe(request.desiredAPIVersion)} is not one of ${SUPPORTED_API_VERSIONS.join(", ")}`,
        "BadRequest",
      );
    }
    if (!Array.isArray(request.objects)) {
      throw new ReviewError(`request.objects is ${describe(request.objects)}, not a list`, "BadRequest");
    }
    objects = request.objects.length;
    const convertedObjects = request.objects.map((obj, i) => convertOne(obj, i, desired, warnings));
    return {
      review: {
        apiVersion: CONVERSION_REVIEW_API_VERSION,
        kind: CONVERSION_REVIEW_KIND,
        response: { uid, convertedObjects, result: { status: "Success" } },
      },
      desiredAPIVersion,
      objects,
      warnings,
    };
  } catch (err) {
    const reviewError =
      err instanceof ReviewError
        ? err
        : new ReviewError(`conversion failed unexpectedly: ${(err as Error).message}`, "Invalid");
    return { review: failure(uid, reviewError), desiredAPIVersion, objects, warnings };
  }
}
