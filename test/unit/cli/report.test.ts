// When `dpo plugin` reports: the kubeconfig flag, the pod's ServiceAccount, or not at all; and what it then requires.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { PLUGIN_FLAGS, runPluginCommand } from "../../../src/cli/plugin.js";
import { UsageError } from "../../../src/cli/flags.js";
import { reportTarget } from "../../../src/plugin-runtime/report/index.js";

describe("reportTarget", () => {
  it.each([
    {
      what: "a kubeconfig",
      flag: "/etc/kube/config",
      env: {},
      want: { kind: "kubeconfig", path: "/etc/kube/config" },
    },
    {
      what: "a kubeconfig, even in a pod",
      flag: "k.yaml",
      env: { KUBERNETES_SERVICE_HOST: "10.96.0.1" },
      want: { kind: "kubeconfig", path: "k.yaml" },
    },
    {
      what: "in a pod",
      flag: undefined,
      env: { KUBERNETES_SERVICE_HOST: "10.96.0.1" },
      want: { kind: "in-cluster" },
    },
    { what: "neither", flag: undefined, env: {}, want: undefined },
    { what: "an empty flag outside a pod", flag: "", env: { KUBERNETES_SERVICE_HOST: "" }, want: undefined },
  ])("$what", ({ flag, env, want }) => {
    expect(reportTarget(flag, env)).toEqual(want);
  });
});

describe("dpo plugin flags", () => {
  it("lists --kubeconfig and --namespace with their environment variables in --help", async () => {
    const write = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    try {
      expect(await runPluginCommand(["--help"])).toBe(0);
      const help = write.mock.calls.map((c) => String(c[0])).join("");
      expect(help).toMatch(/--kubeconfig VALUE[\s\S]*env: DPO_KUBECONFIG/);
      expect(help).toMatch(/--namespace VALUE[\s\S]*env: POD_NAMESPACE/);
    } finally {
      write.mockRestore();
    }
    expect(PLUGIN_FLAGS.map((f) => f.name)).toEqual(expect.arrayContaining(["kubeconfig", "namespace"]));
  });

  it.each([
    {
      what: "a namespace when a kubeconfig is given",
      argv: ["--config", "c.yaml", "--kubeconfig", "k.yaml", "--node-name", "n"],
      env: {},
      flag: "--namespace (or POD_NAMESPACE)",
    },
    {
      what: "a namespace in a pod",
      argv: ["--config", "c.yaml", "--node-name", "n"],
      env: { KUBERNETES_SERVICE_HOST: "10.96.0.1", KUBERNETES_SERVICE_PORT: "443" },
      flag: "--namespace (or POD_NAMESPACE)",
    },
    {
      what: "a node name",
      argv: ["--config", "c.yaml", "--kubeconfig", "k.yaml", "--namespace", "dpo-system"],
      env: {},
      flag: "--node-name (or NODE_NAME)",
    },
  ])("requires $what to report, naming the flag", async ({ argv, env, flag }) => {
    const saved = { ...process.env };
    for (const key of ["POD_NAMESPACE", "NODE_NAME", "DPO_KUBECONFIG", "KUBERNETES_SERVICE_HOST"]) {
      delete process.env[key];
    }
    Object.assign(process.env, env);
    try {
      const error = await runPluginCommand(argv).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(UsageError);
      expect((error as Error).message).toContain(flag);
    } finally {
      process.env = saved;
    }
  });
});

describe("dpo plugin with spec.publish DRA", () => {
  it("refuses to start without API credentials, before touching a socket", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dpo-dra-cli-"));
    const config = join(dir, "c.yaml");
    writeFileSync(
      config,
      JSON.stringify({
        apiVersion: "dpo.dev/v1beta1",
        kind: "DevicePluginConfig",
        metadata: { name: "dra" },
        spec: {
          resourceName: "example.com/foo",
          publish: "DRA",
          backend: { type: "Mock", mock: { devices: 1 } },
        },
      }),
    );
    const saved = { ...process.env };
    for (const key of ["DPO_KUBECONFIG", "KUBERNETES_SERVICE_HOST"]) delete process.env[key];
    const write = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    try {
      expect(await runPluginCommand(["--config", config, "--node-name", "n"])).toBe(2);
      const stderr = write.mock.calls.map((c) => String(c[0])).join("");
      expect(stderr).toContain("spec.publish is DRA");
      expect(stderr).toContain("--kubeconfig");
    } finally {
      write.mockRestore();
      process.env = saved;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("dpo plugin --pod-resources-*", () => {
  it("defaults to the kubelet's socket every 10 s, each with its environment variable", () => {
    const byName = new Map(PLUGIN_FLAGS.map((f) => [f.name, f]));
    expect(byName.get("pod-resources-socket")).toMatchObject({
      env: "DPO_POD_RESOURCES_SOCKET",
      default: "/var/lib/kubelet/pod-resources/kubelet.sock",
    });
    expect(byName.get("pod-resources-interval")).toMatchObject({
      env: "DPO_POD_RESOURCES_INTERVAL",
      default: "10",
    });
  });

  it.each(["-1", "soon", "", " "])("refuses the interval %j before touching anything", async (interval) => {
    const error = await runPluginCommand(["--config", "c.yaml", "--pod-resources-interval", interval]).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(UsageError);
    expect((error as Error).message).toContain("--pod-resources-interval");
  });
});
