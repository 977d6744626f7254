// Leadership as a fence for writes: the pure decision on a monotonic clock, the fence a leader keeps
// (opened, renewed, closed by its deadline, whatever the wall clock does), and the write paths against a
// local HTTP server: refused before anything is sent, cancelled in flight when the fence closes.
import { createServer, type Server, type ServerResponse } from "node:http";
import type { KubeConfig } from "@kubernetes/client-node";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  DAEMON_SETS,
  decideFence,
  EventRecorder,
  KubeObjectClient,
  kubeRequest,
  LeaseFence,
  ManualClock,
  NotLeaderError,
  ServerSideApplier,
  UNFENCED,
  type FenceInput,
  type FenceState,
  type WriteFence,
} from "../../../src/kube/index.js";
import { kubeConfigServedBy } from "./local-api-server.js";

describe("decideFence", () => {
  const D = 10_000;
  it.each<{ name: string; input: FenceInput; expected: FenceState }>([
    {
      name: "not leading: closed",
      input: { renewedAt: undefined, now: 50_000, renewDeadlineMs: D },
      expected: { open: false, reason: "not-leading" },
    },
    {
      name: "renewal sent just now: open for the whole deadline",
      input: { renewedAt: 50_000, now: 50_000, renewDeadlineMs: D },
      expected: { open: true, remainingMs: D },
    },
    {
      name: "1 ms before the deadline: open",
      input: { renewedAt: 50_000, now: 59_999, renewDeadlineMs: D },
      expected: { open: true, remainingMs: 1 },
    },
    {
      name: "exactly at the deadline: closed",
      input: { renewedAt: 50_000, now: 60_000, renewDeadlineMs: D },
      expected: { open: false, reason: "renew-deadline-passed" },
    },
    {
      name: "long after the deadline: closed",
      input: { renewedAt: 50_000, now: 3_650_000, renewDeadlineMs: D },
      expected: { open: false, reason: "renew-deadline-passed" },
    },
    {
      name: "a clock that ran back: never more than one deadline",
      input: { renewedAt: 50_000, now: 20_000, renewDeadlineMs: D },
      expected: { open: true, remainingMs: D },
    },
  ])("$name", ({ input, expected }) => {
    expect(decideFence(input)).toEqual(expected);
  });
});

function mayWrite(fence: WriteFence): boolean | string {
  try {
    fence.check("PATCH /api/v1/namespaces/ns/configmaps/x");
    return true;
  } catch (err) {
    if (err instanceof NotLeaderError) return err.reason;
    throw err;
  }
}

describe("LeaseFence", () => {
  it("is closed until opened, open for the renew deadline, closed by its timer, and stays closed", async () => {
    const clock = new ManualClock();
    let expired = 0;
    const fence = new LeaseFence(clock, 3_000, () => expired++);
    expect(mayWrite(fence)).toBe("not-leading");

    fence.open(clock.monotonicNow());
    const term = fence.signal;
    expect(mayWrite(fence)).toBe(true);
    await clock.advance(2_000);
    expect(fence.renewed(clock.monotonicNow() - 500)).toBe(true); // sent 500 ms ago
    await clock.advance(2_499);
    expect(mayWrite(fence)).toBe(true);
    expect(term.aborted).toBe(false);
    await clock.advance(1);
    expect(mayWrite(fence)).toBe("renew-deadline-passed");
    expect(term.aborted).toBe(true);
    expect(term.reason).toBeInstanceOf(NotLeaderError);
    expect(expired).toBe(1);

    // A renewal that comes back after the deadline does not reopen the term.
    expect(fence.renewed(clock.monotonicNow())).toBe(false);
    expect(mayWrite(fence)).toBe("renew-deadline-passed");

    // Leading again is a new term with a new signal.
    fence.open(clock.monotonicNow());
    expect(mayWrite(fence)).toBe(true);
    expect(fence.signal).not.toBe(term);
    expect(fence.signal.aborted).toBe(false);
    fence.close("not-leading");
    expect(mayWrite(fence)).toBe("not-leading");
    expect(fence.signal.aborted).toBe(true);
    expect(expired).toBe(1);
  });

  it("is judged on the monotonic clock: wall-clock steps neither close nor extend it", async () => {
    const clock = new ManualClock();
    const fence = new LeaseFence(clock, 3_000);
    fence.open(clock.monotonicNow());
    clock.jumpWallClock(3_600_000);
    await clock.advance(1_000);
    expect(mayWrite(fence)).toBe(true);
    clock.jumpWallClock(-7_200_000);
    await clock.advance(1_999);
    expect(mayWrite(fence)).toBe(true);
    await clock.advance(1);
    expect(mayWrite(fence)).toBe("renew-deadline-passed");
  });

  it("judges every check itself: a timer that has not fired yet lets nothing through", () => {
    let now = 0;
    const timers: Array<() => void> = [];
    const clock = {
      now: () => now,
      monotonicNow: () => now,
      setTimer: (callback: () => void) => {
        timers.push(callback);
        return () => undefined;
      },
    };
    const fence = new LeaseFence(clock, 3_000);
    fence.open(0);
    now = 3_000; // the deadline passed, the (late) timer has not run
    expect(mayWrite(fence)).toBe("renew-deadline-passed");
    expect(timers).toHaveLength(1);
  });
});

describe("the write paths behind a fence", () => {
  const seen: string[] = [];
  /** Requests to /hang get no answer until the test ends them. */
  const hanging: ServerResponse[] = [];
  let server: Server;
  let kc: KubeConfig;
  let fence: LeaseFence;
  let clock: ManualClock;

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        seen.push(`${req.method} ${req.url}`);
        if (req.url?.includes("hang")) {
          hanging.push(res);
          return;
        }
        res.writeHead(200, { "content-type": "application/json" });
        if (req.url === "/api/v1") {
          res.end(
            JSON.stringify({
              kind: "APIResourceList",
              groupVersion: "v1",
              resources: [{ name: "configmaps", kind: "ConfigMap", namespaced: true, verbs: ["patch"] }],
            }),
          );
          return;
        }
        res.end(JSON.stringify({ kind: "Status", status: "Success" }));
      });
    });
    kc = await kubeConfigServedBy(server);
  });

  afterEach(() => {
    seen.length = 0;
    for (const res of hanging.splice(0)) res.destroy();
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const fresh = (): void => {
    clock = new ManualClock();
    fence = new LeaseFence(clock, 3_000);
  };
  const ds = { apiVersion: "apps/v1", kind: "DaemonSet", metadata: { name: "d", namespace: "ns" } };
  const cm = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c", namespace: "ns" } };
  const key = { name: "d", namespace: "ns" };

  it("every write verb of the object client, apply and Events are refused, unsent, while closed", async () => {
    fresh();
    const objects = new KubeObjectClient(kc, { fieldManager: "dpo-operator", fence });
    const applier = new ServerSideApplier(kc, { fieldManager: "dpo-operator", fence });
    const logged: string[] = [];
    const logger = pino({ level: "warn" }, { write: (line: string) => logged.push(line) });
    const events = new EventRecorder(kc, { component: "dpo-operator", instance: "a", logger, fence });
    const refusals = await Promise.all(
      [
        objects.create(DAEMON_SETS, ds),
        objects.update(DAEMON_SETS, ds),
        objects.patch(DAEMON_SETS, key, "merge", {}),
        objects.patch(DAEMON_SETS, key, "merge", {}, { subresource: "status" }),
        objects.delete(DAEMON_SETS, key),
        applier.apply(cm),
        applier.applyStatus(cm),
      ].map((write) =>
        write.then(
          () => "sent",
          (err: unknown) => err,
        ),
      ),
    );
    for (const refusal of refusals) {
      expect(refusal).toBeInstanceOf(NotLeaderError);
      expect((refusal as NotLeaderError).reason).toBe("not-leading");
    }
    expect((refusals[0] as NotLeaderError).message).toMatch(
      /^POST \/apis\/apps\/v1\/namespaces\/ns\/daemonsets: refused: this replica does not hold the lease/,
    );
    await events.record(cm, "Normal", "Test", "a message");
    expect(logged.join("")).toContain("could not record event");
    // Reads pass: the informers and discovery work on any replica.
    expect(await objects.get(DAEMON_SETS, key)).toMatchObject({ status: "Success" });
    expect(seen.filter((request) => !request.startsWith("GET "))).toEqual([]);
    expect(seen).toContain("GET /apis/apps/v1/namespaces/ns/daemonsets/d");
  });

  it("open, writes are sent; closed by the deadline, the next write is refused", async () => {
    fresh();
    const objects = new KubeObjectClient(kc, { fieldManager: "dpo-operator", fence });
    fence.open(clock.monotonicNow());
    await objects.patch(DAEMON_SETS, key, "merge", {});
    await clock.advance(3_000);
    await expect(objects.patch(DAEMON_SETS, key, "merge", {})).rejects.toBeInstanceOf(NotLeaderError);
    expect(seen).toEqual(["PATCH /apis/apps/v1/namespaces/ns/daemonsets/d?fieldManager=dpo-operator"]);
  });

  it("a write in flight when the fence closes is cancelled, with NotLeaderError", async () => {
    fresh();
    fence.open(clock.monotonicNow());
    const inFlight = kubeRequest(kc, { method: "PUT", path: "/hang", body: {}, fence }).then(
      () => "answered",
      (err: unknown) => err,
    );
    await waitUntil(
      () => hanging.length === 1,
      () => `requests seen: ${JSON.stringify(seen)}`,
    );
    fence.close("renew-deadline-passed");
    const outcome = await inFlight;
    expect(outcome).toBeInstanceOf(NotLeaderError);
    expect((outcome as NotLeaderError).reason).toBe("renew-deadline-passed");
  });

  it("a read ignores the fence; without leader election nothing is fenced", async () => {
    fresh();
    await kubeRequest(kc, { method: "GET", path: "/read", fence });
    const objects = new KubeObjectClient(kc, { fieldManager: "dpo-operator", fence: UNFENCED });
    await objects.delete(DAEMON_SETS, key);
    expect(seen).toEqual(["GET /read", "DELETE /apis/apps/v1/namespaces/ns/daemonsets/d"]);
  });
});

/** Polls a condition (real time: the HTTP server runs on it) with a deadline, saying what it saw last. */
async function waitUntil(condition: () => boolean, seen: () => string, timeoutMs = 5_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`not reached within ${timeoutMs} ms; ${seen()}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
