// The dry-run probe of DeviceClass spec.extendedResourceName: what it sends, how it reads the answer, and
// that a failed probe is asked again until one answers.
import type { KubernetesObject } from "@kubernetes/client-node";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import {
  DEVICE_CLASSES,
  ForbiddenError,
  type CreateOptions,
  type ObjectClient,
  type ResourceRef,
} from "../../../src/kube/index.js";
import {
  PROBE_DEVICE_CLASS,
  PROBE_EXTENDED_RESOURCE,
  probeExtendedResourceName,
  probeOnce,
  probeUntilAnswered,
} from "../../../src/operator/extended-resource-probe.js";

interface Sent {
  ref: ResourceRef;
  object: KubernetesObject & { spec?: Record<string, unknown> };
  options: CreateOptions | undefined;
}

/** An API server whose dry-run create answers with `answer(object)`, or fails with each of `failures` first. */
function server(answer: (o: Sent["object"]) => unknown, failures: Error[] = []) {
  const sent: Sent[] = [];
  const objects = {
    create: (ref: ResourceRef, object: Sent["object"], options?: CreateOptions) => {
      sent.push({ ref, object: structuredClone(object), options });
      const failure = failures.shift();
      return failure ? Promise.reject(failure) : Promise.resolve(answer(structuredClone(object)));
    },
  } as Partial<ObjectClient> as ObjectClient;
  return { objects, sent };
}

const keeps = (o: Sent["object"]) => ({ ...o, metadata: { ...o.metadata, uid: "u1" } });
const drops = (o: Sent["object"]) => {
  const { extendedResourceName: _dropped, ...spec } = o.spec ?? {};
  return { ...o, spec };
};

describe("probeExtendedResourceName", () => {
  it.each([
    { name: "1.37: the field comes back: kept", answer: keeps, kept: true },
    { name: "1.35 defaults: the field is dropped silently: not kept", answer: drops, kept: false },
    {
      name: "another name comes back: not kept",
      answer: (o: Sent["object"]) => ({ ...o, spec: { ...o.spec, extendedResourceName: "other.example/x" } }),
      kept: false,
    },
  ])("$name", async ({ answer, kept }) => {
    const { objects, sent } = server(answer);
    expect(await probeExtendedResourceName(objects)).toBe(kept);
    expect(sent).toHaveLength(1);
    expect(sent[0]?.ref).toBe(DEVICE_CLASSES);
    expect(sent[0]?.options).toEqual({ dryRun: true });
    expect(sent[0]?.object.metadata?.name).toBe(PROBE_DEVICE_CLASS);
    expect(sent[0]?.object.spec?.extendedResourceName).toBe(PROBE_EXTENDED_RESOURCE);
  });

  it("throws what the API server answered when the dry run fails", async () => {
    const { objects } = server(keeps, [new ForbiddenError("deviceclasses is forbidden", { code: 403 })]);
    await expect(probeExtendedResourceName(objects)).rejects.toThrow("deviceclasses is forbidden");
  });
});

describe("probeOnce and probeUntilAnswered", () => {
  const quiet = () => {
    const lines: string[] = [];
    return { lines, logger: pino({ level: "info" }, { write: (l: string) => void lines.push(l) }) };
  };

  it("probeOnce is undefined on a failure, and logs the error", async () => {
    const { objects } = server(keeps, [new Error("connection refused")]);
    const { lines, logger } = quiet();
    expect(await probeOnce({ objects, logger })).toBeUndefined();
    expect(lines.join("\n")).toContain("connection refused");
  });

  it("asks again after failures until an answer comes", async () => {
    const { objects, sent } = server(drops, [new Error("e1"), new Error("e2")]);
    const { logger } = quiet();
    const signal = new AbortController().signal;
    expect(await probeUntilAnswered({ objects, logger, retryMs: 1, signal })).toBe(false);
    expect(sent).toHaveLength(3);
  });

  it("stops, unanswered, once aborted", async () => {
    const { objects, sent } = server(keeps);
    const { logger } = quiet();
    const stop = new AbortController();
    stop.abort();
    expect(await probeUntilAnswered({ objects, logger, retryMs: 1, signal: stop.signal })).toBeUndefined();
    expect(sent).toHaveLength(0);
  });
});
