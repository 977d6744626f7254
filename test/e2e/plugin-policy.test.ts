// Who may write a DevicePluginConfig, on a live control plane: the API server refuses NODE_OPTIONS in spec.plugin.env
// naming the item, and the operator, under its default plugin policy, gives a config with another image or a host
// directory outside the allowed ones no DaemonSet, Stalled RefusedByPolicy naming the field, and a Warning Event.
import { CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import type { Condition, DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { kubeConfigFromInjected, kubectl, pluginDaemonSet, uniqueName, waitFor } from "../cluster/helpers.js";
import { installDpo, NAMESPACE, startOperator, type OperatorProcess } from "./support.js";

const CONFIGS = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const created: string[] = [];
let operator: OperatorProcess | undefined;

function manifest(name: string, spec: Record<string, unknown>) {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name },
    spec: {
      resourceName: `policy.example/${name}`,
      backend: { type: "Mock", mock: { devices: 1 } },
      ...spec,
    },
  };
}

async function create(name: string, spec: Record<string, unknown>): Promise<void> {
  await custom.createClusterCustomObject({ ...CONFIGS, body: manifest(name, spec) });
  created.push(name);
}

function condition(status: DevicePluginConfigStatus | undefined, type: string): Condition | undefined {
  return status?.conditions?.find((c) => c.type === type);
}

/** The config's Stalled condition once it is True, printing the last status seen on timeout. */
async function stalled(name: string): Promise<{ stalled: Condition; ready: Condition | undefined }> {
  return waitFor(`${name} to be Stalled`, async (observe) => {
    const obj = (await custom.getClusterCustomObject({ ...CONFIGS, name })) as {
      status?: DevicePluginConfigStatus;
    };
    observe(obj.status?.conditions ?? "no status yet");
    const s = condition(obj.status, "Stalled");
    return s?.status === "True" ? { stalled: s, ready: condition(obj.status, "Ready") } : undefined;
  });
}

async function eventReasons(name: string): Promise<string[]> {
  const { stdout } = await kubectl([
    "get",
    "events",
    "-A",
    `--field-selector=involvedObject.kind=DevicePluginConfig,involvedObject.name=${name}`,
    "-o",
    "json",
  ]);
  return (JSON.parse(stdout) as { items: { type: string; reason: string }[] }).items.map(
    (e) => `${e.type}/${e.reason}`,
  );
}

beforeAll(async () => {
  await installDpo();
  // The operator's own defaults: its own image's repository (dpo, of dpo:e2e) and /dev, /sys, /run/dpo.
  operator = await startOperator([], { DPO_PLUGIN_IMAGE_ALLOW: "", DPO_PLUGIN_HOST_PATH_ALLOW: "" });
}, 120_000);

afterAll(async () => {
  await operator?.stop();
  for (const name of created)
    await custom.deleteClusterCustomObject({ ...CONFIGS, name }).catch(() => undefined);
});

describe("at admission", () => {
  it("refuses NODE_OPTIONS in spec.plugin.env, naming the item and the variable", async () => {
    const name = uniqueName("e2e-policy-env");
    const body = manifest(name, {
      plugin: {
        env: [
          { name: "TZ", value: "UTC" },
          { name: "LANG", value: "C.UTF-8" },
          { name: "NODE_OPTIONS", value: "--inspect=0.0.0.0:9229" },
        ],
      },
    });
    const result = await kubectl(["create", "-f", "-"], { input: stringify(body), allowFailure: true });
    expect(result.exitCode, result.stdout).not.toBe(0);
    expect(result.stderr).toContain("spec.plugin.env[2].name: Forbidden: NODE_OPTIONS changes what code");
  });
});

describe("the operator's default plugin policy", () => {
  it("gives a config with another image no DaemonSet, Stalled RefusedByPolicy naming spec.plugin.image, and a Warning Event", async () => {
    const name = uniqueName("e2e-policy-image");
    await create(name, { plugin: { image: "registry.example/evil:1" } });
    const { stalled: s, ready } = await stalled(name);
    expect(s.reason).toBe("RefusedByPolicy");
    expect(s.message).toContain(
      "spec.plugin.image: registry.example/evil:1 is not in an allowed repository (dpo;",
    );
    expect(ready).toMatchObject({ status: "False", reason: "RefusedByPolicy" });
    await waitFor(`the RefusedByPolicy Event of ${name}`, async (observe) => {
      const reasons = await eventReasons(name);
      observe(reasons);
      return reasons.includes("Warning/RefusedByPolicy");
    });
    expect(await pluginDaemonSet(kc, NAMESPACE, name)).toBeUndefined();
  });

  it("gives a config whose Mock health file is in /etc no DaemonSet and Stalled RefusedByPolicy naming the field", async () => {
    const name = uniqueName("e2e-policy-path");
    await create(name, {
      backend: { type: "Mock", mock: { devices: 1, healthFile: "/etc/dpo/health.json" } },
    });
    const { stalled: s } = await stalled(name);
    expect(s.reason).toBe("RefusedByPolicy");
    expect(s.message).toContain("spec.backend.mock.healthFile: mounts the host directory /etc/dpo,");
    expect(await pluginDaemonSet(kc, NAMESPACE, name)).toBeUndefined();
  });

  it("renders a config within the policy, and a refused one once it is fixed", async () => {
    const name = uniqueName("e2e-policy-fixed");
    await create(name, { plugin: { image: "registry.example/evil:1" } });
    await stalled(name);
    await custom.patchClusterCustomObject({
      ...CONFIGS,
      name,
      body: [{ op: "replace", path: "/spec/plugin/image", value: "dpo:e2e-other" }],
    });
    const ds = await waitFor(`a DaemonSet of ${name}`, () => pluginDaemonSet(kc, NAMESPACE, name));
    expect(ds.spec?.template.spec?.containers[0]?.image).toBe("dpo:e2e-other");
  });
});
