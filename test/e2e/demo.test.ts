// `make demo` keeps working: the scripted demo (--once) runs its own control plane, the kubelet simulator,
// the operator and two samples, shows a device failing and recovering, and stops everything it started.
import { spawn } from "node:child_process";
import { join } from "node:path";
import { expect, it } from "vitest";
import { repo } from "./support.js";

it("make demo shows both samples Ready, a workload holding its devices, a failed device in the status, its recovery, and an upgrade the workload keeps its devices through", async () => {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(repo, "tools", "demo", "demo.ts"), "--once"],
    {
      cwd: repo,
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (out += d));
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  expect(code, out).toBe(0);
  // Three simulated nodes, and a real one where the machine allows it (root, the images built).
  const real = out.includes("joining a real node");
  if (!real) expect(out).toContain("no real node on this machine (");
  const n = real ? 4 : 3;
  const all = (perNode: number, unhealthy = 0): string => `${perNode * n - unhealthy}/${perNode * n}`;
  // The same configs through the older API, converted by the operator's webhook; set apart from the rest.
  const marker = "$ kubectl get devicepluginconfigs.v1alpha1.dpo.dev -o wide";
  const start = out.indexOf(marker);
  expect(start, out).toBeGreaterThan(-1);
  const end = out.indexOf("\x1b[1m==", start);
  const alpha = out.slice(start, end).split("\n");
  out = out.slice(0, start) + out.slice(end);
  expect(alpha[1]?.split(/\s{2,}/).slice(0, 5)).toEqual(["NAME", "RESOURCE", "BACKEND", "NODES", "DEVICES"]);
  expect(alpha[1]).toContain("SHARED");
  const alphaMock = alpha.find((l) => l.startsWith("example-mock "))?.split(/\s{2,}/);
  expect(alphaMock?.slice(2, 5)).toEqual(["Mock", `${n}/${n}`, all(4)]);
  // The plugin upgrade comes last: its output is checked on its own.
  const upgradeAt = out.indexOf("upgrading the plugin of example-mock");
  expect(upgradeAt, out).toBeGreaterThan(-1);
  const upgrade = out.slice(upgradeAt);
  out = out.slice(0, upgradeAt);
  const upgradeRows = upgrade
    .split("\n")
    .filter((l) => l.startsWith("example-mock "))
    .map((l) => l.split(/\s{2,}/));
  // UPDATED (the 7th column) moves to n/n, and the config ends Ready with every device.
  expect(upgradeRows.length, upgrade).toBeGreaterThan(1);
  expect(upgradeRows.at(-1)?.slice(3, 8), upgrade).toEqual([`${n}/${n}`, all(4), "0", `${n}/${n}`, "True"]);
  expect(
    upgradeRows.some((r) => r[6] !== `${n}/${n}`),
    upgrade,
  ).toBe(true);
  expect(upgrade).toContain("upgrade complete: every node runs the new revision");
  // The example workload: admitted through Allocate with two devices, which it keeps through the upgrade.
  const admitted = /admitted it through the plugin's Allocate: devices (foo-\d+,foo-\d+)\n/.exec(out);
  expect(admitted, out).not.toBeNull();
  expect(out).toContain(`the container's environment from Allocate: MOCK_DEVICE_IDS=${admitted![1]}`);
  expect(out).toMatch(/example-workload\s+1\/1\s+Running/);
  // On the real node, the real kubelet admitted it and containerd started it.
  if (real)
    expect(out).toContain("the real kubelet on dpo-real-node admitted it through the plugin's Allocate");
  expect(upgrade).toContain(
    `example-workload kept its devices through the upgrade: same pod, devices ${admitted![1]}`,
  );
  const rows = (name: string) => out.split("\n").filter((l) => l.startsWith(`${name} `));
  const devices = rows("example-mock").map((l) => l.split(/\s{2,}/)[4]);
  // Ready with every device, then one unhealthy, then recovered.
  expect(devices).toEqual([all(4), all(4, 1), all(4)]);
  const shared = rows("example-mock-shared");
  // every() holds on no row at all: the shared sample must have been printed.
  expect(shared.length, out).toBeGreaterThan(0);
  expect(shared.filter((l) => !l.includes(all(8)))).toEqual([]);
  expect(out).toContain('"devices":["foo-1"]');
  expect(out).toContain('"reason":"UnhealthyDevices"');
  expect(upgrade).toContain("== demo done (--once)");
}, 300_000);
