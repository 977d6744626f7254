// `dpo crds` flags: the conversion webhook's namespace in the printed CRD, and the arguments it refuses.
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { allCrds, renderCrdsYamlStream, type CustomResourceDefinition } from "../../../src/api/crd.js";
import { runCrdsCommand } from "../../../src/cli/crds.js";

function printed(args: string[], env: Record<string, string> = {}): CustomResourceDefinition[] {
  let text = "";
  const sink = { write: (chunk: string) => (text += chunk) } as unknown as NodeJS.WritableStream;
  expect(runCrdsCommand(args, sink, env)).toBe(0);
  return parseAllDocuments(text).map((d) => d.toJS() as CustomResourceDefinition);
}

function webhookService(crds: CustomResourceDefinition[]) {
  const config = crds.find((c) => c.metadata.name === "devicepluginconfigs.dpo.dev");
  const clientConfig = config?.spec.conversion?.webhook?.clientConfig;
  return clientConfig && "service" in clientConfig ? clientConfig.service : undefined;
}

describe("dpo crds", () => {
  it.each([
    ["by default, dpo-system", [], {}, "dpo-system"],
    ["--webhook-namespace", ["--webhook-namespace", "gpu-ops"], {}, "gpu-ops"],
    ["DPO_WEBHOOK_NAMESPACE", [], { DPO_WEBHOOK_NAMESPACE: "from-env" }, "from-env"],
  ])("names the webhook Service's namespace: %s", (_what, args, env, namespace) => {
    const crds = printed(args, env);
    expect(crds.map((c) => c.metadata.name)).toEqual(allCrds().map((c) => c.metadata.name));
    expect(webhookService(crds)).toEqual({ namespace, name: "dpo-webhook", path: "/convert", port: 443 });
  });

  it.each([
    ["--webhook-service", ["--webhook-service", "gpu-dpo-webhook"], {}],
    ["DPO_WEBHOOK_SERVICE", [], { DPO_WEBHOOK_SERVICE: "gpu-dpo-webhook" }],
  ])(
    "names the webhook Service as %s says (the chart's fullnameOverride), nothing else changed",
    (_what, args, env) => {
      const crds = printed(args, env);
      expect(webhookService(crds)).toEqual({
        namespace: "dpo-system",
        name: "gpu-dpo-webhook",
        path: "/convert",
        port: 443,
      });
      const service = webhookService(crds);
      if (service) service.name = "dpo-webhook";
      expect(crds).toEqual(printed([]));
    },
  );

  it("prints with the default namespace exactly what the committed files hold", () => {
    let text = "";
    const sink = { write: (chunk: string) => (text += chunk) } as unknown as NodeJS.WritableStream;
    expect(runCrdsCommand([], sink, {})).toBe(0);
    expect(text).toBe(renderCrdsYamlStream());
  });

  it("changes nothing else of the CRDs with another namespace", () => {
    const moved = printed(["--webhook-namespace", "gpu-ops"]);
    const service = webhookService(moved);
    if (service) service.namespace = "dpo-system";
    expect(moved).toEqual(printed([]));
  });

  it.each([
    ["an unknown argument", ["print"], "crds takes no arguments but 'apply', got: print"],
    ["a second argument", ["apply", "now"], "crds takes no arguments but 'apply', got: apply now"],
    ["an unknown flag", ["--namespace", "x"], "unknown flag '--namespace'"],
    [
      "a bad namespace",
      ["--webhook-namespace", "Gpu_Ops"],
      "--webhook-namespace: 'Gpu_Ops' is not a namespace name",
    ],
    ["a bad Service name", ["--webhook-service", "1dpo"], "--webhook-service: '1dpo' is not a Service name"],
  ])("refuses %s, saying which", (_what, args, message) => {
    expect(() => runCrdsCommand(args, process.stdout, {})).toThrow(message);
  });
});
