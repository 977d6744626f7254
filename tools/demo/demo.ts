// `make demo`: a local control plane with three simulated device nodes, the kubelet simulator, the operator
// (under its own ServiceAccount) and two sample configs; then a device fails and recovers while
// `kubectl get dpc` and `kubectl get devicenodestates` show it. Ctrl-C stops everything it started.
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

import { pino } from "pino";
import { parse } from "yaml";
import { KubeletSimulator } from "../kubelet-sim/node-simulator.js";
import { buildOrReuseBinaries, startCluster, type ClusterHandle } from "../cluster/cluster.js";
import { installDpo } from "../cluster/install-dpo.js";
import { freePort } from "../cluster/tcp-relay.js";
import { issuedToken, withBearerToken } from "../cluster/kubeconfig.js";
import { waitFor } from "../cluster/wait.js";
import {
  buildOrReuseContainerd,
  oldestKubernetesVersion,
  realNodeImages,
  type RealNodeImages,
} from "../real-node/artifacts.js";
import { realNodeUnsupportedReason } from "../real-node/host.js";
import { REAL_NODE_LABEL, startRealNode, type RealNodeHandle } from "../real-node/real-node.js";

const repo = join(import.meta.dirname, "..", "..");
const once = process.argv.includes("--once") || process.env["DEMO_ONCE"] === "1";
const SAMPLES = ["mock-basic.yaml", "mock-time-slicing.yaml"];
const HEALTH_FILE = "/run/dpo/health.json";
const WORKLOAD = join("config", "samples", "workloads", "example-pod.yaml");
const WORKLOAD_RESOURCE = "hardware-vendor.example/foo";

function banner(text: string): void {
  process.stdout.write(`\n\x1b[1m== ${text}\x1b[0m\n`);
}

async function main(): Promise<number> {
  const work = mkdtempSync(join(tmpdir(), "dpo-demo-"));
  const log = pino({ level: "warn" }, pino.destination(2));
  let cluster: ClusterHandle | undefined;
  let sim: KubeletSimulator | undefined;
  let realNode: RealNodeHandle | undefined;
  let operator: ChildProcess | undefined;
  let stopping = false;
  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    banner("stopping: operator, plugins, kubelet simulator, control plane");
    operator?.kill("SIGTERM");
    await sim?.stop().catch(() => undefined);
    await realNode?.stop().catch(() => undefined);
    await cluster?.stop().catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  };
  const interrupted = new Promise<void>((resolve) => {
    process.once("SIGINT", () => resolve());
    process.once("SIGTERM", () => resolve());
  });

  try {
    banner("building (or reusing) kube-apiserver, etcd, controller-manager, scheduler, kubectl and KWOK");
    const binDir = await buildOrReuseBinaries();
    // A real node (kubelet and containerd running the dpo image) where the machine allows it: root, and the
    // images of `make image test-images`. Otherwise the workload runs on a simulated node, and the demo says so.
    const images: RealNodeImages | string = await realNodeUnsupportedReason().then((reason) => {
      if (reason !== undefined) return reason;
      try {
        return realNodeImages();
      } catch (err) {
        return (err as Error).message;
      }
    });
    const withRealNode = typeof images !== "string";
    banner(`starting the control plane with 3 KWOK nodes${withRealNode ? " and a real node" : ""}`);
    cluster = await startCluster({
      nodes: 3,
      stateDir: join(work, "cluster"),
      binDir,
      log,
      kubeletSimulator: true,
      realNode: withRealNode,
    });
    if (typeof images === "string") {
      process.stdout.write(
        `no real node on this machine (${images}): the workload runs on a simulated node\n`,
      );
    } else {
      banner("joining a real node: the kubelet and containerd built from the Go module proxy, the dpo image");
      realNode = await startRealNode({
        stateDir: join(work, "cluster"),
        kubeconfigPath: cluster.kubeconfigPath,
        apiServerPort: cluster.ports.apiServer,
        pki: cluster.pki,
        k8sBinDir: binDir,
        containerdBinDir: await buildOrReuseContainerd(),
        images: images.archives,
        labels: { "feature.example/foo": "true" },
        // Untainted: the samples' plugins run there too, as on any node of the fleet.
        taints: [],
        log,
      });
      // The operator's plugin image and the sample workload's image, as the kubelet will ask for them.
      await realNode.ctr(["images", "tag", "--force", images.dpo, "docker.io/library/dpo:demo"]);
      await realNode.ctr(["images", "tag", "--force", images.workload, "docker.io/library/busybox:1.36"]);
    }
    const nodeCount = cluster.nodeNames.length + (realNode ? 1 : 0);
    const devicesOf = (perNode: number, unhealthy = 0): string =>
      `${perNode * nodeCount - unhealthy}/${perNode * nodeCount}`;
    const kubeconfig = cluster.kubeconfigPath;
    process.stdout.write(
      `API server ${cluster.server}, ready in ${(cluster.startupMs / 1000).toFixed(1)} s\n`,
    );
    process.stdout.write(`kubectl: ${join(binDir, "kubectl")} --kubeconfig ${kubeconfig}\n`);
    const kubectl = async (args: string[], input?: string): Promise<string> => {
      const child = execFile(join(binDir, "kubectl"), ["--kubeconfig", kubeconfig, ...args], {
        maxBuffer: 16 << 20,
      });
      if (input !== undefined) child.stdin?.end(input);
      else child.stdin?.end();
      return new Promise((resolve, reject) => {
        let out = "";
        let err = "";
        child.stdout?.on("data", (d: string) => (out += d));
        child.stderr?.on("data", (d: string) => (err += d));
        child.on("exit", (code) =>
          code === 0 ? resolve(out) : reject(new Error(`kubectl ${args.join(" ")}: ${err}`)),
        );
      });
    };

    banner("installing the CRDs, namespace and least-privilege RBAC from config/default");
    // The operator runs on this machine: the API server calls its conversion webhook on 127.0.0.1.
    const webhookPort = await freePort();
    await installDpo(kubectl, { conversionUrl: `https://127.0.0.1:${webhookPort}/convert` });

    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfig);
    banner(
      "starting the kubelet simulator on every KWOK node (it runs real `dpo plugin` processes for plugin pods)",
    );
    // The first node's kubelet is new enough for surge upgrades (v1.37.0).
    // The other two run the oldest supported kubelet, which has no per-socket endpoints: they replace.
    const oldest = await oldestKubernetesVersion();
    const kubeletVersions = {
      [cluster.nodeNames[0]!]: "v1.37.0",
      ...Object.fromEntries(cluster.nodeNames.slice(1).map((n) => [n, oldest])),
    };
    sim = await KubeletSimulator.start({
      kubeconfig: kc,
      nodes: cluster.nodeNames,
      logger: log,
      kubeletVersions,
    });

    banner("starting `dpo operator` with the dpo-operator ServiceAccount's token");
    const token = await kc.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
      name: "dpo-operator",
      namespace: "dpo-system",
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    });
    const opKc = withBearerToken(kc, issuedToken(token, "dpo-operator"), "dpo-operator");
    const opKubeconfig = join(work, "operator.kubeconfig");
    const operatorLog = join(work, "operator.log");
    writeFileSync(opKubeconfig, opKc.exportConfig(), { mode: 0o600 });
    operator = spawn(
      process.execPath,
      [
        join(repo, "dist", "dpo.js"),
        "operator",
        "--kubeconfig",
        opKubeconfig,
        "--metrics-addr",
        "0",
        "--health-addr",
        "0",
        "--plugin-image",
        "dpo:demo",
        "--webhook-addr",
        `127.0.0.1:${webhookPort}`,
        "--webhook-hosts",
        "127.0.0.1",
      ],
      {
        stdio: ["ignore", openSync(operatorLog, "a"), "inherit"],
        env: { ...process.env, DPO_LOG_LEVEL: "info" },
      },
    );
    process.stdout.write(`operator log: ${operatorLog}\n`);

    banner(`applying the samples ${SAMPLES.join(" and ")}`);
    for (const sample of SAMPLES) {
      process.stdout.write(await kubectl(["apply", "-f", join(repo, "config", "samples", sample)]));
    }
    const show = async (): Promise<void> => {
      process.stdout.write(`\n$ kubectl get dpc -o wide\n${await kubectl(["get", "dpc", "-o", "wide"])}`);
      process.stdout.write(
        `$ kubectl get devicenodestates -n dpo-system\n${await kubectl(["get", "devicenodestates", "-n", "dpo-system"])}`,
      );
    };
    const dpc = async (
      name: string,
    ): Promise<{
      status?: {
        devices?: { summary?: string };
        conditions?: { type: string; status: string }[];
        problems?: { node: string; reason: string; devices?: string[] }[];
      };
    }> => JSON.parse(await kubectl(["get", "dpc", name, "-o", "json"])) as never;
    const ready = (c: Awaited<ReturnType<typeof dpc>>): boolean =>
      c.status?.conditions?.some((x) => x.type === "Ready" && x.status === "True") ?? false;

    await waitFor(
      "both configs Ready",
      async () => ready(await dpc("example-mock")) && ready(await dpc("example-mock-shared")),
      {
        timeoutMs: 120_000,
        intervalMs: 500,
      },
    );
    banner("both configs are Ready: every node advertises its devices");
    await show();
    process.stdout.write(
      `\n$ kubectl get devicepluginconfigs.v1alpha1.dpo.dev -o wide   # the older API, converted by the operator\n${await kubectl(["get", "devicepluginconfigs.v1alpha1.dpo.dev", "-o", "wide"])}`,
    );

    banner(`a workload asks for two devices of example-mock (${WORKLOAD})`);
    if (realNode) {
      // Pinned to the real node: the same sample, with a node selector.
      const workloadPod = parse(readFileSync(join(repo, WORKLOAD), "utf8")) as {
        spec: Record<string, unknown>;
      };
      workloadPod.spec.nodeSelector = { [REAL_NODE_LABEL]: "true" };
      process.stdout.write(`(on the real node: ${WORKLOAD} with nodeSelector ${REAL_NODE_LABEL}=true)\n`);
      process.stdout.write(await kubectl(["apply", "-f", "-"], JSON.stringify(workloadPod)));
    } else {
      process.stdout.write(await kubectl(["apply", "-f", join(repo, WORKLOAD)]));
    }
    const simulator = sim;
    /** The workload pod as the API and the simulated kubelet see it: where it runs and what it holds. */
    const workload = async (): Promise<{ uid: string; node: string; devices: string; env: string }> => {
      const pod = JSON.parse(await kubectl(["get", "pod", "example-workload", "-o", "json"])) as {
        metadata: { uid: string };
        spec: { nodeName?: string };
        status?: { phase?: string };
      };
      if (pod.status?.phase !== "Running") throw new Error(`example-workload is ${pod.status?.phase}`);
      if (realNode) {
        // The container's environment as containerd started it, read through the real kubelet.
        const env = Object.fromEntries(
          (await kubectl(["exec", "example-workload", "--", "env"]))
            .trim()
            .split("\n")
            .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
        );
        return {
          uid: pod.metadata.uid,
          node: pod.spec.nodeName ?? "",
          devices: env["DPO_HARDWARE_VENDOR_EXAMPLE_FOO"] ?? "",
          env: env["MOCK_DEVICE_IDS"] ?? "",
        };
      }
      const admitted = simulator.admittedPods().find((a) => a.uid === pod.metadata.uid);
      const container = admitted?.containers[0];
      return {
        uid: pod.metadata.uid,
        node: pod.spec.nodeName ?? "",
        devices: (container?.devices[WORKLOAD_RESOURCE] ?? []).join(","),
        env: container?.env["MOCK_DEVICE_IDS"] ?? "",
      };
    };
    const before = await waitFor(
      "example-workload Running with its devices",
      async (observe) => {
        const seen = await workload().catch((err: Error) => err.message);
        observe(seen);
        return typeof seen !== "string" && seen.devices !== "" && seen;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    const describeWorkload = async (w: Awaited<ReturnType<typeof workload>>): Promise<void> => {
      process.stdout.write(
        `\n$ kubectl get pod example-workload -o wide\n${await kubectl(["get", "pod", "example-workload", "-o", "wide"])}` +
          `the ${realNode ? "real " : ""}kubelet on ${w.node} admitted it through the plugin's Allocate: devices ${w.devices}\n` +
          `the container's environment from Allocate: MOCK_DEVICE_IDS=${w.env}\n`,
      );
    };
    await describeWorkload(before);

    const node = cluster.nodeNames[1]!;
    const healthPath = sim.hostPath(node, HEALTH_FILE);
    const writeHealth = (content: object): void => {
      mkdirSync(dirname(healthPath), { recursive: true });
      writeFileSync(`${healthPath}.tmp`, JSON.stringify(content));
      renameSync(`${healthPath}.tmp`, healthPath);
    };
    banner(`device foo-1 on ${node} overheats (its health file: ${HEALTH_FILE} on that node)`);
    writeHealth({ "foo-1": { health: "Unhealthy", reason: "Overheated" } });
    // The kubelet's allocatable (the DEVICES column) and the plugin's report of the device reach the API
    // separately: until both agree the node's problem is a CapacityMismatch, so wait for the device to be named.
    const unhealthy = await waitFor(
      "the unhealthy device in the status",
      async (observe) => {
        const status = (await dpc("example-mock")).status;
        observe({ summary: status?.devices?.summary, problems: status?.problems });
        const named = status?.problems?.some(
          (p) => p.node === node && p.reason === "UnhealthyDevices" && p.devices?.includes("foo-1"),
        );
        return status?.devices?.summary === devicesOf(4, 1) && named === true && status;
      },
      {
        timeoutMs: 60_000,
        intervalMs: 250,
      },
    );
    await show();
    process.stdout.write(`\nproblems: ${JSON.stringify(unhealthy.problems)}\n`);

    banner(`foo-1 on ${node} recovers`);
    writeHealth({});
    await waitFor(
      "the recovery in the status",
      async () => (await dpc("example-mock")).status?.devices?.summary === devicesOf(4),
      {
        timeoutMs: 60_000,
        intervalMs: 250,
      },
    );
    await show();

    type Upgrade = { phase?: string; summary?: string; updateRevision?: string; currentRevision?: string };
    const upgradeOf = async (): Promise<Upgrade | undefined> =>
      ((await dpc("example-mock")) as { status?: { upgrade?: Upgrade } }).status?.upgrade;
    const fromRevision = (await upgradeOf())?.updateRevision;
    banner("upgrading the plugin of example-mock (log level debug): node by node, gated on the kubelet");
    process.stdout.write(
      `  ${cluster.nodeNames[0]} (kubelet v1.37.0)${realNode ? ` and ${realNode.name} (a real kubelet, ${cluster.versions.kubernetes})` : ""} surge: the new plugin starts beside the old one;\n` +
        "  the other nodes' kubelets are older, so there the old plugin stops first (replace).\n",
    );
    process.stdout.write(
      await kubectl([
        "patch",
        "dpc",
        "example-mock",
        "--type=merge",
        "-p",
        JSON.stringify({ spec: { plugin: { logLevel: "debug" } } }),
      ]),
    );
    let lastUpdated = "";
    await waitFor(
      "the upgrade to complete",
      async () => {
        const u = await upgradeOf();
        const line = `${u?.phase ?? "?"} ${u?.summary ?? "?"}`;
        if (line !== lastUpdated) {
          lastUpdated = line;
          process.stdout.write(
            `\n$ kubectl get dpc example-mock\n${await kubectl(["get", "dpc", "example-mock"])}`,
          );
        }
        return (
          u?.phase === "Complete" &&
          u.updateRevision !== fromRevision &&
          u.currentRevision === u.updateRevision &&
          u.summary === `${nodeCount}/${nodeCount}`
        );
      },
      { timeoutMs: 180_000, intervalMs: 250 },
    );
    await waitFor("example-mock Ready after the upgrade", async () => ready(await dpc("example-mock")), {
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    banner("upgrade complete: every node runs the new revision");
    await show();
    const after = await workload();
    await describeWorkload(after);
    if (after.uid !== before.uid || after.devices !== before.devices || after.env !== before.env) {
      throw new Error(
        `example-workload lost its devices in the upgrade: before ${JSON.stringify(before)}, after ${JSON.stringify(after)}`,
      );
    }
    process.stdout.write(
      `example-workload kept its devices through the upgrade: same pod, devices ${after.devices}\n`,
    );

    if (once) {
      banner("demo done (--once)");
    } else {
      banner("the cluster keeps running; try it yourself, Ctrl-C stops everything");
      process.stdout.write(
        `  export KUBECONFIG=${kubeconfig}\n` +
          `  ${join(binDir, "kubectl")} get dpc -o wide\n` +
          `  echo '{"foo-2": "Unhealthy"}' > ${sim.hostPath(cluster.nodeNames[0]!, HEALTH_FILE)}\n`,
      );
      await interrupted;
    }
    await stop();
    return 0;
  } catch (err) {
    process.stderr.write(`demo failed: ${err instanceof Error ? err.message : String(err)}\n`);
    try {
      const tail = readFileSync(join(work, "operator.log"), "utf8").split("\n").slice(-20).join("\n");
      process.stderr.write(`last operator log lines:\n${tail}\n`);
    } catch {
      // The operator had not started.
    }
    await stop();
    return 1;
  }
}

main().then(
  (code) => process.exit(code),
  () => process.exit(1),
);
