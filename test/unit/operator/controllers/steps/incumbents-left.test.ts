// The incumbent DaemonSets a new leader lists once a term (ADR 0009, 0012): every one carrying a takeover's
// label in every namespace, none where the operator may not list them, and other failures thrown to retry.
import type { V1DaemonSet } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { ForbiddenError, TransientError, type ObjectClient } from "../../../../../src/kube/index.js";
import { listReadiedIncumbents } from "../../../../../src/operator/controllers/steps/incumbents-left.js";
import { LABEL_TAKEOVER } from "../../../../../src/operator/model/takeover.js";

function client(answer: () => V1DaemonSet[]): { objects: ObjectClient; asked: unknown[] } {
  const asked: unknown[] = [];
  const objects = {
    list: (ref: { plural: string }, namespace: string | undefined, query: unknown) => {
      asked.push({ plural: ref.plural, namespace, query });
      return Promise.resolve(answer());
    },
  } as unknown as ObjectClient;
  return { objects, asked };
}

describe("listReadiedIncumbents", () => {
  it("lists the DaemonSets carrying the takeover label, in every namespace", async () => {
    const ds: V1DaemonSet = { metadata: { name: "nvidia", labels: { [LABEL_TAKEOVER]: "gpus" } } };
    const { objects, asked } = client(() => [ds]);
    expect(await listReadiedIncumbents(objects)).toEqual([ds]);
    expect(asked).toEqual([
      { plural: "daemonsets", namespace: undefined, query: { labelSelector: LABEL_TAKEOVER } },
    ]);
  });

  it("finds none where the takeover's right to list DaemonSets is not granted", async () => {
    const { objects } = client(() => {
      throw new ForbiddenError("daemonsets.apps is forbidden", { code: 403 });
    });
    expect(await listReadiedIncumbents(objects)).toEqual([]);
  });

  it("throws another failure, for the leader to list again", async () => {
    const { objects } = client(() => {
      throw new TransientError("connection refused", { code: 0 });
    });
    await expect(listReadiedIncumbents(objects)).rejects.toThrow("connection refused");
  });
});
