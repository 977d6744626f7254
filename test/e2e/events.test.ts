// Against the real API server, under the operator's ServiceAccount: repeated and similar Events about one
// object end up as a bounded number of Event objects whose count says how often they happened.
import { CustomObjectsApi, KubeConfig, type CoreV1Event } from "@kubernetes/client-node";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EventRecorder, type InvolvedObject } from "../../src/kube/index.js";
import { kubeConfigFromInjected, kubectl, uniqueName, waitFor } from "../cluster/helpers.js";
import { installDpo, OPERATOR_SA, serviceAccountKubeconfig } from "./support.js";

const CONFIGS = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };

const admin = kubeConfigFromInjected();
const custom = admin.makeApiClient(CustomObjectsApi);
const created: string[] = [];

let operatorKc: KubeConfig;

async function involvedConfig(): Promise<InvolvedObject> {
  const name = uniqueName("e2e-events");
  const config = (await custom.createClusterCustomObject({
    ...CONFIGS,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name },
      spec: { resourceName: `events.example/${name}`, backend: { type: "Mock", mock: { devices: 1 } } },
    },
  })) as { metadata: { uid: string } };
  created.push(name);
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name, uid: config.metadata.uid },
  };
}

/** What the last listing showed, so that a timeout reports it even when it strikes mid-listing. */
let lastListed: unknown = "nothing listed yet";

async function eventsAbout(obj: InvolvedObject): Promise<CoreV1Event[]> {
  const { stdout } = await kubectl([
    "get",
    "events",
    "-n",
    "default",
    `--field-selector=involvedObject.name=${obj.metadata.name},involvedObject.uid=${obj.metadata.uid}`,
    "-o",
    "json",
  ]);
  return (JSON.parse(stdout) as { items: CoreV1Event[] }).items;
}

function recorder(): EventRecorder {
  return new EventRecorder(operatorKc, {
    component: "dpo-operator",
    instance: "e2e",
    logger: pino({ level: "warn" }),
  });
}

beforeAll(async () => {
  await installDpo();
  operatorKc = new KubeConfig();
  operatorKc.loadFromFile(await serviceAccountKubeconfig(OPERATOR_SA));
}, 120_000);

afterAll(async () => {
  for (const name of created)
    await custom.deleteClusterCustomObject({ ...CONFIGS, name }).catch(() => undefined);
});

describe("Event correlation", () => {
  it("records 50 identical transitions as one Event whose count is the spam filter's burst", async () => {
    const config = await involvedConfig();
    const events = recorder();
    for (let i = 0; i < 50; i++) {
      await events.record(config, "Warning", "UnhealthyDevices", "node n1: device foo-0 is unhealthy");
    }
    const seen = await waitFor(
      "one Event with count 25",
      async (observe) => {
        observe(lastListed);
        const items = await eventsAbout(config);
        lastListed = items.map((e) => ({ name: e.metadata?.name, count: e.count, message: e.message }));
        observe(lastListed);
        return items.length === 1 && items[0]!.count === 25 ? items : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(seen[0]).toMatchObject({
      type: "Warning",
      reason: "UnhealthyDevices",
      message: "node n1: device foo-0 is unhealthy",
      count: 25,
      source: { component: "dpo-operator" },
    });
    expect(Date.parse(String(seen[0]!.lastTimestamp))).toBeGreaterThanOrEqual(
      Date.parse(String(seen[0]!.firstTimestamp)),
    );
  });

  it("combines similar Events with changing messages into one after ten", async () => {
    const config = await involvedConfig();
    const events = recorder();
    for (let i = 0; i < 15; i++) {
      await events.record(config, "Warning", "UnhealthyDevices", `node n${i}: devices are unhealthy`);
    }
    const seen = await waitFor(
      "nine single Events and one combined Event counting the other six",
      async (observe) => {
        observe(lastListed);
        const items = await eventsAbout(config);
        lastListed = items.map((e) => ({ count: e.count, message: e.message }));
        observe(lastListed);
        const combined = items.filter((e) => e.message?.startsWith("(combined from similar events): "));
        return items.length === 10 && combined.length === 1 && combined[0]!.count === 6 ? items : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(seen.filter((e) => e.count === 1)).toHaveLength(9);
  });
});
