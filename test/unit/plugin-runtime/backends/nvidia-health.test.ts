// Health that waits for a reset: XID classes, the memory-error counters, /dev/kmsg read without a dmesg
// binary, and the acceptance case: XID 95 with clean nvidia-smi rows keeps the GPU unhealthy across
// refreshes until the reset is seen (test/fixtures/nvidia/health/SOURCE.md says how the inputs were made).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { NVIDIABackendSchema, type NVIDIABackend } from "../../../../src/api/v1beta1/spec.js";
import { NVIDIADeviceBackend } from "../../../../src/plugin-runtime/backends/nvidia.js";
import { taintValue } from "../../../../src/plugin-runtime/dra/taints.js";
import {
  REASON_ROW_REMAP_FAILURE,
  REASON_ROW_REMAP_PENDING,
  XidHolds,
  classifyXid,
  countersReason,
  xidReason,
  parseDriverLoads,
  parseHealthQuery,
  type HealthCounters,
} from "../../../../src/plugin-runtime/backends/nvidia-health.js";
import {
  KmsgReader,
  kmsgToDmesg,
  type KmsgFile,
} from "../../../../src/plugin-runtime/backends/nvidia-kmsg.js";
import type { GpuRow } from "../../../../src/plugin-runtime/backends/nvidia-smi.js";
import { NVIDIA_FIXTURES, fakeGpuNode, type FakeGpuNode } from "../../../fixtures/nvidia/fake-node.js";
import { byId, captureLogs, waitForDevices, type CapturedLogs } from "./backend-wait.js";

const A100 = "GPU-4d3c2f8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f";
const DEFAULT_IGNORED = [13, 31, 43, 45, 68, 109];
const fixture = (name: string) => readFileSync(join(NVIDIA_FIXTURES, "health", name), "utf8");

describe("XID classes", () => {
  it.each([
    [13, "Application"],
    [31, "Application"],
    [43, "Application"],
    [45, "Application"],
    [48, "ResetRequired"],
    [63, "ResetRequired"],
    [64, "ResetRequired"],
    [74, "ResetRequired"],
    [79, "ResetRequired"],
    [94, "ResetRequired"],
    [95, "ResetRequired"],
    [119, "ResetRequired"],
    [120, "ResetRequired"],
    [92, "Transient"],
    [8, "Transient"],
  ])("XID %i is %s", (xid, cls) => {
    expect(classifyXid(xid, DEFAULT_IGNORED)).toBe(cls);
  });

  it("the reason names the class, and survives as a DRA taint value unchanged", () => {
    expect(xidReason(95, "ResetRequired")).toBe("XID95-ResetRequired");
    for (const reason of [
      xidReason(95, "ResetRequired"),
      xidReason(92, "Transient"),
      REASON_ROW_REMAP_PENDING,
    ]) {
      expect(taintValue(reason)).toBe(reason);
    }
  });

  it("a config's ignoredXids decide what counts as an application error", () => {
    expect(classifyXid(13, [])).toBe("Transient");
    expect(classifyXid(95, [95])).toBe("Application");
  });
});

describe("memory-error counters", () => {
  it("reads the second --query-gpu: counts, Yes/No and [N/A]", () => {
    expect(parseHealthQuery(fixture("counters-after-xid95.csv"))).toEqual({
      counters: new Map([
        [
          A100,
          {
            eccUncorrectedVolatile: 1,
            eccUncorrectedAggregate: 1,
            remappedRowsPending: true,
            remappedRowsFailure: false,
          },
        ],
      ]),
      problems: [],
    });
    const none = parseHealthQuery(`${A100}, [N/A], [N/A], [N/A], [N/A]\n`).counters.get(A100);
    expect(none).toEqual({
      eccUncorrectedVolatile: undefined,
      eccUncorrectedAggregate: undefined,
      remappedRowsPending: undefined,
      remappedRowsFailure: undefined,
    });
    expect(parseHealthQuery("Field is not a valid field to query.\n").problems).toEqual([
      expect.stringMatching(/^line 1: expected uuid, ecc/),
    ]);
    expect(parseHealthQuery(`${A100}, 1, 1, Maybe, No\n`).problems).toEqual([
      expect.stringMatching(/remapped_rows.pending "Maybe" is not a count, Yes or No/),
    ]);
  });

  it("rows pending remapping or a failed remapping make the GPU wait for a reset", () => {
    const c = (pending: boolean, failure: boolean): HealthCounters => ({
      eccUncorrectedVolatile: 0,
      eccUncorrectedAggregate: 0,
      remappedRowsPending: pending,
      remappedRowsFailure: failure,
    });
    expect([c(false, false), c(true, false), c(true, true)].map(countersReason)).toEqual([
      "",
      REASON_ROW_REMAP_PENDING,
      REASON_ROW_REMAP_FAILURE,
    ]);
    expect(countersReason(undefined)).toBe("");
  });
});

describe("the kernel log from /dev/kmsg", () => {
  it("turns records into dmesg's lines and drops dictionary lines", () => {
    expect(kmsgToDmesg(fixture("xid95.kmsg")).split("\n")).toEqual([
      "[ 5121.770950] NVRM: GPU at PCI:0000:3b:00: GPU-4d3c2f8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f",
      "[ 5121.771002] NVRM: Xid (PCI:0000:3b:00): 95, pid=7062, Uncontained: LTC TAG (0x2,0x1). RST: Yes, D-RST: No",
    ]);
    expect(parseDriverLoads(kmsgToDmesg(fixture("driver-reload.kmsg")))).toEqual([5402.912345]);
  });

  /** A /dev/kmsg stand-in: each read returns the next step (a record, or an error code to throw). */
  function scripted(steps: (string | { code: string })[]): KmsgFile & { closed: boolean } {
    const file = {
      closed: false,
      read(buffer: Buffer) {
        const step = steps.shift() ?? { code: "EAGAIN" };
        if (typeof step !== "string") return Promise.reject(Object.assign(new Error(step.code), step));
        return Promise.resolve({ bytesRead: buffer.write(step) });
      },
      close() {
        file.closed = true;
        return Promise.resolve();
      },
    };
    return file;
  }

  it("counts records the ring buffer overwrote (EPIPE) and stops at EAGAIN", async () => {
    const file = scripted([
      "4,10,1000000,-;NVRM: first\n",
      { code: "EPIPE" },
      "4,20,2000000,-;NVRM: Xid (PCI:0000:3b:00): 95, pid=1, Uncontained\n",
      { code: "EAGAIN" },
      "4,30,3000000,-;NVRM: later\n",
    ]);
    const reader = new KmsgReader("/dev/kmsg", () => Promise.resolve(file));
    expect(await reader.read()).toEqual({
      ok: true,
      text: "[    1.000000] NVRM: first\n[    2.000000] NVRM: Xid (PCI:0000:3b:00): 95, pid=1, Uncontained",
      lost: 1,
    });
    expect(await reader.read()).toEqual({ ok: true, text: "[    3.000000] NVRM: later", lost: 0 });
    await reader.close();
    expect(file.closed).toBe(true);
  });

  it("says why when it may not read the kernel log, and tries again next time", async () => {
    let attempts = 0;
    const reader = new KmsgReader("/dev/kmsg", () => {
      attempts++;
      return Promise.reject(Object.assign(new Error("EPERM: operation not permitted"), { code: "EPERM" }));
    });
    const read = await reader.read();
    expect(read).toEqual({
      ok: false,
      message: expect.stringMatching(/^cannot read \/dev\/kmsg: permission denied/),
    });
    expect(read.ok === false && read.message).toMatch(/CAP_SYSLOG .*device cgroup must allow \/dev\/kmsg/);
    await reader.read();
    expect(attempts).toBe(2);
  });
});

describe("XidHolds: what counts as a reset", () => {
  const row = (errors: Record<string, string> = {}): GpuRow =>
    ({ uuid: A100, fieldErrors: errors, pagesPendingRetirement: false }) as unknown as GpuRow;
  const counters = (volatile: number): HealthCounters => ({
    eccUncorrectedVolatile: volatile,
    eccUncorrectedAggregate: 1,
    remappedRowsPending: false,
    remappedRowsFailure: false,
  });
  const xid95 = { timestamp: 100, pciDevice: "0000:3b:00", xid: 95, detail: "Uncontained" };

  it("a Transient XID is released by the next clean poll", () => {
    const holds = new XidHolds();
    holds.hold(A100, { ...xid95, xid: 92 }, "Transient", 1, undefined);
    expect(holds.polled(A100, row(), undefined, 1)).toBeUndefined();
    expect(holds.polled(A100, row(), undefined, 2)?.xid).toBe(92);
  });

  it("ResetRequired: clean polls are not enough; the volatile ECC count clearing is a reset", () => {
    const holds = new XidHolds();
    holds.hold(A100, xid95, "ResetRequired", 1, 1);
    for (let refresh = 2; refresh < 6; refresh++)
      expect(holds.polled(A100, row(), counters(1), refresh)).toBeUndefined();
    expect(holds.polled(A100, row(), counters(0), 6)?.resetSeen).toBe(
      "its volatile ECC counters were cleared",
    );
  });

  it("ResetRequired: a GPU that could not be read and now can went through a reset", () => {
    const holds = new XidHolds();
    holds.hold(A100, { ...xid95, xid: 79 }, "ResetRequired", 1, undefined);
    expect(holds.polled(A100, undefined, undefined, 2)).toBeUndefined();
    expect(holds.polled(A100, row({ name: "[GPU requires reset]" }), undefined, 3)).toBeUndefined();
    expect(holds.polled(A100, row(), undefined, 4)?.resetSeen).toBe("it could not be read, and now can");
  });

  it("ResetRequired: only a driver load after the XID is a reset, and the poll must still be clean", () => {
    const holds = new XidHolds();
    holds.hold(A100, xid95, "ResetRequired", 1, undefined);
    holds.driverLoaded(12.9);
    expect(holds.polled(A100, row(), undefined, 2)).toBeUndefined();
    holds.driverLoaded(200);
    const pending = { ...counters(0), remappedRowsPending: true };
    expect(holds.polled(A100, row(), pending, 3)).toBeUndefined();
    expect(holds.polled(A100, row(), counters(0), 4)?.resetSeen).toBe("the NVIDIA driver loaded again");
  });
});

describe("NVIDIADeviceBackend: XID 95 from /dev/kmsg with clean nvidia-smi rows", () => {
  let node: FakeGpuNode | undefined;
  let backend: NVIDIADeviceBackend | undefined;
  afterEach(async () => {
    await backend?.stop();
    node?.remove();
    backend = node = undefined;
  });

  async function start(extra: Partial<NVIDIABackend> = {}): Promise<CapturedLogs> {
    node = fakeGpuNode("single-gpu");
    node.write("health-query.csv", fixture("counters-clean.csv"));
    node.appendKmsg(fixture("boot.kmsg"));
    const logs = captureLogs();
    const config = NVIDIABackendSchema.parse({
      nvidiaSmiPath: node.nvidiaSmiPath,
      devRoot: node.devRoot,
      sysfsRoot: node.sysfsRoot,
      timeoutSeconds: 2,
      // No dmesgPath: the kernel log is read from the (stand-in) /dev/kmsg, no dmesg binary runs.
      kmsgPath: node.kmsgPath,
      ...extra,
    });
    backend = new NVIDIADeviceBackend(config, { logger: logs.logger, pollIntervalMs: 40 });
    await backend.start();
    return logs;
  }

  const refreshesAfter = async (logs: CapturedLogs, count: number) => {
    const done = () => logs.lines.filter((l) => l.msg === "NVIDIA refresh done").length;
    const seen = done();
    await logs.waitFor(() => done() >= seen + count, `${count} more refreshes`);
  };

  it("stays unhealthy across refreshes until the driver reloads, then recovers", async () => {
    const logs = await start();
    expect(byId(backend!.devices(), A100)?.health).toBe("Healthy");
    expect(backend!.diagnostics()).toEqual([]);

    node!.appendKmsg(fixture("xid95.kmsg"));
    node!.write("health-query.csv", fixture("counters-xid95-no-remap.csv"));
    await waitForDevices(backend!, (d) => byId(d, A100)?.reason === "XID95-ResetRequired", "XID 95");
    // Every nvidia-smi row and counter reads clean, the volatile count stays: no reset, no recovery.
    await refreshesAfter(logs, 5);
    expect(byId(backend!.devices(), A100)).toMatchObject({
      health: "Unhealthy",
      reason: "XID95-ResetRequired",
    });

    node!.appendKmsg(fixture("driver-reload.kmsg"));
    await waitForDevices(backend!, (d) => byId(d, A100)?.health === "Healthy", "the GPU after the reload");
  });

  it("an XID and the driver reload read together: held, then released by the next clean poll", async () => {
    await start();
    const held = waitForDevices(backend!, (d) => byId(d, A100)?.reason === "XID95-ResetRequired", "XID 95");
    node!.appendKmsg(fixture("xid95.kmsg") + fixture("driver-reload.kmsg"));
    await held;
    await waitForDevices(backend!, (d) => byId(d, A100)?.health === "Healthy", "the GPU after the reload");
  });

  it("a pending row remap holds it too; the reset clears the volatile count and the pending row", async () => {
    const logs = await start();
    node!.write("health-query.csv", fixture("counters-after-xid95.csv"));
    node!.appendKmsg(fixture("xid95.kmsg"));
    await waitForDevices(backend!, (d) => byId(d, A100)?.reason === "XID95-ResetRequired", "XID 95");
    await refreshesAfter(logs, 3);
    expect(byId(backend!.devices(), A100)?.health).toBe("Unhealthy");

    node!.write("health-query.csv", fixture("counters-after-reset.csv"));
    await waitForDevices(backend!, (d) => byId(d, A100)?.health === "Healthy", "the GPU after the reset");
    await logs.waitFor(
      (l) => l.msg === "GPU recovered after XID" && l.resetSeen === "its volatile ECC counters were cleared",
      "the recovery, with the reset named",
    );
  });

  it("without a hold, a row pending remapping alone makes the GPU unhealthy until it clears", async () => {
    await start();
    node!.write("health-query.csv", fixture("counters-after-xid95.csv"));
    await waitForDevices(
      backend!,
      (d) => byId(d, A100)?.reason === REASON_ROW_REMAP_PENDING,
      "the pending row",
    );
    node!.write("health-query.csv", fixture("counters-after-reset.csv"));
    await waitForDevices(backend!, (d) => byId(d, A100)?.health === "Healthy", "the row remapped");
  });

  it("a kernel log it cannot open is a diagnostic naming the path, and the GPU stays served", async () => {
    await start({ kmsgPath: "/nonexistent/kmsg" });
    expect(byId(backend!.devices(), A100)?.health).toBe("Healthy");
    expect(backend!.diagnostics()).toEqual([
      "/nonexistent/kmsg does not exist (is the host's /dev mounted there?) (XID events are not watched meanwhile)",
    ]);
  });

  it("refuses kmsgPath and the deprecated dmesgPath together, naming the field", () => {
    const parsed = NVIDIABackendSchema.safeParse({ kmsgPath: "/dev/kmsg", dmesgPath: "/usr/bin/dmesg" });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues.map((i) => [i.path.join("."), i.message])).toEqual([
      ["dmesgPath", "set kmsgPath or the deprecated dmesgPath, not both"],
    ]);
  });
});
