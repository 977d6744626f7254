// `dpo plugin` (dist/dpo.js) with a config in DRA mode, against a real API server: it publishes the node's
// ResourceSlice, serves the DRA socket, keeps writing the DeviceNodeState, and SIGTERM leaves the slice.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DevicePluginConfig } from "../../src/api/v1beta1/config.js";
import { draDriverName } from "../../src/api/v1beta1/spec.js";
import { validateDevicePluginConfig } from "../../src/api/validate.js";
import { deviceNodeStateName } from "../../src/contract/node-state.js";
import { resourceSliceName, type ResourceSlice } from "../../src/plugin-runtime/dra/slices.js";
import { ApiClient, loadKubeconfig } from "../../src/plugin-runtime/report/api-client.js";
import { injectedCluster, installCrds, kubectl, uniqueName, waitFor } from "../cluster/helpers.js";
import { tempDir } from "../protocol/support.js";

const FIELD_MANAGER = "dpo-dra-process-test";
const node = injectedCluster().nodeNames[0] ?? "node-a";
const namespace = "default";
const work = tempDir("dra-proc");
const configName = uniqueName("it-dra-proc");
let api: ApiClient;
let config: DevicePluginConfig;
let child: ChildProcess | undefined;
let exited: Promise<number | null> | undefined;
let output = "";

async function slice(name: string): Promise<ResourceSlice | undefined> {
  return api
    .request<ResourceSlice>({ method: "GET", path: `/apis/resource.k8s.io/v1/resourceslices/${name}` })
    .catch(() => undefined);
}

beforeAll(async () => {
  await installCrds(FIELD_MANAGER);
  api = new ApiClient(await loadKubeconfig(injectedCluster().kubeconfigPath));
  // The config exists in the API so the DeviceNodeState's owner reference points at a live object.
  await kubectl(["apply", "--server-side", `--field-manager=${FIELD_MANAGER}`, "-f", "-"], {
    input: JSON.stringify({
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: configName },
      spec: {
        resourceName: `${uniqueName("proc")}.example/foo`,
        publish: "DRA",
        backend: { type: "Mock", mock: { devices: 2, attributes: { model: "X100" } } },
      },
    }),
  });
  const { stdout } = await kubectl(["get", "devicepluginconfigs.dpo.dev", configName, "-o", "json"]);
  const loaded = validateDevicePluginConfig(JSON.parse(stdout));
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.errors));
  config = loaded.value;
  const configPath = join(work.dir, "config.json");
  writeFileSync(configPath, JSON.stringify(config));
  child = spawn(
    process.execPath,
    [
      "dist/dpo.js",
      "plugin",
      "--config",
      configPath,
      "--kubeconfig",
      injectedCluster().kubeconfigPath,
      "--namespace",
      namespace,
      "--node-name",
      node,
      "--dra-plugins-dir",
      join(work.dir, "plugins"),
      "--plugins-registry-dir",
      join(work.dir, "reg"),
      "--cdi-dir",
      join(work.dir, "cdi"),
      "--metrics-addr",
      "0",
      "--health-addr",
      "0",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  child.stdout?.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (output += d.toString()));
  exited = new Promise((resolve) => child!.once("exit", (code) => resolve(code)));
});

afterAll(async () => {
  if (child && child.exitCode === null) {
    child.kill("SIGKILL");
    await exited;
  }
  await kubectl(["delete", "devicepluginconfigs.dpo.dev", configName, "--ignore-not-found", "--wait=false"]);
  if (config) {
    const name = resourceSliceName(draDriverName(config.spec), node, 0);
    await api
      .request({ method: "DELETE", path: `/apis/resource.k8s.io/v1/resourceslices/${name}` })
      .catch(() => undefined);
  }
  api?.close();
  work.cleanup();
});

describe("dpo plugin with spec.publish DRA", () => {
  it("publishes the pool, serves the DRA socket, reports, and leaves the slice on SIGTERM", async () => {
    const driver = draDriverName(config.spec);
    const name = resourceSliceName(driver, node, 0);
    const published = await waitFor(
      "the node's ResourceSlice",
      async (observe) => {
        observe(output.slice(-500));
        const s = await slice(name);
        return s?.spec.devices?.length === 2 ? s : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(published.spec).toMatchObject({
      driver,
      nodeName: node,
      pool: { name: node, resourceSliceCount: 1 },
    });
    expect(published.spec.devices?.[0]?.attributes).toMatchObject({ model: { string: "X100" } });
    // The DRA socket in <dir>/<driver>, the registration socket in the plugin watcher's directory.
    await waitFor("the DRA sockets", () => readdirSync(join(work.dir, "reg")).length === 1);
    expect(readdirSync(join(work.dir, "plugins", driver)).some((f) => f.endsWith(".sock"))).toBe(true);

    const report = await waitFor(
      "the DeviceNodeState",
      async (observe) => {
        const result = await kubectl(
          [
            "get",
            "devicenodestates.dpo.dev",
            "-n",
            namespace,
            deviceNodeStateName(configName, node),
            "-o",
            "json",
          ],
          { allowFailure: true },
        );
        observe(result.stderr.trim() || output.slice(-300));
        if (result.exitCode !== 0) return undefined;
        const object = JSON.parse(result.stdout) as { status?: { advertised?: number; healthy?: number } };
        return object.status?.advertised === 2 ? object : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(report.status).toMatchObject({ advertised: 2, healthy: 2 });

    child!.kill("SIGTERM");
    expect(await exited).toBe(0);
    const after = await slice(name);
    expect(after?.metadata.uid).toBe(published.metadata.uid);
    expect(readdirSync(join(work.dir, "reg"))).toEqual([]);
    expect(existsSync(join(work.dir, "plugins", driver))).toBe(true);
  });
});
