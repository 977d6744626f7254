// The built `dpo` binary as a process: invalid-config exit before any socket, registration with probes and
// metrics (which pass Prometheus' own linter, per-device series from the PodResources API included),
// SIGTERM cleanup, and the validate/version commands.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { buildPromlint, PROM_CLIENT_DEFAULT_PROBLEMS, promlint } from "../../tools/promlint/harness.js";
import { SimulatedDeviceManager } from "../../tools/kubelet-sim/device-manager.js";
import { SimulatedPodResourcesServer } from "../../tools/kubelet-sim/pod-resources.js";
import { deviceTable } from "../metrics/exposition.js";
import { RESOURCE, tempDir, waitFor } from "./support.js";

const repo = join(import.meta.dirname, "..", "..");
const dpo = join(repo, "dist", "dpo.js");
const fixtures = join(repo, "test", "fixtures");

beforeAll(() => {
  if (!existsSync(dpo)) throw new Error(`${dpo} is missing: run 'make build' first`);
});

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Running {
  child: ChildProcess;
  stdout: string[];
  stderr: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function start(args: string[], env: Record<string, string> = {}): Running {
  const child = spawn(process.execPath, [dpo, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const stdout: string[] = [];
  const stderr: string[] = [];
  child.stdout.setEncoding("utf8").on("data", (d: string) => stdout.push(d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => stderr.push(d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    // 'close', not 'exit': the process has exited and its output is read to the end.
    child.once("close", (code, signal) => resolve({ code, signal })),
  );
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  return { child, stdout, stderr, exited };
}

function logEvents(r: Running): Record<string, unknown>[] {
  return r.stdout
    .join("")
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe("dpo plugin", () => {
  it("exits non-zero on an invalid config with field paths, before touching any socket", async () => {
    const tmp = tempDir("invalid");
    cleanups.push(tmp.cleanup);
    const dir = join(tmp.dir, "dp");
    const r = start([
      "plugin",
      "--config",
      join(fixtures, "invalid", "sharing-timeslicing-without-replicas.yaml"),
      "--device-plugin-dir",
      dir,
      "--metrics-addr",
      "0",
      "--health-addr",
      "0",
    ]);
    const { code } = await r.exited;
    expect(code).toBe(1);
    expect(r.stderr.join("")).toContain("spec.sharing.replicas: must be >= 2 when strategy is TimeSlicing");
    expect(existsSync(dir)).toBe(false);
  });

  it("serves a config from a newer operator without the fields it marks optional, and refuses any other", async () => {
    const tmp = tempDir("newer");
    cleanups.push(tmp.cleanup);
    const dir = join(tmp.dir, "dp");
    const kubelet = new SimulatedDeviceManager({ dir });
    await kubelet.start();
    cleanups.push(() => kubelet.stop());
    const write = (name: string, optional: string) => {
      const path = join(tmp.dir, name);
      writeFileSync(
        path,
        [
          "apiVersion: dpo.dev/v1beta1",
          "kind: DevicePluginConfig",
          `metadata: { name: newer, annotations: { dpo.dev/plugin-optional-fields: "${optional}" } }`,
          "spec:",
          `  resourceName: ${RESOURCE}`,
          "  backend: { type: Mock, mock: { devices: 2, idPrefix: foo } }",
          "  plugin: { logLevel: info, logFormat: json }",
        ].join("\n"),
      );
      return path;
    };
    const flags = ["--device-plugin-dir", dir, "--metrics-addr", "0", "--health-addr", "0"];

    const refused = start(["plugin", "--config", write("unmarked.yaml", "spec.futureHint"), ...flags]);
    expect((await refused.exited).code).toBe(1);
    expect(refused.stderr.join("")).toContain("spec.plugin.logFormat: unknown field");
    expect(kubelet.resources.get(RESOURCE)).toBeUndefined();

    const r = start(["plugin", "--config", write("marked.yaml", "spec.plugin.logFormat"), ...flags], {
      NODE_NAME: "node-n",
    });
    await waitFor(
      "the plugin to register with a config whose optional field it does not know",
      (observe) => {
        const cur = kubelet.resources.get(RESOURCE);
        observe({
          connected: cur?.connected,
          stdout: r.stdout.join("").slice(-500),
          stderr: r.stderr.join(""),
        });
        return cur?.connected && cur.devices.length === 2 ? cur : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 20 },
    );
    expect(logEvents(r)).toContainEqual(
      expect.objectContaining({ level: "warn", ignored: ["spec.plugin.logFormat"] }),
    );
  });

  it("reads a YAML kubeconfig, its parser loaded on use, and writes its report with the credentials it names", async () => {
    const tmp = tempDir("kubeconfig");
    cleanups.push(tmp.cleanup);
    const dir = join(tmp.dir, "dp");
    const kubelet = new SimulatedDeviceManager({ dir });
    await kubelet.start();
    cleanups.push(() => kubelet.stop());
    // The API server the kubeconfig names: records each request and knows nothing.
    const requests: { method: string; url: string; authorization: string | undefined }[] = [];
    const api = createServer((req, res) => {
      requests.push({
        method: req.method ?? "",
        url: req.url ?? "",
        authorization: req.headers.authorization,
      });
      req.resume();
      res.writeHead(404, { "Content-Type": "application/json" });
      res.end(
        JSON.stringify({
          kind: "Status",
          apiVersion: "v1",
          status: "Failure",
          reason: "NotFound",
          code: 404,
        }),
      );
    });
    await new Promise<void>((resolve) => api.listen(0, "127.0.0.1", resolve));
    cleanups.push(() => new Promise<void>((resolve) => api.close(() => resolve())));
    const { port } = api.address() as AddressInfo;
    // YAML, as kubectl writes it (the kubelet simulator hands its plugin pods such a file).
    const kubeconfig = join(tmp.dir, "kubeconfig.yaml");
    writeFileSync(
      kubeconfig,
      [
        "apiVersion: v1",
        "kind: Config",
        "clusters:",
        "- name: sim",
        "  cluster:",
        `    server: http://127.0.0.1:${port}`,
        "contexts:",
        "- name: sim",
        "  context:",
        "    cluster: sim",
        "    user: plugin",
        "current-context: sim",
        "users:",
        "- name: plugin",
        "  user:",
        "    token: plugin-token",
      ].join("\n"),
    );
    const config = join(tmp.dir, "config.yaml");
    writeFileSync(
      config,
      [
        "apiVersion: dpo.dev/v1beta1",
        "kind: DevicePluginConfig",
        "metadata: { name: kc }",
        "spec:",
        `  resourceName: ${RESOURCE}`,
        "  backend: { type: Mock, mock: { devices: 2, idPrefix: foo } }",
      ].join("\n"),
    );
    const r = start(
      [
        "plugin",
        "--config",
        config,
        "--device-plugin-dir",
        dir,
        "--metrics-addr",
        "0",
        "--health-addr",
        "0",
        "--kubeconfig",
        kubeconfig,
        "--namespace",
        "dpo-system",
      ],
      { NODE_NAME: "node-k" },
    );
    const report = await Promise.race([
      waitFor(
        "the plugin to write its DeviceNodeState to the API server its kubeconfig names",
        (observe) => {
          observe({ requests, stdout: r.stdout.join("").slice(-500) });
          return requests.find((q) =>
            q.url.startsWith("/apis/dpo.dev/v1beta1/namespaces/dpo-system/devicenodestates/"),
          );
        },
        { timeoutMs: 15_000, intervalMs: 20 },
      ),
      r.exited.then(({ code }) => {
        throw new Error(`the plugin exited (${code}) before writing its report: ${r.stderr.join("")}`);
      }),
    ]);
    expect(report.authorization).toBe("Bearer plugin-token");
    expect(requests.every((q) => q.authorization === "Bearer plugin-token")).toBe(true);
  });

  it("rejects an unknown flag and a bad registration mode with exit 2", async () => {
    const bad = start(["plugin", "--config", "x.yaml", "--registration", "magic"]);
    expect((await bad.exited).code).toBe(2);
    expect(bad.stderr.join("")).toContain(
      "--registration (or DPO_REGISTRATION): must be one of kubelet, watcher",
    );
    const unknown = start(["plugin", "--nope"]);
    expect((await unknown.exited).code).toBe(2);
    expect(unknown.stderr.join("")).toMatch(/nope/);
  });

  it("registers, reports ready and metrics, and cleans up on SIGTERM within 5 s", async () => {
    const tmp = tempDir("proc");
    cleanups.push(tmp.cleanup);
    const dir = join(tmp.dir, "dp");
    const kubelet = new SimulatedDeviceManager({ dir });
    await kubelet.start();
    cleanups.push(() => kubelet.stop());
    const podResources = new SimulatedPodResourcesServer({
      socketPath: join(tmp.dir, "pod-resources", "kubelet.sock"),
      deviceManager: kubelet,
      pods: () => [{ uid: "uid-1", name: "trainer-0", namespace: "ml", containers: ["main"] }],
    });
    await podResources.start();
    cleanups.push(() => podResources.stop());
    const config = join(tmp.dir, "config.yaml");
    writeFileSync(
      config,
      [
        "apiVersion: dpo.dev/v1beta1",
        "kind: DevicePluginConfig",
        "metadata: { name: proc }",
        "spec:",
        `  resourceName: ${RESOURCE}`,
        "  backend: { type: Mock, mock: { devices: 3, idPrefix: foo } }",
      ].join("\n"),
    );
    // Flags may come from the environment too.
    const r = start(
      ["plugin", "--config", config, "--metrics-addr", "127.0.0.1:0", "--pod-resources-interval", "0.05"],
      {
        DPO_DEVICE_PLUGIN_DIR: dir,
        DPO_HEALTH_ADDR: "0",
        DPO_POD_RESOURCES_SOCKET: podResources.socketPath,
        NODE_NAME: "node-p",
      },
    );
    const res = await waitFor(
      "the plugin process to register",
      (observe) => {
        const cur = kubelet.resources.get(RESOURCE);
        observe({
          connected: cur?.connected,
          stdout: r.stdout.join("").slice(-500),
          stderr: r.stderr.join(""),
        });
        return cur?.connected && cur.devices.length === 3 ? cur : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 20 },
    );
    const started = await waitFor("the 'plugin runtime started' log line", () =>
      logEvents(r).find((e) => e["msg"] === "plugin runtime started"),
    );
    expect(started).toMatchObject({ resource: RESOURCE, node: "node-p" });
    const port = (started["metrics"] as number[])[0]!;
    const ready = await waitFor("/readyz to say ready", async () => {
      const resp = await fetch(`http://127.0.0.1:${port}/readyz`);
      return resp.status === 200 ? resp.text() : undefined;
    });
    expect(ready).toContain("registered");
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toContain(`dpo_plugin_devices{health="Healthy",resource="${RESOURCE}"} 3`);
    expect(metrics).toContain(`dpo_plugin_registered{resource="${RESOURCE}"} 1`);
    // The process metrics come with the served registry (prom-client's default collectors).
    expect(metrics).toMatch(/^process_resident_memory_bytes \d+/m);
    expect(metrics).toMatch(/^nodejs_eventloop_lag_p99_seconds \S+/m);

    // A container gets a device: the served metrics name its pod, and pass Prometheus' own linter.
    const held = (await kubelet.allocate(RESOURCE, 1, { owner: "uid-1", container: "main" })).deviceIds[0]!;
    const served = await waitFor("the plugin's /metrics to name the device's pod", async (observe) => {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const table = deviceTable(text, "dpo_plugin_device_allocated");
      observe(table);
      return table[held] === "ml/trainer-0/main=1" ? text : undefined;
    });
    const lint = await promlint(await buildPromlint(), "dpo plugin /metrics", served);
    expect(lint.error).toBeUndefined();
    expect(lint.families).toBeGreaterThan(20);
    expect(lint.problems.filter((p) => p.metric.startsWith("dpo_"))).toEqual([]);
    expect(lint.problems).toEqual(expect.arrayContaining([...PROM_CLIENT_DEFAULT_PROBLEMS]));
    expect(lint.problems).toHaveLength(PROM_CLIENT_DEFAULT_PROBLEMS.length);

    const disconnected = new Promise<void>((resolve) => kubelet.once("disconnected", () => resolve()));
    r.child.kill("SIGTERM");
    // Exiting by itself is the promise (well inside the pod's grace period); 5 s is a deadline, not a measure.
    const { code } = await waitFor("the plugin to exit after SIGTERM", () => r.exited, { timeoutMs: 5_000 });
    expect(code).toBe(0);
    await disconnected;
    expect(existsSync(join(dir, res.endpoint))).toBe(false);
    expect(readdirSync(dir).filter((n) => n.startsWith("dpo-"))).toEqual([]);
  });
});

describe("dpo plugin's endpoints as the DaemonSet asks for them", () => {
  it("serves `:PORT` on IPv4 and IPv6 alike, and loads neither Node's resolver, worker_threads, node:module nor parseArgs", async () => {
    const tmp = tempDir("endpoints");
    cleanups.push(tmp.cleanup);
    const dir = join(tmp.dir, "dp");
    const kubelet = new SimulatedDeviceManager({ dir });
    await kubelet.start();
    cleanups.push(() => kubelet.stop());
    const config = join(tmp.dir, "config.yaml");
    writeFileSync(
      config,
      [
        "apiVersion: dpo.dev/v1beta1",
        "kind: DevicePluginConfig",
        "metadata: { name: endpoints }",
        "spec:",
        `  resourceName: ${RESOURCE}`,
        "  backend: { type: Mock, mock: { devices: 2, idPrefix: ep } }",
      ].join("\n"),
    );
    // The Node modules each process loaded (the plugin and the child reading its config), written when it
    // exits: every one stays in an idle plugin's RSS.
    const hook = join(tmp.dir, "loaded.cjs");
    writeFileSync(
      hook,
      `process.on("exit", () => require("node:fs").writeFileSync(${JSON.stringify(tmp.dir)} + "/loaded-" + process.pid + ".json", JSON.stringify(process.moduleLoadList)));`,
    );
    const r = start(
      [
        "plugin",
        "--config",
        config,
        "--device-plugin-dir",
        dir,
        "--metrics-addr",
        ":0",
        "--health-addr",
        "0",
      ],
      {
        NODE_OPTIONS: `--require ${hook}`,
      },
    );
    await waitFor(
      "the plugin process to register",
      (observe) => {
        const cur = kubelet.resources.get(RESOURCE);
        observe({
          connected: cur?.connected,
          stdout: r.stdout.join("").slice(-500),
          stderr: r.stderr.join(""),
        });
        return cur?.connected && cur.devices.length === 2 ? cur : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 20 },
    );
    const started = await waitFor("the 'plugin runtime started' log line", () =>
      logEvents(r).find((e) => e["msg"] === "plugin runtime started"),
    );
    const port = (started["metrics"] as number[])[0]!;
    // A single-stack IPv6 cluster probes and scrapes the pod's IPv6 address; `:PORT` must answer there too.
    for (const host of ["127.0.0.1", "[::1]"]) {
      const resp = await fetch(`http://${host}:${port}/healthz`);
      expect({ host, status: resp.status }).toEqual({ host, status: 200 });
    }
    r.child.kill("SIGTERM");
    const { code } = await waitFor("the plugin to exit after SIGTERM", () => r.exited, { timeoutMs: 5_000 });
    expect(code).toBe(0);
    const loaded = JSON.parse(readFileSync(join(tmp.dir, `loaded-${r.child.pid}.json`), "utf8")) as string[];
    expect(loaded).toContain("NativeModule http2");
    const unwanted =
      /^NativeModule (dns|worker_threads|internal\/util\/diff|module|internal\/source_map\/source_map|internal\/util\/parse_args\/parse_args)$/;
    expect(loaded.filter((m) => unwanted.test(m))).toEqual([]);
  });
});

describe("dpo validate and dpo version", () => {
  it("validate exits 0, 1 and 2 and names the field", () => {
    const ok = spawnSync(process.execPath, [dpo, "validate", join(fixtures, "valid", "mock-basic.yaml")]);
    expect(ok.status).toBe(0);
    const bad = spawnSync(
      process.execPath,
      [dpo, "validate", join(fixtures, "invalid", "pci-vendor-uppercase.yaml")],
      {
        encoding: "utf8",
      },
    );
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain("spec.backend.pci.vendor:");
    const missing = spawnSync(process.execPath, [dpo, "validate", join(fixtures, "nope.yaml")]);
    expect(missing.status).toBe(2);
  });

  it("version prints the version, commit and kubelet API versions", () => {
    const out = spawnSync(process.execPath, [dpo, "version", "--json"], { encoding: "utf8" });
    expect(out.status).toBe(0);
    const v = JSON.parse(out.stdout) as Record<string, unknown>;
    expect(v).toMatchObject({ kubeletDevicePluginAPIVersions: ["v1beta1"] });
    expect(v["version"]).toMatch(/^\d+\.\d+\.\d+/);
    expect(v["gitCommit"]).toMatch(/^([0-9a-f]{40}|unknown)$/);
  });
});
