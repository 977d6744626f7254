// The kubelet simulator's DRA side against the project's DraPlugin, in-process over real unix sockets:
// the simulated plugin watcher hands a DRAPlugin socket to the DRA manager, which chooses the gRPC
// service as a kubelet of the node's version does (v1 on 1.34, v1beta1 on 1.33), and prepares and
// unprepares claims through it. A starting kubelet deletes its node's ResourceSlices, and a restarted
// one registers the plugin again.
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type {
  ClaimReference,
  DraResourceClaim,
  ResourceClaimGetter,
} from "../../src/plugin-runtime/dra/claim.js";
import type { DraNodeDevice } from "../../src/plugin-runtime/dra/devices.js";
import { DraPlugin } from "../../src/plugin-runtime/dra/dra-plugin.js";
import { SimulatedDeviceManager } from "../../tools/kubelet-sim/device-manager.js";
import { SimulatedDraManager, type DeleteResourceSlices } from "../../tools/kubelet-sim/dra-manager.js";
import type { ClaimForPrepare } from "../../tools/kubelet-sim/dra-rules.js";
import type { V1Pod } from "@kubernetes/client-node";
import { tempDir, waitFor } from "./support.js";

const DRIVER = "foo.example.com";
const NODE = "node-1";

class FakeClaims implements ResourceClaimGetter {
  readonly objects = new Map<string, DraResourceClaim>();
  getResourceClaim(ref: ClaimReference): Promise<DraResourceClaim | undefined> {
    return Promise.resolve(this.objects.get(`${ref.namespace}/${ref.name}`));
  }
  add(namespace: string, name: string, uid: string, devices: string[]): ClaimReference {
    this.objects.set(`${namespace}/${name}`, {
      metadata: { namespace, name, uid },
      status: {
        allocation: {
          devices: {
            results: devices.map((device) => ({ request: "foo", driver: DRIVER, pool: NODE, device })),
          },
        },
      },
    });
    return { namespace, name, uid };
  }
}

const device = (name: string): DraNodeDevice => ({
  name,
  physicalId: name,
  health: "Healthy",
  reason: "",
  containerEdits: { env: [`DEV=${name}`] },
});

interface Setup {
  plugin: DraPlugin;
  claims: FakeClaims;
  dra: SimulatedDraManager | undefined;
  kubelet: SimulatedDeviceManager;
  cdiDir: string;
}

let cleanups: (() => Promise<void> | void)[] = [];

afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

async function setup(
  kubeletVersion: string | undefined,
  deleteSlices?: DeleteResourceSlices,
): Promise<Setup> {
  const root = tempDir("ks-dra");
  const cdiDir = join(root.dir, "cdi");
  const registryDir = join(root.dir, "plugins_registry");
  const claims = new FakeClaims();
  const plugin = new DraPlugin({
    driverName: DRIVER,
    nodeName: NODE,
    devices: () => [device("foo-0"), device("foo-1")],
    claims,
    logger: pino({ level: "silent" }),
    pluginDir: join(root.dir, "plugins", DRIVER),
    registryDir,
    cdiDir,
  });
  const dra =
    kubeletVersion === undefined
      ? undefined
      : new SimulatedDraManager(
          kubeletVersion,
          deleteSlices === undefined ? undefined : { nodeName: NODE, deleteSlices },
        );
  // As in the kubelet, the DRA manager starts (and deletes the node's slices) before the plugin watcher.
  await dra?.start();
  const kubelet = new SimulatedDeviceManager({
    dir: join(root.dir, "device-plugins"),
    pluginsRegistryDir: registryDir,
    ...(dra ? { pluginHandlers: { DRAPlugin: dra } } : {}),
  });
  cleanups.push(() => root.cleanup());
  await kubelet.start();
  cleanups.push(() => kubelet.stop());
  await plugin.start();
  cleanups.push(() => plugin.stop());
  if (dra) cleanups.push(() => dra.close());
  return { plugin, claims, dra, kubelet, cdiDir };
}

describe("the simulated kubelet's DRA manager with the DraPlugin", () => {
  it.each([
    ["v1.34.4", "v1.DRAPlugin"],
    ["v1.33.2", "v1beta1.DRAPlugin"],
  ])(
    "a %s node registers the plugin through %s and prepares and unprepares through it",
    async (version, service) => {
      const { plugin, claims, dra, cdiDir } = await setup(version);
      const driver = await waitFor("the driver registered", () => dra!.driver(DRIVER));
      expect(driver).toMatchObject({
        service,
        endpoint: plugin.endpoint,
        registrationSocket: plugin.registrationSocket,
      });
      await waitFor("the verdict at the plugin", () => plugin.registrationStatus());
      expect(plugin.registrationStatus()).toEqual({ registered: true, error: "" });

      const uid = "a1b2c3d4-0000-4000-8000-000000000001";
      const ref = claims.add("ml", "claim-a", uid, ["foo-1"]);
      const prepared = await dra!.prepare(DRIVER, [ref]);
      expect(prepared.get(uid)).toEqual({
        error: "",
        devices: [
          {
            requestNames: ["foo"],
            poolName: NODE,
            deviceName: "foo-1",
            cdiDeviceIds: [`${DRIVER}/device=${uid}-foo-1`],
          },
        ],
      });
      expect(readdirSync(cdiDir)).toEqual([`${DRIVER}-device_${uid}.json`]);

      expect(await dra!.unprepare(DRIVER, [ref])).toEqual(new Map([[uid, ""]]));
      expect(existsSync(join(cdiDir, `${DRIVER}-device_${uid}.json`))).toBe(false);
      expect(dra!.calls.map((c) => [c.method, c.service])).toEqual([
        ["prepare", service],
        ["unprepare", service],
      ]);
    },
  );

  it("surfaces a prepare error per claim, the other claim of the call prepared", async () => {
    const { claims, dra } = await setup("v1.34.4");
    await waitFor("the driver registered", () => dra!.driver(DRIVER));
    const good = claims.add("ml", "good", "a1b2c3d4-0000-4000-8000-000000000002", ["foo-0"]);
    const missing = { namespace: "ml", name: "gone", uid: "a1b2c3d4-0000-4000-8000-000000000003" };
    const prepared = await dra!.prepare(DRIVER, [good, missing]);
    expect(prepared.get(good.uid)?.error).toBe("");
    expect(prepared.get(good.uid)?.devices).toHaveLength(1);
    expect(prepared.get(missing.uid)?.error).not.toBe("");
    expect(prepared.get(missing.uid)?.devices).toEqual([]);
  });

  it("refuses calls for a driver that never registered", async () => {
    const { dra } = await setup("v1.34.4");
    await expect(dra!.prepare("other.example.com", [])).rejects.toThrow(
      "DRA driver other.example.com is not registered",
    );
  });

  it("forgets the driver when its registration socket goes", async () => {
    const { plugin, dra } = await setup("v1.34.4");
    await waitFor("the driver registered", () => dra!.driver(DRIVER));
    await plugin.stop();
    await waitFor("the driver deregistered", () => dra!.driver(DRIVER) === undefined);
  });

  it("without a DRA handler the watcher refuses the socket as the kubelet does", async () => {
    const { plugin, kubelet } = await setup(undefined);
    const status = await waitFor("the verdict at the plugin", () => plugin.registrationStatus());
    expect(status.registered).toBe(false);
    expect(status.error).toBe(
      `RegisterPlugin error -- no handler registered for plugin type: DRAPlugin at socket ${plugin.registrationSocket}`,
    );
    expect(kubelet.resources.size).toBe(0);
  });
});

describe("the simulated kubelet's PrepareResources and UnprepareResources for pods", () => {
  const POD_UID = "pod-uid-1";
  const pod = (claims: { name: string; claimName: string }[], uid = POD_UID, name = "w"): V1Pod => ({
    metadata: { name, namespace: "ml", uid },
    spec: {
      containers: [{ name: "c" }],
      resourceClaims: claims.map((c) => ({ name: c.name, resourceClaimTemplateName: "t" })),
    },
    status: { resourceClaimStatuses: claims.map((c) => ({ name: c.name, resourceClaimName: c.claimName })) },
  });
  /** The API server's claims: what the plugin's getter reads, plus reservedFor for the kubelet's check. */
  function apiClaims(claims: FakeClaims, reservedFor: string[]) {
    return (namespace: string, name: string): Promise<ClaimForPrepare> => {
      const c = claims.objects.get(`${namespace}/${name}`);
      if (c === undefined) return Promise.reject(new Error(`resourceclaims "${name}" not found`));
      return Promise.resolve({
        metadata: { name, namespace, uid: c.metadata?.uid ?? "" },
        status: {
          allocation: { devices: { results: [{ driver: DRIVER }] } },
          reservedFor: reservedFor.map((uid) => ({ resource: "pods", name: "w", uid })),
        },
      });
    };
  }

  it("prepares a pod's claims, records their CDI ids, and unprepares when the last pod using them goes", async () => {
    const { claims, dra, cdiDir } = await setup("v1.34.4");
    await waitFor("the driver registered", () => dra!.driver(DRIVER));
    const a = claims.add("ml", "w-a-x1", "a1b2c3d4-0000-4000-8000-00000000000a", ["foo-0"]);
    const b = claims.add("ml", "shared", "a1b2c3d4-0000-4000-8000-00000000000b", ["foo-1"]);
    const read = apiClaims(claims, [POD_UID, "pod-uid-2"]);
    const first = await dra!.preparePod(
      pod([
        { name: "a", claimName: a.name },
        { name: "b", claimName: b.name },
      ]),
      read,
    );
    expect(first).toEqual({
      pod: "ml/w",
      uid: POD_UID,
      claims: { a: { name: a.name, uid: a.uid }, b: { name: b.name, uid: b.uid } },
      cdiDeviceIds: { a: [`${DRIVER}/device=${a.uid}-foo-0`], b: [`${DRIVER}/device=${b.uid}-foo-1`] },
    });
    // A second pod sharing claim b: already prepared, not asked again.
    const second = await dra!.preparePod(pod([{ name: "b", claimName: b.name }], "pod-uid-2"), read);
    expect(second.cdiDeviceIds).toEqual({ b: [`${DRIVER}/device=${b.uid}-foo-1`] });
    expect(dra!.calls.filter((c) => c.method === "prepare").map((c) => c.claims)).toEqual([[a.uid, b.uid]]);

    await dra!.unpreparePod(POD_UID);
    expect(dra!.calls.at(-1)).toMatchObject({ method: "unprepare", claims: [a.uid] });
    expect(readdirSync(cdiDir)).toEqual([`${DRIVER}-device_${b.uid}.json`]);
    await dra!.unpreparePod("pod-uid-2");
    expect(dra!.calls.at(-1)).toMatchObject({ method: "unprepare", claims: [b.uid] });
    expect(readdirSync(cdiDir)).toEqual([]);
    expect(dra!.prepared.size).toBe(0);
  });

  it("fails the pod's prepare with the kubelet's messages", async () => {
    const { claims, dra } = await setup("v1.34.4");
    await waitFor("the driver registered", () => dra!.driver(DRIVER));
    const c = claims.add("ml", "c", "a1b2c3d4-0000-4000-8000-00000000000c", ["no-such-device"]);
    await expect(
      dra!.preparePod(pod([{ name: "c", claimName: "c" }]), apiClaims(claims, [POD_UID])),
    ).rejects.toThrow(/^prepare dynamic resources: NodePrepareResources failed for ResourceClaim c: .+/);
    await expect(
      dra!.preparePod(pod([{ name: "c", claimName: "c" }]), apiClaims(claims, ["other"])),
    ).rejects.toThrow(
      `prepare dynamic resources: pod w (${POD_UID}) is not allowed to use ResourceClaim c (${c.uid})`,
    );
    await expect(
      dra!.preparePod(pod([{ name: "x", claimName: "gone" }]), apiClaims(claims, [POD_UID])),
    ).rejects.toThrow('prepare dynamic resources: fetch ResourceClaim gone: resourceclaims "gone" not found');
    expect(dra!.prepared.size).toBe(0);
  });

  it("unprepares on the pod's deletion what a failed prepare of the pod left prepared", async () => {
    const { claims, dra, cdiDir } = await setup("v1.34.4");
    await waitFor("the driver registered", () => dra!.driver(DRIVER));
    const ok = claims.add("ml", "ok", "a1b2c3d4-0000-4000-8000-00000000000d", ["foo-0"]);
    const read = apiClaims(claims, [POD_UID]);
    // One call for both claims: the plugin prepares the first and fails the second.
    claims.add("ml", "bad", "a1b2c3d4-0000-4000-8000-00000000000e", ["no-such-device"]);
    await expect(
      dra!.preparePod(
        pod([
          { name: "ok", claimName: "ok" },
          { name: "bad", claimName: "bad" },
        ]),
        read,
      ),
    ).rejects.toThrow("NodePrepareResources failed for ResourceClaim bad");
    expect([...dra!.prepared.keys()]).toEqual([ok.uid]);
    expect(readdirSync(cdiDir)).toEqual([`${DRIVER}-device_${ok.uid}.json`]);
    await dra!.unpreparePod(POD_UID);
    expect(readdirSync(cdiDir)).toEqual([]);
    expect(dra!.prepared.size).toBe(0);
  });
});

describe("the simulated kubelet's start and restart", () => {
  /** Records each DeleteCollection; the first `failures` calls fail as an unreachable API server would. */
  function recorder(failures: number): {
    calls: { selector: string; atMs: number }[];
    fn: DeleteResourceSlices;
  } {
    const calls: { selector: string; atMs: number }[] = [];
    return {
      calls,
      fn: (selector) => {
        calls.push({ selector, atMs: performance.now() });
        return calls.length <= failures
          ? Promise.reject(new Error("connect ECONNREFUSED 127.0.0.1:6443"))
          : Promise.resolve();
      },
    };
  }

  it("deletes every ResourceSlice of its node, of every driver, and tries again after the kubelet's backoff", async () => {
    const wipe = recorder(1);
    const dra = new SimulatedDraManager("v1.34.4", { nodeName: NODE, deleteSlices: wipe.fn });
    cleanups.push(() => dra.close());
    await dra.start();
    expect(wipe.calls.map((c) => c.selector)).toEqual(["spec.nodeName=node-1", "spec.nodeName=node-1"]);
    // wipeResourceSlices: 1 s first, with up to 20% jitter.
    const gap = wipe.calls[1]!.atMs - wipe.calls[0]!.atMs;
    expect(gap).toBeGreaterThanOrEqual(990);
    expect(gap).toBeLessThan(1_500);
  });

  it("a restart forgets the drivers, deletes the node's slices again, keeps prepared claims, and the plugin registers again", async () => {
    const wipe = recorder(0);
    const { claims, dra, kubelet } = await setup("v1.34.4", wipe.fn);
    await waitFor("the driver registered", () => dra!.driver(DRIVER));
    const uid = "a1b2c3d4-0000-4000-8000-000000000009";
    await dra!.prepare(DRIVER, [claims.add("ml", "kept", uid, ["foo-0"])]);
    const kept = dra!.prepared.size;
    expect(wipe.calls).toHaveLength(1);

    await dra!.restart();
    expect(dra!.driver(DRIVER)).toBeUndefined();
    expect(wipe.calls).toHaveLength(2);
    await kubelet.restart();
    await waitFor("the driver registered with the restarted kubelet", () => dra!.driver(DRIVER), {
      timeoutMs: 5_000,
      intervalMs: 10,
    });
    expect(dra!.prepared.size).toBe(kept);
  });
});
