// Typed API errors: what client-node throws becomes NotFound/Conflict/Forbidden/Invalid/Gone/Transient
// with the API server's own message and, for Invalid, its field causes.
import { ApiException } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import {
  ConflictError,
  ForbiddenError,
  GoneError,
  InvalidError,
  isAlreadyExists,
  isConflict,
  isForbidden,
  isGone,
  isInvalid,
  isNotFound,
  isTransient,
  KubeApiError,
  NotFoundError,
  toKubeError,
  TransientError,
} from "../../../src/kube/index.js";

const status = (code: number, reason: string, message: string, details?: object): string =>
  JSON.stringify({ kind: "Status", apiVersion: "v1", status: "Failure", code, reason, message, details });

const apiException = (
  code: number,
  body: unknown,
  headers: Record<string, string> = {},
): ApiException<unknown> => new ApiException(code, "Unknown API Status Code!", body, headers);

describe("toKubeError", () => {
  it.each([
    {
      name: "404 from a generated client",
      err: apiException(404, status(404, "NotFound", 'leases.coordination.k8s.io "dpo" not found')),
      type: NotFoundError,
      message: 'leases.coordination.k8s.io "dpo" not found',
      reason: "NotFound",
    },
    {
      name: "409 AlreadyExists",
      err: apiException(409, status(409, "AlreadyExists", 'leases.coordination.k8s.io "dpo" already exists')),
      type: ConflictError,
      message: 'leases.coordination.k8s.io "dpo" already exists',
      reason: "AlreadyExists",
    },
    {
      name: "409 Conflict (stale resourceVersion)",
      err: apiException(
        409,
        status(
          409,
          "Conflict",
          'Operation cannot be fulfilled on leases.coordination.k8s.io "dpo": the object has been modified',
        ),
      ),
      type: ConflictError,
      message:
        'Operation cannot be fulfilled on leases.coordination.k8s.io "dpo": the object has been modified',
      reason: "Conflict",
    },
    {
      name: "403 from RBAC",
      err: apiException(
        403,
        status(403, "Forbidden", 'secrets is forbidden: User "system:serviceaccount:dpo:dpo" cannot list'),
      ),
      type: ForbiddenError,
      message: 'secrets is forbidden: User "system:serviceaccount:dpo:dpo" cannot list',
      reason: "Forbidden",
    },
    {
      name: "410 from a watch ERROR event (a Status object)",
      err: {
        kind: "Status",
        apiVersion: "v1",
        code: 410,
        reason: "Expired",
        message: "too old resource version: 5 (900)",
      },
      type: GoneError,
      message: "too old resource version: 5 (900)",
      reason: "Expired",
    },
    {
      name: "429 throttled",
      err: apiException(429, status(429, "TooManyRequests", "too many requests"), { "retry-after": "3" }),
      type: TransientError,
      message: "too many requests",
      reason: "TooManyRequests",
    },
    {
      name: "503 with an HTML body from a proxy",
      err: apiException(503, "<html>Service Unavailable</html>"),
      type: TransientError,
      message: "<html>Service Unavailable</html>",
      reason: "",
    },
    {
      name: "Watch's non-200 response error",
      err: Object.assign(new Error("Gone"), { statusCode: 410 }),
      type: GoneError,
      message: "Gone",
      reason: "",
    },
    {
      name: "connection refused",
      err: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:6443"), { code: "ECONNREFUSED" }),
      type: TransientError,
      message: "connect ECONNREFUSED 127.0.0.1:6443",
      reason: "",
    },
    {
      name: "401 is none of the typed kinds",
      err: apiException(401, status(401, "Unauthorized", "Unauthorized")),
      type: KubeApiError,
      message: "Unauthorized",
      reason: "Unauthorized",
    },
  ])("$name", ({ err, type, message, reason }) => {
    const converted = toKubeError(err);
    expect(converted).toBeInstanceOf(type);
    expect(converted.message).toBe(message);
    expect((converted as KubeApiError).reason).toBe(reason);
  });

  it("keeps the field causes of 422 Invalid", () => {
    const err = apiException(
      422,
      status(
        422,
        "Invalid",
        'DevicePluginConfig.dpo.dev "foo" is invalid: spec.sharing.replicas: Invalid value: 1: must be >= 2',
        {
          name: "foo",
          group: "dpo.dev",
          kind: "DevicePluginConfig",
          causes: [
            {
              reason: "FieldValueInvalid",
              message: "Invalid value: 1: must be >= 2",
              field: "spec.sharing.replicas",
            },
          ],
        },
      ),
    );
    const converted = toKubeError(err);
    expect(converted).toBeInstanceOf(InvalidError);
    expect((converted as InvalidError).causes).toEqual([
      {
        reason: "FieldValueInvalid",
        message: "Invalid value: 1: must be >= 2",
        field: "spec.sharing.replicas",
      },
    ]);
    expect(converted.cause).toBe(err);
  });

  it("reads Retry-After when the Status has no retryAfterSeconds", () => {
    const converted = toKubeError(
      apiException(429, status(429, "TooManyRequests", "slow down"), { "retry-after": "7" }),
    );
    expect((converted as TransientError).retryAfterSeconds).toBe(7);
  });

  it("leaves unrelated errors alone", () => {
    const err = new TypeError("x is not a function");
    expect(toKubeError(err)).toBe(err);
    expect(toKubeError("boom")).toEqual(new Error("boom"));
  });
});

describe("predicates", () => {
  const notFound = apiException(404, status(404, "NotFound", "not found"));
  const exists = apiException(409, status(409, "AlreadyExists", "exists"));
  const conflict = apiException(409, status(409, "Conflict", "modified"));
  it.each([
    { name: "isNotFound", fn: isNotFound, yes: notFound, no: conflict },
    { name: "isConflict", fn: isConflict, yes: conflict, no: notFound },
    { name: "isAlreadyExists", fn: isAlreadyExists, yes: exists, no: conflict },
    {
      name: "isForbidden",
      fn: isForbidden,
      yes: apiException(403, status(403, "Forbidden", "no")),
      no: notFound,
    },
    { name: "isInvalid", fn: isInvalid, yes: apiException(422, status(422, "Invalid", "bad")), no: notFound },
    { name: "isGone", fn: isGone, yes: apiException(410, status(410, "Gone", "gone")), no: notFound },
    {
      name: "isTransient",
      fn: isTransient,
      yes: apiException(500, status(500, "InternalError", "etcd")),
      no: notFound,
    },
  ])("$name", ({ fn, yes, no }) => {
    expect(fn(yes)).toBe(true);
    expect(fn(no)).toBe(false);
    expect(fn(new Error("unrelated"))).toBe(false);
  });
});
