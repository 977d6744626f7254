// `kubectl dpo` end to end: the real kubectl finds the dpo program on the PATH as kubectl-dpo, and follows a
// config's plugin rollout on simulated nodes to its end (exit 0, plain lines in a pipe, a live line in a
// tmux terminal whose screen is captured), a rollback (exit 1 with the operator's message), and a paused
// rollout past --timeout (exit 1, as kubectl's). Status and describe node read the same objects.
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import { injectedCluster, kubeConfigFromInjected, uniqueName, waitFor } from "../cluster/helpers.js";
import { dpoEntrypoint, installDpo, startOperator, type OperatorProcess } from "./support.js";

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const NAME = uniqueName("e2e-kdpo");
const RESOURCE = `kubectl.example/${NAME}`;

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const cluster = injectedCluster();

// kubectl runs a plugin it finds on the PATH by its name, so the build is linked under that name, and node
// (the bundle's interpreter) is on the PATH beside it.
const binDir = mkdtempSync(join(tmpdir(), "dpo-kubectl-plugin-"));
symlinkSync(dpoEntrypoint, join(binDir, "kubectl-dpo"));
const PATH = [binDir, cluster.binDir, dirname(process.execPath), process.env["PATH"] ?? ""].join(":");
const hasTmux = spawnSync("tmux", ["-V"]).status === 0;

let sim: KubeletSimulator;
let operator: OperatorProcess;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** `kubectl dpo ARGS --kubeconfig ...` through the real kubectl, in a pipe (no terminal). */
function kubectlDpo(args: string[]): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn("kubectl", ["dpo", ...args, "--kubeconfig", cluster.kubeconfigPath], {
      env: { ...process.env, PATH },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stdout, stderr, ms: Date.now() - started }));
  });
}

async function patchSpec(spec: Record<string, unknown>): Promise<void> {
  await custom.patchClusterCustomObject(
    { ...GROUP, name: NAME, body: { spec } },
    setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
  );
}

/** A tmux server of this file's own, so the session gets this PATH whatever server the user runs. */
const tmuxSocket = `dpo-e2e-${process.pid}`;
function tmux(args: string[]): string {
  return execFileSync("tmux", ["-L", tmuxSocket, ...args], {
    encoding: "utf8",
    env: { ...process.env, PATH },
  });
}

beforeAll(async () => {
  const nodes = cluster.nodeNames.slice(0, 3);
  expect(nodes).toHaveLength(3);
  await installDpo();
  // Surge on two kubelets, Replace (the node fenced) on the third.
  sim = await KubeletSimulator.start({
    kubeconfig: kc,
    nodes,
    gracePeriodMs: 60_000,
    kubeletVersions: { [nodes[0]!]: "v1.37.0", [nodes[1]!]: "v1.37.0", [nodes[2]!]: "v1.34.4" },
  });
  operator = await startOperator(["--status-write-interval", "250"]);
  await custom.createClusterCustomObject({
    ...GROUP,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: NAME },
      spec: {
        resourceName: RESOURCE,
        backend: { type: "Mock", mock: { devices: 2, idPrefix: "k" } },
        upgrade: { maxUnavailable: 1, progressDeadlineSeconds: 20 },
      },
    },
  });
}, 180_000);

afterAll(async () => {
  if (hasTmux) spawnSync("tmux", ["-L", tmuxSocket, "kill-server"]);
  await custom.deleteClusterCustomObject({ ...GROUP, name: NAME }).catch(() => undefined);
  await operator?.stop();
  await sim?.stop();
}, 120_000);

describe("kubectl dpo", () => {
  it("follows a rollout to the end: plain lines in a pipe, a live line in a terminal, exit 0", async () => {
    const first = await kubectlDpo(["rollout", "status", NAME, "--timeout", "2m"]);
    expect(first, first.stderr).toMatchObject({ code: 0 });
    expect(first.stdout).toMatch(new RegExp(`config "${NAME}" successfully rolled out\\n$`));

    await patchSpec({ plugin: { logLevel: "debug" } });
    // Started at once: the status still shows the previous generation's Complete, which must not count.
    const screens: string[] = [];
    if (hasTmux) {
      tmux([
        "new-session",
        "-d",
        "-s",
        "rollout",
        "-x",
        "160",
        "-y",
        "12",
        `kubectl dpo rollout status ${NAME} --timeout 3m --kubeconfig ${cluster.kubeconfigPath}; echo "exit=$?"; read x`,
      ]);
    }
    const piped = kubectlDpo(["rollout", "status", NAME, "--timeout", "3m"]);
    if (hasTmux) {
      await waitFor(
        "the tmux pane to show the rollout's end",
        (observe) => {
          const screen = tmux(["capture-pane", "-p", "-t", "rollout"]);
          observe(screen);
          if (screens.at(-1) !== screen) screens.push(screen);
          return screen.includes("exit=") ? screen : undefined;
        },
        { timeoutMs: 200_000, intervalMs: 100 },
      );
    }
    const run = await piped;
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toBe("");
    const lines = run.stdout.trimEnd().split("\n");
    // Plain lines, each written when a count changed, then kubectl's last line.
    expect(lines.at(-1)).toBe(`config "${NAME}" successfully rolled out`);
    expect(lines.join("\n")).not.toContain("\r");
    expect(
      lines.some((l) => /Progressing: [0-2]\/3 updated, \d serving, \d fenced, \d waiting$/.test(l)),
    ).toBe(true);
    lines
      .slice(1)
      .forEach((line, i) => expect(line, "a line only when something changed").not.toBe(lines[i]));

    const status = await kubectlDpo(["status", NAME]);
    expect(status.code, status.stderr).toBe(0);
    for (const node of cluster.nodeNames.slice(0, 3)) {
      expect(status.stdout, node).toMatch(new RegExp(`^ {2}${node} +\\w+ +Registered +2/2 +`, "m"));
    }

    const describeNode = await kubectlDpo(["describe", "node", cluster.nodeNames[0]!]);
    expect(describeNode.code, describeNode.stderr).toBe(0);
    expect(describeNode.stdout).toContain(`Config: ${NAME} (${RESOURCE})`);
    expect(describeNode.stdout).toMatch(/k-?0 +Healthy +1 /);

    if (hasTmux) {
      const last = screens.at(-1)!;
      expect(last).toContain(`config "${NAME}" successfully rolled out`);
      expect(last).toContain("exit=0");
      // One live line redrawn in place: the final counts once, never a wrapped or repeated line.
      expect(last.split("\n").filter((l) => l.includes(" updated, "))).toEqual([
        expect.stringMatching(
          new RegExp(`^${NAME} \\[#{20}\\] Complete: 3/3 updated, 3 serving, 0 fenced, 0 waiting`),
        ),
      ]);
      // While nodes moved, the bar was part full and the time left to --timeout counted down.
      expect(
        screens.some((s) => /\[#*-+\] Progressing: [0-2]\/3 updated, .*\(timeout in \d+m/.test(s)),
        screens.join("\n----\n"),
      ).toBe(true);
    }
  }, 420_000);

  it("shows a rollback: exit 1 with the operator's reason", async () => {
    const broken = "registry.example/dpo:never-registers";
    const dir = mkdtempSync(join(tmpdir(), "dpo-broken-"));
    const entrypoint = join(dir, "never-registers.mjs");
    writeFileSync(entrypoint, "setInterval(() => undefined, 1 << 30);\n");
    sim.addImage(broken, entrypoint);
    await patchSpec({ plugin: { logLevel: "debug", image: broken } });
    const run = await kubectlDpo(["rollout", "status", NAME, "--timeout", "4m"]);
    expect(run.code, run.stdout).toBe(1);
    expect(run.stderr).toMatch(
      new RegExp(
        `^dpo: config "${NAME}" was rolled back to revision \\w+: node\\(s\\) \\S+ did not get the new plugin advertised within 20s`,
      ),
    );
    expect(run.stdout, "the rollout's progress before its end").toMatch(
      /(Progressing|RollingBack): \d\/3 updated/,
    );
    const status = await kubectlDpo(["status", NAME]);
    expect(status.stdout).toMatch(/Stalled \(UpgradeRolledBack\)/);
    expect(status.stdout).toMatch(/the rollout failed here/);
  }, 300_000);

  it("gives up a paused rollout at --timeout with exit 1, and follows it to the end once resumed", async () => {
    // A good spec again, new to the nodes, and paused in the same change: nothing moves.
    await patchSpec({ plugin: { logLevel: "info", image: null }, upgrade: { paused: true } });
    const run = await kubectlDpo(["rollout", "status", NAME, "--timeout", "3s"]);
    expect(run.code, run.stdout).toBe(1);
    expect(run.stderr).toMatch(
      new RegExp(
        `^dpo: timed out waiting for config "${NAME}" to roll out after 3s: 0 of 3 nodes updated \\(\\w+\\)\\n$`,
      ),
    );
    expect(run.ms).toBeGreaterThanOrEqual(3_000);
    expect(run.ms).toBeLessThan(30_000);

    const resumed = await kubectlDpo(["rollout", "resume", NAME]);
    expect(resumed.stdout).toBe(`devicepluginconfig.dpo.dev/${NAME} resumed\n`);
    const paused = (await custom.getClusterCustomObject({ ...GROUP, name: NAME })) as {
      spec: { upgrade: { paused?: boolean } };
    };
    expect(paused.spec.upgrade.paused).toBe(false);
    const done = await kubectlDpo(["rollout", "status", NAME, "--timeout", "3m"]);
    expect(done.code, done.stderr).toBe(0);
  }, 300_000);
});
