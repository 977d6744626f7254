// Seeded gRPC fuzzing of a running plugin over its real unix socket. Requests go out as raw bytes
// (identity serializers), so malformed, truncated and oversized messages reach the plugin's decoder exactly
// as generated. Everything random comes from one seed, so a failing run replays with the same inputs.
import * as grpc from "@grpc/grpc-js";
import {
  AllocateRequest,
  ListAndWatchResponse,
  PreferredAllocationRequest,
  PreStartContainerRequest,
} from "../../src/plugin-runtime/proto/index.js";
import { mulberry32, Rng } from "./rng.js";

const S = grpc.status;
const DP = "/v1beta1.DevicePlugin";

/** What one generated request is and which answers the plugin may give to it. */
export interface FuzzCase {
  kind: string;
  path: string;
  /** Undefined for ListAndWatch churn, which opens many streams instead of sending one request. */
  bytes?: Buffer;
  expected: readonly grpc.status[];
  /** Cancel the call after this many milliseconds (0: at once, before any answer can arrive). */
  cancelAfterMs?: number;
  /** For ListAndWatch churn: how many streams to open at once before dropping them all. */
  streams?: number;
}

export interface FuzzOptions {
  seed: number;
  requests: number;
  /** The plugin's DevicePlugin endpoint socket (absolute path). */
  endpoint: string;
  /** The plugin's plugin-watcher Registration socket, when it serves one. */
  registrationSocket?: string;
  /** Calls in flight at once. */
  concurrency?: number;
}

export interface Unexpected {
  index: number;
  kind: string;
  path: string;
  code: grpc.status;
  details: string;
  expected: string[];
}

export interface FuzzResult {
  seed: number;
  requests: number;
  /** kind → status name → count. */
  counts: Map<string, Map<string, number>>;
  unexpected: Unexpected[];
  /** The device ids the plugin advertised, learned from ListAndWatch before fuzzing. */
  deviceIds: string[];
}

// Whatever the plugin decides about a request it could decode: accepted, refused as malformed, or
// refused because a device is unhealthy. Never INTERNAL or UNKNOWN, which mean it did not decide.
const DECIDED = [S.OK, S.INVALID_ARGUMENT, S.FAILED_PRECONDITION] as const;
// The receive limit (4 MiB) answers oversized messages before any handler runs.
const OVERSIZE = [...DECIDED, S.RESOURCE_EXHAUSTED] as const;

const identity = (b: Buffer): Buffer => b;

/**
 * Every client of the fuzzer gets an HTTP/2 connection of its own. grpc-js otherwise shares one
 * connection between all clients of a process that dial the same target with the same options (its
 * global subchannel pool): the "fresh connection" of each ListAndWatch churn was in fact the one
 * connection of the whole run, and so was the simulated kubelet's, which lives in this process too. A
 * connection the plugin closes because of what the fuzzer did then took the kubelet's ListAndWatch with
 * it, which no real fuzzer or attacker, a process of its own, could do to the kubelet.
 */
const OWN_CONNECTION: grpc.ChannelOptions = { "grpc.use_local_subchannel_pool": 1 };

/**
 * Cancelled calls on one connection before the fuzzer moves to a fresh one. Every cancelled call is a
 * RST_STREAM, and the plugin's HTTP/2 server (nghttp2's Rapid Reset mitigation, CVE-2023-44487) closes a
 * connection with GOAWAY INTERNAL_ERROR once its client has reset more than 1000 streams in a burst
 * (refilled at 33 a second). That is the plugin defending itself, not a wrong answer, so the fuzzer stays
 * well under it: how many it sends per connection must not depend on how fast the machine runs the cases.
 */
const CANCELS_PER_CONNECTION = 500;

function encodeAllocate(ids: string[][]): Buffer {
  return Buffer.from(
    AllocateRequest.encode({ containerRequests: ids.map((devicesIds) => ({ devicesIds })) }).finish(),
  );
}

function encodePreferred(available: string[], mustInclude: string[], size: number): Buffer {
  return Buffer.from(
    PreferredAllocationRequest.encode({
      containerRequests: [
        { availableDeviceIDs: available, mustIncludeDeviceIDs: mustInclude, allocationSize: size },
      ],
    }).finish(),
  );
}

function encodePreStart(ids: string[]): Buffer {
  return Buffer.from(PreStartContainerRequest.encode({ devicesIds: ids }).finish());
}

/** A field number no version of the API uses, with a random wire type and payload. */
function unknownField(rng: Rng): Buffer {
  const field = 1000 + rng.int(100_000);
  switch (rng.int(3)) {
    case 0: // varint
      return Buffer.concat([varint(field << 3), varint(rng.int(1 << 30))]);
    case 1: {
      const body = rng.bytes(rng.int(64));
      return Buffer.concat([varint((field << 3) | 2), varint(body.length), body]);
    }
    default: // fixed32
      return Buffer.concat([varint((field << 3) | 5), rng.bytes(4)]);
  }
}

function varint(n: number): Buffer {
  const out: number[] = [];
  let v = n >>> 0;
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
  return Buffer.from(out);
}

/** Cuts, flips or extends a valid message: the decoder must reject or accept it, never fall over. */
function mutate(rng: Rng, valid: Buffer): Buffer {
  const b = Buffer.from(valid);
  switch (rng.int(4)) {
    case 0:
      return b.subarray(0, rng.int(Math.max(1, b.length)));
    case 1: {
      for (let i = 0, n = 1 + rng.int(4); i < n && b.length > 0; i++) {
        const at = rng.int(b.length);
        b[at] = b[at]! ^ (1 << rng.int(8));
      }
      return b;
    }
    case 2:
      return Buffer.concat([b, rng.bytes(1 + rng.int(32))]);
    default:
      return Buffer.concat([b.subarray(0, rng.int(b.length + 1)), unknownField(rng)]);
  }
}

/** Generates case `index` of a run; depends only on the rng state, so a seed replays the same cases. */
export function generateCase(rng: Rng, deviceIds: readonly string[], withRegistration: boolean): FuzzCase {
  const known = (): string => (deviceIds.length > 0 ? rng.pick(deviceIds) : "none");
  const someIds = (): string[] => {
    const n = 1 + rng.int(Math.min(4, Math.max(1, deviceIds.length)));
    return [...new Set(Array.from({ length: n }, known))];
  };
  const unary = [
    `${DP}/Allocate`,
    `${DP}/GetPreferredAllocation`,
    `${DP}/PreStartContainer`,
    `${DP}/GetDevicePluginOptions`,
  ];
  const r = rng.int(100);
  if (r < 15) {
    return { kind: "random-bytes", path: rng.pick(unary), bytes: rng.bytes(rng.int(256)), expected: DECIDED };
  }
  if (r < 35) {
    const valid = rng.pick([
      () => encodeAllocate([someIds()]),
      () => encodePreferred([...deviceIds], someIds(), rng.int(deviceIds.length + 2)),
      () => encodePreStart(someIds()),
    ])();
    const path = rng.pick(unary.slice(0, 3));
    return { kind: "mutated-valid", path, bytes: mutate(rng, valid), expected: DECIDED };
  }
  if (r < 45) {
    const ids = someIds();
    const pick = rng.int(3);
    const base =
      pick === 0
        ? encodeAllocate([ids])
        : pick === 1
          ? encodePreferred([...deviceIds], [], 1)
          : encodePreStart(ids);
    const path = unary[pick]!;
    return {
      kind: "unknown-fields",
      path,
      bytes: Buffer.concat([base, unknownField(rng), unknownField(rng)]),
      expected: [S.OK],
    };
  }
  if (r < 55) {
    const ids = someIds();
    switch (rng.int(3)) {
      case 0:
        return {
          kind: "valid-allocate",
          path: `${DP}/Allocate`,
          bytes: encodeAllocate([ids]),
          expected: [S.OK],
        };
      case 1:
        return {
          kind: "valid-preferred",
          path: `${DP}/GetPreferredAllocation`,
          bytes: encodePreferred([...deviceIds], [], Math.min(ids.length, deviceIds.length)),
          expected: [S.OK],
        };
      default:
        return {
          kind: "valid-prestart",
          path: `${DP}/PreStartContainer`,
          bytes: encodePreStart(ids),
          expected: [S.OK],
        };
    }
  }
  if (r < 65) {
    // Empty lists, empty strings, duplicates and strange strings: all refused or answered, each decided.
    const id = known();
    const variants: (() => Buffer)[] = [
      () => encodeAllocate([]),
      () => encodeAllocate([[]]),
      () => encodeAllocate([[""]]),
      () => encodeAllocate([[id, id]]),
      () => encodeAllocate([[id], [id]]),
      () => encodeAllocate([[rng.string(40)]]),
      () => encodePreferred([id, id, ""], [id, id], 2),
      () => encodePreferred([], [rng.string(20)], -1 - rng.int(1000)),
      () => encodePreferred([rng.string(20)], [], 0x7fffffff),
      () => encodePreStart([]),
      () => encodePreStart([id, id]),
    ];
    const i = rng.int(variants.length);
    const path =
      i <= 5 ? `${DP}/Allocate` : i <= 8 ? `${DP}/GetPreferredAllocation` : `${DP}/PreStartContainer`;
    return { kind: "odd-ids", path, bytes: variants[i]!(), expected: DECIDED };
  }
  if (r < 68) {
    // Around the plugin's 100k-id limit and the 4 MiB receive limit.
    const n = rng.pick([99_999, 100_000, 100_001, 400_000]);
    const ids = Array.from({ length: n }, (_, i) => (rng.int(2) === 0 ? known() : `x${i}`));
    const pick = rng.int(3);
    const bytes =
      pick === 0 ? encodeAllocate([ids]) : pick === 1 ? encodePreferred(ids, [], 3) : encodePreStart(ids);
    return { kind: "huge-repeated", path: unary[pick]!, bytes, expected: OVERSIZE };
  }
  if (r < 76) {
    const path = rng.pick([
      `${DP}/Nope`,
      `${DP}/allocate`,
      "/v1beta1.DevicePlugin/",
      "/v1beta2.DevicePlugin/Allocate",
      "/pluginregistration.Registration/GetInfo",
      `/${rng.string(12).replace(/[^A-Za-z]/g, "x")}/X`,
    ]);
    return { kind: "wrong-method", path, bytes: rng.bytes(rng.int(16)), expected: [S.UNIMPLEMENTED] };
  }
  if (r < 88) {
    const c = generateCase(rng, deviceIds, false);
    if (c.streams !== undefined || c.kind === "wrong-method" || c.kind === "huge-repeated") {
      return {
        kind: "cancelled",
        path: `${DP}/Allocate`,
        bytes: encodeAllocate([someIds()]),
        expected: [S.CANCELLED, S.OK],
        cancelAfterMs: 0,
      };
    }
    // Cancelled at once the client always reports CANCELLED; a little later the answer may win the race.
    const cancelAfterMs = rng.pick([0, 0, 1, 3]);
    return { ...c, kind: "cancelled", expected: [S.CANCELLED, ...c.expected], cancelAfterMs };
  }
  if (r < 94 || !withRegistration) {
    return {
      kind: "listandwatch-churn",
      path: `${DP}/ListAndWatch`,
      expected: [S.CANCELLED],
      streams: 1 + rng.int(32),
    };
  }
  // The plugin-watcher Registration service: GetInfo takes an empty request; junk bytes still decode or fail.
  const path = rng.pick([
    "/pluginregistration.Registration/GetInfo",
    "/pluginregistration.Registration/Nope",
  ]);
  return {
    kind: "registration",
    path,
    bytes: rng.int(2) === 0 ? Buffer.alloc(0) : rng.bytes(rng.int(64)),
    expected: path.endsWith("Nope") ? [S.UNIMPLEMENTED] : DECIDED,
  };
}

function unaryCall(client: grpc.Client, c: FuzzCase): Promise<grpc.StatusObject> {
  return new Promise((resolve) => {
    let status: grpc.StatusObject | undefined;
    const call = client.makeUnaryRequest(
      c.path,
      identity,
      identity,
      c.bytes ?? Buffer.alloc(0),
      new grpc.Metadata(),
      { deadline: Date.now() + 30_000 },
      () => undefined,
    );
    call.on("status", (s: grpc.StatusObject) => {
      status = s;
      resolve(s);
    });
    if (c.cancelAfterMs === 0) call.cancel();
    else if (c.cancelAfterMs !== undefined) setTimeout(() => status ?? call.cancel(), c.cancelAfterMs);
  });
}

/** Opens `n` ListAndWatch streams on a fresh connection, waits for each first list, then drops them all. */
async function churnStreams(endpoint: string, n: number, rng: Rng): Promise<grpc.StatusObject[]> {
  const client = new grpc.Client(`unix://${endpoint}`, grpc.credentials.createInsecure(), OWN_CONNECTION);
  try {
    const calls = Array.from({ length: n }, () => {
      const call = client.makeServerStreamRequest(`${DP}/ListAndWatch`, identity, identity, Buffer.alloc(0));
      // The outcome is read from 'status'; the error event repeats it and must not go unhandled.
      call.on("error", () => undefined);
      return call;
    });
    const statuses = calls.map(
      (call) => new Promise<grpc.StatusObject>((resolve) => call.on("status", resolve)),
    );
    // Some streams are dropped before their first message, the rest after it.
    await Promise.all(
      calls.map(
        (call) =>
          new Promise<void>((resolve) => {
            if (rng.int(4) === 0) return resolve();
            call.once("data", () => resolve());
            call.once("status", () => resolve());
          }),
      ),
    );
    for (const call of calls) call.cancel();
    return await Promise.all(statuses);
  } finally {
    client.close();
  }
}

/** The devices the plugin advertises: the first ListAndWatch message. */
export async function advertisedIds(endpoint: string): Promise<string[]> {
  const client = new grpc.Client(`unix://${endpoint}`, grpc.credentials.createInsecure(), OWN_CONNECTION);
  try {
    const call = client.makeServerStreamRequest(
      `${DP}/ListAndWatch`,
      identity,
      (b: Buffer) => ListAndWatchResponse.decode(b),
      Buffer.alloc(0),
    );
    const first = await new Promise<ListAndWatchResponse>((resolve, reject) => {
      call.once("data", resolve);
      call.once("error", reject);
    });
    call.cancel();
    return first.devices.map((d) => d.ID);
  } finally {
    client.close();
  }
}

/** Runs `requests` generated cases against the plugin and reports every answer it should not have given. */
export async function fuzz(opts: FuzzOptions): Promise<FuzzResult> {
  const rng = new Rng(mulberry32(opts.seed));
  const deviceIds = await advertisedIds(opts.endpoint);
  const cases = Array.from({ length: opts.requests }, () =>
    generateCase(rng, deviceIds, opts.registrationSocket !== undefined),
  );
  // Stream churn gets its own rng so its timing choices do not shift the cases above.
  const churnRng = new Rng(mulberry32(opts.seed ^ 0x5bd1e995));
  const connect = (socket: string): grpc.Client =>
    new grpc.Client(`unix://${socket}`, grpc.credentials.createInsecure(), OWN_CONNECTION);
  // Closed together at the end: closing one with calls in flight is not what is being fuzzed.
  const clients = [connect(opts.endpoint)];
  let cancels = 0;
  /** The client for a case: a fresh connection once the current one has had its share of cancellations. */
  const clientFor = (c: FuzzCase): grpc.Client => {
    if (c.cancelAfterMs !== undefined && ++cancels % CANCELS_PER_CONNECTION === 0) {
      clients.push(connect(opts.endpoint));
    }
    return clients[clients.length - 1]!;
  };
  const registration = opts.registrationSocket === undefined ? undefined : connect(opts.registrationSocket);
  const counts = new Map<string, Map<string, number>>();
  const unexpected: Unexpected[] = [];
  const record = (index: number, c: FuzzCase, s: grpc.StatusObject): void => {
    const byCode = counts.get(c.kind) ?? new Map<string, number>();
    counts.set(c.kind, byCode);
    const name = S[s.code] ?? String(s.code);
    byCode.set(name, (byCode.get(name) ?? 0) + 1);
    if (!c.expected.includes(s.code)) {
      unexpected.push({
        index,
        kind: c.kind,
        path: c.path,
        code: s.code,
        details: s.details.slice(0, 300),
        expected: c.expected.map((e) => S[e]),
      });
    }
  };
  let nextIndex = 0;
  const worker = async (): Promise<void> => {
    for (let i = nextIndex++; i < cases.length; i = nextIndex++) {
      const c = cases[i]!;
      if (c.streams !== undefined) {
        for (const s of await churnStreams(opts.endpoint, c.streams, churnRng)) record(i, c, s);
      } else {
        record(i, c, await unaryCall(c.kind === "registration" ? registration! : clientFor(c), c));
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: opts.concurrency ?? 16 }, worker));
  } finally {
    for (const client of clients) client.close();
    registration?.close();
  }
  return { seed: opts.seed, requests: opts.requests, counts, unexpected, deviceIds };
}

/** The counts as an aligned table: one row per kind, one column per status seen. */
export function formatCounts(result: FuzzResult): string {
  const codes = [...new Set([...result.counts.values()].flatMap((m) => [...m.keys()]))].sort();
  const kinds = [...result.counts.keys()].sort();
  const rows = [["kind", ...codes, "total"]];
  const totals = new Map<string, number>();
  for (const k of kinds) {
    const m = result.counts.get(k)!;
    let total = 0;
    rows.push([
      k,
      ...codes.map((c) => {
        const n = m.get(c) ?? 0;
        total += n;
        totals.set(c, (totals.get(c) ?? 0) + n);
        return String(n);
      }),
      String(total),
    ]);
  }
  rows.push([
    "all",
    ...codes.map((c) => String(totals.get(c) ?? 0)),
    String([...totals.values()].reduce((a, b) => a + b, 0)),
  ]);
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r) =>
      r.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("  "),
    )
    .join("\n");
}
