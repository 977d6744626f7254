// The Event correlator: identical events bump one Event's count, many similar ones are combined, and a
// per-object token bucket drops the rest, so a flapping device cannot cause an Event storm. And the names
// Events get: valid and distinct whatever the length of the object's name.
import { createServer, type Server } from "node:http";
import type { KubeConfig } from "@kubernetes/client-node";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  COMBINED_MESSAGE_PREFIX,
  EventCorrelator,
  EventRecorder,
  eventName,
  ManualClock,
  MAX_EVENT_NAME_LENGTH,
  type CoreEvent,
  type EventDecision,
} from "../../../src/kube/index.js";
import { kubeConfigServedBy } from "./local-api-server.js";

let sequence = 0;

function draft(clock: ManualClock, message: string, reason = "UnhealthyDevices", object = "foo"): CoreEvent {
  const time = new Date(clock.now()).toISOString();
  return {
    apiVersion: "v1",
    kind: "Event",
    metadata: { name: `${object}.${sequence++}`, namespace: "default" },
    involvedObject: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      name: object,
      uid: `uid-${object}`,
    },
    type: "Warning",
    reason,
    message,
    count: 1,
    firstTimestamp: time,
    lastTimestamp: time,
    source: { component: "dpo-operator" },
    reportingComponent: "dpo-operator",
    reportingInstance: "test",
  };
}

/** One line per decision: `create NAME`, `patch NAME count=N`, or `skip`. */
function describeDecision(d: EventDecision): string {
  switch (d.action) {
    case "create":
      return `create ${d.event.message}`;
    case "patch":
      return `patch ${d.patch.message} count=${d.patch.count}`;
    case "skip":
      return "skip";
  }
}

interface Step {
  /** Milliseconds to advance before recording. */
  afterMs?: number;
  message: string;
  reason?: string;
  object?: string;
}

const MINUTE = 60_000;

describe("EventCorrelator", () => {
  it.each<{ name: string; steps: Step[]; want: string[] }>([
    {
      name: "a new event is created",
      steps: [{ message: "a" }],
      want: ["create a"],
    },
    {
      name: "identical events bump the first one's count",
      steps: [{ message: "a" }, { message: "a" }, { message: "a" }],
      want: ["create a", "patch a count=2", "patch a count=3"],
    },
    {
      name: "another message or reason is another event",
      steps: [{ message: "a" }, { message: "b" }, { message: "a", reason: "Other" }],
      want: ["create a", "create b", "create a"],
    },
    {
      name: "another object has its own events",
      steps: [{ message: "a" }, { message: "a", object: "bar" }],
      want: ["create a", "create a"],
    },
    {
      name: "the 10th distinct message within 10 minutes starts one combined event, later ones bump it",
      steps: [
        ...Array.from({ length: 9 }, (_, i) => ({ message: `m${i}` })),
        { message: "m9" },
        { message: "m10" },
      ],
      want: [
        ...Array.from({ length: 9 }, (_, i) => `create m${i}`),
        `create ${COMBINED_MESSAGE_PREFIX}m9`,
        `patch ${COMBINED_MESSAGE_PREFIX}m10 count=2`,
      ],
    },
    {
      name: "similar events spread beyond 10 minutes are not combined",
      steps: Array.from({ length: 11 }, (_, i) => ({ message: `m${i}`, afterMs: 11 * MINUTE })),
      want: Array.from({ length: 11 }, (_, i) => `create m${i}`),
    },
  ])("$name", async ({ steps, want }) => {
    const clock = new ManualClock();
    const correlator = new EventCorrelator({ clock });
    const got: string[] = [];
    for (const step of steps) {
      if (step.afterMs) await clock.advance(step.afterMs);
      got.push(describeDecision(correlator.correlate(draft(clock, step.message, step.reason, step.object))));
    }
    expect(got).toEqual(want);
  });

  it.each<{ name: string; repeats: number; afterMs: number; then: number; wantAccepted: number }>([
    {
      name: "a burst of 25 passes, the rest of 50 is dropped",
      repeats: 50,
      afterMs: 0,
      then: 0,
      wantAccepted: 25,
    },
    { name: "one more after 5 minutes", repeats: 30, afterMs: 5 * MINUTE, then: 2, wantAccepted: 26 },
    { name: "two more after 10 minutes", repeats: 30, afterMs: 10 * MINUTE, then: 3, wantAccepted: 27 },
    {
      name: "never more than the burst after a long pause",
      repeats: 30,
      afterMs: 600 * MINUTE,
      then: 30,
      wantAccepted: 50,
    },
  ])("spam filter: $name", async ({ repeats, afterMs, then, wantAccepted }) => {
    const clock = new ManualClock();
    const correlator = new EventCorrelator({ clock });
    const decisions: EventDecision[] = [];
    for (let i = 0; i < repeats; i++) decisions.push(correlator.correlate(draft(clock, "flap")));
    await clock.advance(afterMs);
    for (let i = 0; i < then; i++) decisions.push(correlator.correlate(draft(clock, "flap")));
    const accepted = decisions.filter((d) => d.action !== "skip");
    expect(accepted).toHaveLength(wantAccepted);
    expect(accepted.filter((d) => d.action === "create")).toHaveLength(1);
  });

  it("counts dropped repeats too, so the next accepted bump says how often it happened", async () => {
    const clock = new ManualClock();
    const correlator = new EventCorrelator({ clock });
    for (let i = 0; i < 40; i++) correlator.correlate(draft(clock, "flap"));
    await clock.advance(5 * MINUTE);
    const next = correlator.correlate(draft(clock, "flap"));
    expect(next).toMatchObject({ action: "patch", patch: { count: 41 } });
  });

  it("keeps one object's storm from silencing another object", () => {
    const clock = new ManualClock();
    const correlator = new EventCorrelator({ clock });
    for (let i = 0; i < 30; i++) correlator.correlate(draft(clock, `m${i}`, "Flap", "noisy"));
    expect(correlator.correlate(draft(clock, "hello", "Flap", "quiet")).action).toBe("create");
  });

  it("bumps the re-created Event after the old one was gone", () => {
    const clock = new ManualClock();
    const correlator = new EventCorrelator({ clock });
    correlator.correlate(draft(clock, "a"));
    const bump = correlator.correlate(draft(clock, "a"));
    expect(bump.action).toBe("patch");
    correlator.created({ ...bump.event, count: 1 });
    const next = correlator.correlate(draft(clock, "a"));
    expect(next).toMatchObject({ action: "patch", name: bump.event.metadata.name, patch: { count: 2 } });
  });
});

/** What the API server checks of an Event's name: a DNS subdomain (RFC 1123) of at most 253 characters. */
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A config name of the longest kind the API allows: 253 characters, labels of 63 joined by dots. */
function maxLengthName(last = "z"): string {
  const label = (c: string) => c.repeat(63);
  const name = `${label("a")}.${label("b")}.${label("c")}.${"d".repeat(60)}${last}`;
  expect(name).toHaveLength(253);
  expect(name).toMatch(DNS_SUBDOMAIN);
  return name;
}

describe("eventName", () => {
  const now = Date.parse("2026-01-01T00:00:00Z");

  it.each<{ name: string; object: string }>([
    { name: "a short name", object: "foo" },
    { name: "a name that just fits", object: "f".repeat(253 - 16) },
    { name: "a name one past fitting", object: "f".repeat(253 - 15) },
    { name: "a maximum-length config name", object: maxLengthName() },
    {
      name: "a long name whose cut ends in a dash",
      object: `${"a".repeat(224)}${"-".repeat(6)}b${"c".repeat(22)}`,
    },
    { name: "a long name whose cut ends in a dot", object: `${"a".repeat(224)}${".a".repeat(14)}b` },
  ])("$name: a DNS subdomain of at most 253 characters", ({ object }) => {
    expect(object.length).toBeLessThanOrEqual(MAX_EVENT_NAME_LENGTH);
    expect(object).toMatch(DNS_SUBDOMAIN);
    for (const sequence of [0, 4095, 4096 * 7 + 1]) {
      const name = eventName(object, now, sequence);
      expect(name.length, name).toBeLessThanOrEqual(MAX_EVENT_NAME_LENGTH);
      expect(name).toMatch(DNS_SUBDOMAIN);
    }
  });

  it("keeps a name that fits as client-go writes it: the object's name, then the time and sequence in hex", () => {
    expect(eventName("foo", 0x18d8, 0x2a)).toBe("foo.18d82a");
  });

  it("tells apart objects that differ only past the cut, and events of one object in one millisecond", () => {
    const names = [
      eventName(maxLengthName("y"), now, 0),
      eventName(maxLengthName("z"), now, 0),
      eventName(maxLengthName("z"), now, 1),
      eventName(maxLengthName("z"), now + 1, 0),
    ];
    expect(new Set(names).size).toBe(names.length);
  });
});

describe("EventRecorder", () => {
  let server: Server;
  let kc: KubeConfig;
  const posted: CoreEvent[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = "";
      req.on("data", (chunk: Buffer) => (body += chunk.toString()));
      req.on("end", () => {
        if (req.method === "POST") posted.push(JSON.parse(body) as CoreEvent);
        res.writeHead(201, { "content-type": "application/json" });
        res.end(body || "{}");
      });
    });
    kc = await kubeConfigServedBy(server);
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it("names the Events of a maximum-length config validly, and two recorders' Events of it in one millisecond apart", async () => {
    posted.length = 0;
    const clock = new ManualClock();
    const logged: string[] = [];
    const logger = pino({ level: "warn" }, { write: (line: string) => logged.push(line) });
    // The operator runs two recorders side by side, one of them behind the write fence.
    const first = new EventRecorder(kc, { component: "dpo-operator", instance: "a", logger, clock });
    const second = new EventRecorder(kc, { component: "dpo-operator", instance: "a", logger, clock });
    const config = {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: maxLengthName(), uid: "uid-long" },
    };
    await first.record(config, "Normal", "Applied", "one");
    await second.record(config, "Normal", "Applied", "two");
    expect(logged).toEqual([]);
    const names = posted.map((event) => event.metadata.name);
    expect(names).toHaveLength(2);
    for (const name of names) {
      expect(name.length, name).toBeLessThanOrEqual(253);
      expect(name).toMatch(DNS_SUBDOMAIN);
    }
    expect(new Set(names).size).toBe(2);
    // The involved object keeps its whole name: only the Event's own name is cut.
    expect(posted.map((event) => event.involvedObject.name)).toEqual([maxLengthName(), maxLengthName()]);
  });
});
