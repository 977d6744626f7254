// The real `dpo plugin` on simulated kubelets of the local cluster: a rendered DaemonSet's pods start
// plugins that register, advertise capacity on their Nodes, and react to health, kubelet restarts,
// crashes, rollouts and deletion the way the kubelet would see them.
import {
  AuthenticationV1Api,
  PatchStrategy,
  KubeConfig,
  setHeaderOptions,
  type V1Pod,
} from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { GROUP, PLURAL, VERSION } from "../../src/api/v1beta1/config.js";
import { LABEL_CONFIG, configLabelValue } from "../../src/contract/names.js";
import { MOCK_DEVICE_IDS_ENV } from "../../src/plugin-runtime/backends/mock.js";
import { NODE_INDEX_LABEL, uniqueName, waitFor } from "../cluster/helpers.js";
import { createInformer } from "../../src/kube/informer.js";
import { PODS } from "../../src/kube/resources.js";
import { pluginSockets, type PluginProcessInfo } from "../../tools/kubelet-sim/node-simulator.js";
import {
  DEVICES,
  ID_PREFIX,
  GRACE_PERIOD_MS,
  PLUGIN_SERVICE_ACCOUNT,
  kubeconfig,
  core,
  apps,
  customObjects,
  namespace,
  configName,
  resource,
  slot,
  ofSlot,
  renderContext,
  nodes,
  createdConfigs,
  config,
  simulator,
  node,
  advertised,
  waitForAdvertised,
  writeHealthFile,
  runningPlugins,
  waitForPluginsOfCurrentPods,
  workloadPod,
  podOn,
  expectRejected,
  isAlive,
  applyRendered,
  daemonSetOf,
  createConfig,
  readConfig,
  setConfig,
  useKubeletSim,
} from "./kubelet-sim-support.js";

useKubeletSim();

describe("kubelet simulator with the dpo plugin runtime", () => {
  it("runs the plugin of each node's pod, with the pod's node name, and it registers with that node's kubelet", async () => {
    const plugins = await waitForPluginsOfCurrentPods();
    for (const n of nodes) {
      const dm = simulator().deviceManager(n);
      await waitFor(`the plugin on ${n} to register ${resource}`, (observe) => {
        observe(dm.registrations);
        return dm.resources.get(resource)?.connected;
      });
      const endpoint = dm.resources.get(resource)?.endpoint;
      expect(await pluginSockets(simulator().devicePluginDir(n))).toContain(endpoint);
      expect(dm.refused).toEqual([]);
      // NODE_NAME came from the pod's spec.nodeName through the downward API.
      expect(simulator().pluginLogs(n)).toContain(`"node":"${n}"`);
      expect(plugins.get(n)?.pid).toBeGreaterThan(0);
    }
  });

  it("gives each plugin a token bound to its pod, for the pod's ServiceAccount", async () => {
    const plugins = await waitForPluginsOfCurrentPods();
    for (const n of nodes) {
      const plugin = plugins.get(n);
      expect(plugin?.kubeconfigFile, n).toBeDefined();
      const asPlugin = new KubeConfig();
      asPlugin.loadFromFile(plugin!.kubeconfigFile!);
      const review = await asPlugin.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
      expect(review.status?.userInfo?.username).toBe(
        `system:serviceaccount:${namespace}:${PLUGIN_SERVICE_ACCOUNT}`,
      );
      expect(review.status?.userInfo?.extra?.["authentication.kubernetes.io/pod-uid"]).toEqual([
        plugin!.podUid,
      ]);
      expect(review.status?.userInfo?.extra?.["authentication.kubernetes.io/node-name"]).toEqual([n]);
    }
  });

  it("advertises capacity and allocatable equal to the mock device count on every Node", async () => {
    for (const n of nodes) {
      await waitForAdvertised(n, { capacity: String(DEVICES), allocatable: String(DEVICES) });
      expect(simulator().capacity(n, resource)).toEqual({ capacity: DEVICES, allocatable: DEVICES });
    }
  });

  it("an unhealthy device lowers allocatable on its node only, and recovery restores it", async () => {
    const sick = node(1);
    await writeHealthFile(sick, { [`${ID_PREFIX}-2`]: { health: "Unhealthy", reason: "Overheated" } });
    await waitForAdvertised(sick, { capacity: String(DEVICES), allocatable: String(DEVICES - 1) });
    for (const n of nodes.filter((name) => name !== sick)) {
      expect(await advertised(n)).toEqual({ capacity: String(DEVICES), allocatable: String(DEVICES) });
    }

    await writeHealthFile(sick, {});
    await waitForAdvertised(sick, { capacity: String(DEVICES), allocatable: String(DEVICES) });
  });

  it("a kubelet restart leads to a new registration on a new socket, and capacity comes back", async () => {
    const restarted = node(2);
    const dm = simulator().deviceManager(restarted);
    const registrationsBefore = dm.registrations.length;
    const endpointBefore = dm.resources.get(resource)?.endpoint;
    expect(endpointBefore).toBeDefined();

    await simulator().restartKubelet(restarted);

    const registration = await waitFor(`the plugin on ${restarted} to register again`, (observe) => {
      observe(dm.registrations.map((r) => r.endpoint));
      return dm.registrations.length > registrationsBefore && dm.registrations.at(-1);
    });
    expect(registration.resourceName).toBe(resource);
    expect(registration.endpoint).not.toBe(endpointBefore);
    // The restart deleted the old socket; only the new one is served.
    // Only this resource's: a plugin of another file's config may still be going away on the node.
    const ours = (await pluginSockets(simulator().devicePluginDir(restarted))).filter((name) =>
      name.startsWith(`dpo-${resource.replace("/", "_")}-`),
    );
    expect(ours).toEqual([registration.endpoint]);
    await waitForAdvertised(restarted, { capacity: String(DEVICES), allocatable: String(DEVICES) });
  });

  it("allocates devices through the plugin the way pod admission does", async () => {
    const { deviceIds, response } = await simulator().allocate(node(0), resource, 2);
    expect(deviceIds).toHaveLength(2);
    expect(response.containerResponses[0]?.envs[MOCK_DEVICE_IDS_ENV]?.split(",").sort()).toEqual(
      [...deviceIds].sort(),
    );
  });

  it("a crashed plugin drops allocatable to 0 with capacity kept, until the container is restarted", async () => {
    const crashed = node(0);
    const exit = await simulator().killPlugin(crashed, "SIGKILL", slot);
    expect(exit.signal).toBe("SIGKILL");
    await waitForAdvertised(crashed, { capacity: String(DEVICES), allocatable: "0" });
    // Without a restart the process stays dead, like a container in back-off.
    expect(
      simulator()
        .plugins(crashed)
        .filter((p) => p.running),
    ).toEqual([]);

    simulator().restartPlugin(crashed, slot);
    await waitForAdvertised(crashed, { capacity: String(DEVICES), allocatable: String(DEVICES) });
  });

  it("a plugin pod is Running only once its process started, Ready only once the plugin registered, and not Ready while its process is down", async () => {
    const n = node(1);
    const dm = simulator().deviceManager(n);
    const started = new Map<string, number>();
    const registeredAt: number[] = [];
    const onStarted = (p: PluginProcessInfo): void => {
      if (p.node === n && ofSlot(p, slot)) started.set(p.podUid, performance.now());
    };
    const onRegistered = (r: { resourceName: string }): void => {
      if (r.resourceName === resource) registeredAt.push(performance.now());
    };
    simulator().on("pluginStarted", onStarted);
    dm.on("registered", onRegistered);
    /** Every status of the node's plugin pods as the API sent it, with when it arrived. */
    const seen: { uid: string; at: number; phase?: string; ready: boolean }[] = [];
    const record = (pod: V1Pod): void => {
      if (pod.spec?.nodeName !== n) return;
      seen.push({
        uid: pod.metadata?.uid ?? "",
        at: performance.now(),
        phase: pod.status?.phase,
        ready: (pod.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True"),
      });
    };
    const informer = createInformer<V1Pod>(kubeconfig, {
      resource: PODS,
      namespace,
      labelSelector: `${LABEL_CONFIG}=${configLabelValue(configName)}`,
    });
    informer.onAdd(record);
    informer.onUpdate((_, pod) => record(pod));
    informer.start();
    try {
      await informer.waitForSync();
      const old = (await waitForPluginsOfCurrentPods()).get(n)!;
      await core.deleteNamespacedPod({ name: old.pod.split("/")[1]!, namespace });
      const replacement = await waitFor(`a new plugin pod on ${n} to be Ready`, (observe) => {
        const fresh = seen.filter((e) => e.uid !== old.podUid);
        observe(fresh);
        return fresh.find((e) => e.ready)?.uid;
      });
      const events = seen.filter((e) => e.uid === replacement);
      const firstRunning = events.find((e) => e.phase === "Running");
      const firstReady = events.find((e) => e.ready);
      const startedAt = started.get(replacement);
      expect(startedAt, "the new pod's process started").toBeDefined();
      expect(events[0]?.phase, "the pod as the DaemonSet controller created it").not.toBe("Running");
      expect(firstRunning!.at).toBeGreaterThanOrEqual(startedAt!);
      expect(registeredAt.some((t) => t >= startedAt! && t <= firstReady!.at)).toBe(true);

      // A crash: the container is down, the pod stays Running but not Ready; a restart makes it Ready.
      await simulator().killPlugin(n, "SIGKILL", slot);
      await waitFor(`the plugin pod on ${n} to be not Ready`, async (observe) => {
        const pod = await core.readNamespacedPod({ name: (await podOn(n)).metadata!.name!, namespace });
        observe(pod.status);
        return (
          pod.status?.phase === "Running" &&
          pod.status.conditions?.some((c) => c.type === "Ready" && c.status === "False") &&
          pod.status.containerStatuses?.[0]?.state?.terminated?.exitCode === 137
        );
      });
      simulator().restartPlugin(n, slot);
      await waitFor(`the plugin pod on ${n} to be Ready again`, async (observe) => {
        const pod = await core.readNamespacedPod({ name: (await podOn(n)).metadata!.name!, namespace });
        observe(pod.status);
        return pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
      });
    } finally {
      simulator().off("pluginStarted", onStarted);
      dm.off("registered", onRegistered);
      await informer.stop();
    }
  });

  it("admits a pod that asks for devices through Allocate; it runs with the plugin's devices and env, and they go back when it goes", async () => {
    const n = node(1);
    const dm = simulator().deviceManager(n);
    const pod = await core.createNamespacedPod({
      namespace,
      body: workloadPod(uniqueName("ks-workload"), 2, { nodeSelector: { [NODE_INDEX_LABEL]: "1" } }),
    });
    const uid = pod.metadata!.uid!;
    await waitFor(`the workload pod to run on ${n}`, async (observe) => {
      const current = await core.readNamespacedPod({ name: pod.metadata!.name!, namespace });
      observe(current.status);
      return current.spec?.nodeName === n && current.status?.phase === "Running";
    });
    const admitted = simulator()
      .admittedPods(n)
      .find((p) => p.uid === uid);
    const devices = admitted?.containers[0]?.devices[resource] ?? [];
    expect(devices).toHaveLength(2);
    expect(admitted?.containers[0]?.env[MOCK_DEVICE_IDS_ENV]?.split(",").sort()).toEqual([...devices].sort());
    for (const id of devices) expect(dm.resources.get(resource)?.allocated.has(id)).toBe(true);

    await core.deleteNamespacedPod({ name: pod.metadata!.name!, namespace });
    await waitFor(`the devices of the workload pod on ${n} to go back`, (observe) => {
      observe([...(dm.resources.get(resource)?.allocated ?? [])]);
      return devices.every((id) => !dm.resources.get(resource)?.allocated.has(id));
    });
  });

  it("rejects a pod with UnexpectedAdmissionError when the node has too few healthy devices, as the kubelet does", async () => {
    const n = node(2);
    // Bound by name, past the scheduler (which would not place it): the kubelet still checks.
    const tooMany = await core.createNamespacedPod({
      namespace,
      body: workloadPod(uniqueName("ks-too-many"), DEVICES + 1, { nodeName: n }),
    });
    await expectRejected(
      tooMany,
      `Pod was rejected: Allocate failed due to requested number of devices unavailable for ${resource}. ` +
        `Requested: ${DEVICES + 1}, Available: ${DEVICES}, which is unexpected`,
    );

    // A plugin that is down leaves no healthy device (kubernetes #109595).
    await simulator().killPlugin(n, "SIGKILL", slot);
    const whileDown = await core.createNamespacedPod({
      namespace,
      body: workloadPod(uniqueName("ks-plugin-down"), 1, { nodeName: n }),
    });
    await expectRejected(
      whileDown,
      `Pod was rejected: Allocate failed due to no healthy devices present; cannot allocate unhealthy devices ${resource}, which is unexpected`,
    );
  });

  it("a second config on one node registers through the plugin watcher, next to the first", async () => {
    const labelled = await core.listNode({ labelSelector: `${NODE_INDEX_LABEL}=0` });
    const watcherNode = labelled.items[0]?.metadata?.name ?? "no node labelled with index 0";
    const name = uniqueName("ks-watcher");
    createdConfigs.push(name);
    const watcherResource = `kubelet-sim.example/${uniqueName("watcher")}`;
    const watcherSlot = `${namespace}/${configLabelValue(name)}`;
    const watched = await createConfig(name, {
      resourceName: watcherResource,
      backend: { type: "Mock", mock: { devices: 2, idPrefix: "kw" } },
      nodeSelector: { [NODE_INDEX_LABEL]: "0" },
    });
    await applyRendered(watched, { ...renderContext, registrationMode: "watcher" });

    const dm = simulator().deviceManager(watcherNode);
    const registration = await waitFor(
      `${watcherResource} to register through plugins_registry`,
      (observe) => {
        observe(dm.watcherRegistrations);
        return dm.watcherRegistrations.find((r) => r.registered && r.info?.name === watcherResource);
      },
    );
    expect(registration.socket.startsWith(simulator().pluginsRegistryDir(watcherNode))).toBe(true);
    await waitFor(`${watcherNode} to advertise ${watcherResource}`, async (observe) => {
      const status = (await core.readNode({ name: watcherNode })).status;
      observe(status?.allocatable);
      return status?.capacity?.[watcherResource] === "2" && status.allocatable?.[watcherResource] === "2";
    });
    // Two configs, two processes on the node; the first one's plugin is untouched.
    expect(
      simulator()
        .plugins(watcherNode)
        .filter((p) => p.running)
        .map((p) => p.slot.split("/").slice(0, 2).join("/"))
        .sort(),
    ).toEqual([slot, watcherSlot].sort());
    expect(
      simulator()
        .plugins()
        .filter((p) => ofSlot(p, watcherSlot)),
    ).toHaveLength(1);
    expect(await advertised(watcherNode)).toEqual({
      capacity: String(DEVICES),
      allocatable: String(DEVICES),
    });

    // The plugin going away (its stream ends, its registration socket goes) keeps capacity, not allocatable.
    await apps.deleteNamespacedDaemonSet({ name: daemonSetOf(name), namespace });
    await waitFor(`the plugin of ${name} to stop`, () =>
      simulator()
        .plugins(watcherNode)
        .every((p) => !ofSlot(p, watcherSlot) || !p.running),
    );
    await waitFor(`${watcherNode} to keep ${watcherResource} with allocatable 0`, async (observe) => {
      const status = (await core.readNode({ name: watcherNode })).status;
      observe(status?.allocatable);
      return status?.capacity?.[watcherResource] === "2" && status.allocatable?.[watcherResource] === "0";
    });
  });

  it("a new revision's DaemonSet replaces every plugin process with the new pod's once the old one goes", async () => {
    const before = await waitForPluginsOfCurrentPods();
    const oldDaemonSet = daemonSetOf(configName);
    // Any spec change renders a new config hash into the pod template, which rolls the pods.
    await customObjects.patchClusterCustomObject(
      {
        group: GROUP,
        version: VERSION,
        plural: PLURAL,
        name: configName,
        body: { spec: { backend: { mock: { attributes: { revision: "2" } } } } },
      },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    setConfig(await readConfig());
    // A new revision is a new DaemonSet. These nodes' kubelets (before v1.37.0) keep one endpoint per
    // resource, so the old one goes first, as a Replace upgrade does it.
    await apps.deleteNamespacedDaemonSet({ name: oldDaemonSet, namespace });
    expect(await applyRendered(config)).not.toBe(oldDaemonSet);

    const after = await waitFor(
      "every node's plugin to belong to a new pod",
      async () => {
        const current = await waitForPluginsOfCurrentPods();
        return nodes.every((n) => current.get(n)?.podUid !== before.get(n)?.podUid) && current;
      },
      { timeoutMs: 120_000 },
    );
    for (const n of nodes) {
      const old = before.get(n)?.pid;
      if (old !== undefined) expect(isAlive(old), `old plugin pid ${old} on ${n}`).toBe(false);
      expect(after.get(n)?.pid).not.toBe(old);
      await waitForAdvertised(n, { capacity: String(DEVICES), allocatable: String(DEVICES) });
    }
  });

  it("deleting the DaemonSet stops every plugin process; the kubelet keeps capacity, then drops the resource", async () => {
    const pids = simulator()
      .plugins()
      .filter((p) => ofSlot(p, slot))
      .map((p) => p.pid)
      .filter((pid): pid is number => pid !== undefined);
    expect(pids.length).toBeGreaterThanOrEqual(nodes.length);

    await apps.deleteNamespacedDaemonSet({ name: daemonSetOf(configName), namespace });

    await waitFor(
      "every plugin process to exit",
      (observe) => {
        const alive = pids.filter(isAlive);
        observe({ alive, running: runningPlugins() });
        return alive.length === 0 && runningPlugins().length === 0;
      },
      { timeoutMs: 60_000 },
    );
    for (const n of nodes) await waitForAdvertised(n, { capacity: String(DEVICES), allocatable: "0" });
    // After the grace period the kubelet reports the resource at 0, as it does for a removed plugin.
    for (const n of nodes) {
      await waitForAdvertised(n, { capacity: "0", allocatable: "0" }, GRACE_PERIOD_MS + 30_000);
    }
  });
});
