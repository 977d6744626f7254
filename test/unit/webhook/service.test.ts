// Which Service the operator points a CRD's conversion webhook at: its own, when the CRD names another.
import { describe, expect, it } from "vitest";
import { serviceToSet } from "../../../src/webhook/cert-controller.js";

const OWN = { namespace: "gpu-operators", name: "dpo-webhook" };

describe("serviceToSet", () => {
  it.each([
    ["the CRD names this Service", { namespace: "gpu-operators", name: "dpo-webhook" }, OWN, undefined],
    [
      "the CRD names dpo-system (the chart's crds/)",
      { namespace: "dpo-system", name: "dpo-webhook" },
      OWN,
      OWN,
    ],
    ["the CRD names another Service name", { namespace: "gpu-operators", name: "old" }, OWN, OWN],
    ["the CRD names a Service without a namespace", { name: "dpo-webhook" }, OWN, OWN],
    ["the CRD has a URL, no Service (a local run)", undefined, OWN, undefined],
    [
      "the webhook knows no Service of its own",
      { namespace: "dpo-system", name: "dpo-webhook" },
      undefined,
      undefined,
    ],
  ])("%s", (_what, named, own, expected) => {
    expect(serviceToSet(named, own)).toEqual(expected);
  });
});
