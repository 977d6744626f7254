// Kubernetes Events (core/v1) for transitions users should see in `kubectl describe` and `kubectl get events`,
// correlated like client-go's EventCorrelator so that a flapping object cannot cause an Event storm.
import { createHash } from "node:crypto";
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { systemClock, type Clock } from "./clock.js";
import { isNotFound } from "./errors.js";
import type { WriteFence } from "./fence.js";
import { kubeRequest } from "./request.js";

export interface InvolvedObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; uid?: string; resourceVersion?: string };
}

export type EventType = "Normal" | "Warning";

/** A core/v1 Event as this recorder writes it. */
export interface CoreEvent {
  apiVersion: "v1";
  kind: "Event";
  metadata: { name: string; namespace: string };
  involvedObject: {
    apiVersion: string;
    kind: string;
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
  };
  type: EventType;
  reason: string;
  message: string;
  count: number;
  firstTimestamp: string;
  lastTimestamp: string;
  source: { component: string };
  reportingComponent: string;
  reportingInstance: string;
}

/** What to do with one recorded event: create it, bump the count of an existing one, or drop it. */
export type EventDecision =
  | { action: "create"; event: CoreEvent }
  | {
      action: "patch";
      namespace: string;
      name: string;
      patch: { count: number; lastTimestamp: string; message: string };
      /** The whole Event, to create instead when the one to patch is gone (Events expire). */
      event: CoreEvent;
    }
  | { action: "skip"; event: CoreEvent };

export interface EventCorrelatorOptions {
  clock?: Clock;
  /** Distinct messages for one object, type and reason within `similarWindowMs` before they are combined. */
  maxSimilarEvents?: number;
  similarWindowMs?: number;
  /** Per-object token bucket: this many events at once ... */
  spamBurst?: number;
  /** ... then one more per this interval. */
  spamRefillIntervalMs?: number;
  /** Entries kept per cache (least recently used go first), so memory stays bounded. */
  cacheSize?: number;
}

/** The values client-go's EventCorrelator uses by default. */
const CORRELATOR_DEFAULTS: Required<Omit<EventCorrelatorOptions, "clock">> = {
  maxSimilarEvents: 10,
  similarWindowMs: 10 * 60_000,
  spamBurst: 25,
  spamRefillIntervalMs: 5 * 60_000,
  cacheSize: 4096,
};

export const COMBINED_MESSAGE_PREFIX = "(combined from similar events): ";

/** An Event's name is a DNS subdomain (RFC 1123): the API server refuses a longer one. */
export const MAX_EVENT_NAME_LENGTH = 253;
/** Hex digits of the hash that stands for the cut-off end of a long object name. */
const EVENT_NAME_HASH_LENGTH = 10;

/**
 * The name of a new Event about the object `objectName`: the object's name, then the time and a sequence
 * number in hex (as client-go names them, so `kubectl get events` sorts them by object). An object name
 * of up to 253 characters leaves no room for the suffix: it is cut short and a hash of the whole name
 * added, so the name stays a valid DNS subdomain and two objects that share the kept prefix never share
 * an Event name.
 */
export function eventName(objectName: string, nowMs: number, sequence: number): string {
  const suffix = `.${nowMs.toString(16)}${(sequence % 4096).toString(16)}`;
  const name = `${objectName}${suffix}`;
  if (name.length <= MAX_EVENT_NAME_LENGTH) return name;
  const hash = createHash("sha256").update(objectName).digest("hex").slice(0, EVENT_NAME_HASH_LENGTH);
  // A DNS label ends in a letter or digit: the cut may not leave a '-' or '.' before the hash.
  const head = objectName
    .slice(0, MAX_EVENT_NAME_LENGTH - suffix.length - hash.length - 1)
    .replace(/[^a-z0-9]+$/, "");
  return `${head}-${hash}${suffix}`;
}

/**
 * One sequence for every recorder of the process: the operator has two (one behind the write fence),
 * and two Events of one object in one millisecond must not get one name.
 */
let eventSequence = 0;

/** A Map that forgets its least recently used entry beyond `capacity`. */
class LruMap<V> {
  private readonly entries = new Map<string, V>();
  constructor(private readonly capacity: number) {}
  get(key: string): V | undefined {
    const value = this.entries.get(key);
    if (value !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, value);
    }
    return value;
  }
  set(key: string, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value!);
  }
}

interface SimilarRecord {
  messages: Set<string>;
  lastMs: number;
}

interface LoggedEvent {
  name: string;
  namespace: string;
  count: number;
  firstTimestamp: string;
}

interface TokenBucket {
  tokens: number;
  lastMs: number;
}

function objectKeyOf(event: CoreEvent): string {
  const o = event.involvedObject;
  return JSON.stringify([
    event.source.component,
    o.apiVersion,
    o.kind,
    o.namespace ?? "",
    o.name,
    o.uid ?? "",
  ]);
}

/**
 * Decides, from what it has seen, what each new Event becomes (pure apart from the clock; no I/O):
 * - an event identical to an earlier one (object, type, reason, message) bumps that Event's count;
 * - once `maxSimilarEvents` distinct messages with one object, type and reason arrive within
 *   `similarWindowMs`, further ones become one combined Event (whose count then grows);
 * - every event, bumps included, takes a token from the object's bucket; without one it is dropped.
 */
export class EventCorrelator {
  private readonly clock: Clock;
  private readonly opts: Required<Omit<EventCorrelatorOptions, "clock">>;
  private readonly similar: LruMap<SimilarRecord>;
  private readonly logged: LruMap<LoggedEvent>;
  private readonly buckets: LruMap<TokenBucket>;

  constructor(options: EventCorrelatorOptions = {}) {
    this.clock = options.clock ?? systemClock;
    this.opts = { ...CORRELATOR_DEFAULTS, ...options };
    this.similar = new LruMap(this.opts.cacheSize);
    this.logged = new LruMap(this.opts.cacheSize);
    this.buckets = new LruMap(this.opts.cacheSize);
  }

  /** `event` is what would be created were it new (count 1, a fresh name, both timestamps now). */
  correlate(event: CoreEvent): EventDecision {
    const nowMs = this.clock.now();
    const aggregated = this.aggregate(event, nowMs);
    const decision = this.observe(aggregated.event, aggregated.key);
    if (!this.takeToken(objectKeyOf(event), nowMs)) return { action: "skip", event };
    return decision;
  }

  /** The Event to patch was gone, so it was created afresh: later repeats bump the new one. */
  created(event: CoreEvent): void {
    const key = this.keyOfCreated(event);
    this.logged.set(key, {
      name: event.metadata.name,
      namespace: event.metadata.namespace,
      count: event.count,
      firstTimestamp: event.firstTimestamp,
    });
  }

  private aggregate(event: CoreEvent, nowMs: number): { event: CoreEvent; key: string } {
    const similarKey = JSON.stringify([objectKeyOf(event), event.type, event.reason]);
    let record = this.similar.get(similarKey);
    if (record === undefined || nowMs - record.lastMs > this.opts.similarWindowMs) {
      record = { messages: new Set(), lastMs: nowMs };
    }
    record.messages.add(event.message);
    record.lastMs = nowMs;
    if (record.messages.size >= this.opts.maxSimilarEvents) {
      // Keep the set from growing past the threshold, as client-go does.
      record.messages.delete(record.messages.values().next().value!);
      this.similar.set(similarKey, record);
      const combined: CoreEvent = {
        ...event,
        message: `${COMBINED_MESSAGE_PREFIX}${event.message}`.slice(0, 1024),
      };
      return { event: combined, key: JSON.stringify([similarKey, "combined"]) };
    }
    this.similar.set(similarKey, record);
    return { event, key: JSON.stringify([similarKey, event.message]) };
  }

  private keyOfCreated(event: CoreEvent): string {
    const similarKey = JSON.stringify([objectKeyOf(event), event.type, event.reason]);
    return event.message.startsWith(COMBINED_MESSAGE_PREFIX)
      ? JSON.stringify([similarKey, "combined"])
      : JSON.stringify([similarKey, event.message]);
  }

  private observe(event: CoreEvent, key: string): EventDecision {
    const last = this.logged.get(key);
    if (last === undefined) {
      this.logged.set(key, {
        name: event.metadata.name,
        namespace: event.metadata.namespace,
        count: event.count,
        firstTimestamp: event.firstTimestamp,
      });
      return { action: "create", event };
    }
    const count = last.count + 1;
    this.logged.set(key, { ...last, count });
    return {
      action: "patch",
      namespace: last.namespace,
      name: last.name,
      patch: { count, lastTimestamp: event.lastTimestamp, message: event.message },
      event,
    };
  }

  private takeToken(key: string, nowMs: number): boolean {
    const bucket = this.buckets.get(key) ?? { tokens: this.opts.spamBurst, lastMs: nowMs };
    const refilled = Math.floor((nowMs - bucket.lastMs) / this.opts.spamRefillIntervalMs);
    if (refilled > 0) {
      bucket.tokens = Math.min(this.opts.spamBurst, bucket.tokens + refilled);
      bucket.lastMs += refilled * this.opts.spamRefillIntervalMs;
    }
    if (bucket.tokens >= this.opts.spamBurst) bucket.lastMs = nowMs;
    const accepted = bucket.tokens > 0;
    if (accepted) bucket.tokens--;
    this.buckets.set(key, bucket);
    return accepted;
  }
}

export interface EventRecorderOptions {
  /** Who reports (`source.component`, `reportingComponent`), e.g. dpo-operator. */
  component: string;
  /** Which instance reports (`reportingInstance`), e.g. the pod name. */
  instance: string;
  logger: Logger;
  clock?: Clock;
  correlator?: Omit<EventCorrelatorOptions, "clock">;
  /** Leadership: each Event write is checked against it just before it is sent. */
  fence?: WriteFence;
}

/**
 * Posts Events without blocking the caller, correlated by an EventCorrelator. Events of cluster-scoped
 * objects go to the `default` namespace, where `kubectl describe` looks for them. Writes go out one at a
 * time, in order, so a count bump never overtakes the create it bumps. A failed write is logged, never
 * retried: an Event is a hint, and a status write is the record.
 */
export class EventRecorder {
  private readonly clock: Clock;
  private readonly correlator: EventCorrelator;
  private tail: Promise<void> = Promise.resolve();

  constructor(
    private readonly kc: KubeConfig,
    private readonly opts: EventRecorderOptions,
  ) {
    this.clock = opts.clock ?? systemClock;
    this.correlator = new EventCorrelator({ ...opts.correlator, clock: this.clock });
  }

  /** Resolves once this event has been written (or dropped, or its write failed). */
  record(obj: InvolvedObject, type: EventType, reason: string, message: string): Promise<void> {
    const decision = this.correlator.correlate(this.newEvent(obj, type, reason, message));
    const write = this.tail.then(() => this.write(decision));
    this.tail = write;
    return write;
  }

  private newEvent(obj: InvolvedObject, type: EventType, reason: string, message: string): CoreEvent {
    const namespace = obj.metadata.namespace ?? "default";
    const nowMs = this.clock.now();
    const time = new Date(nowMs).toISOString();
    return {
      apiVersion: "v1",
      kind: "Event",
      metadata: {
        name: eventName(obj.metadata.name, nowMs, eventSequence++),
        namespace,
      },
      involvedObject: {
        apiVersion: obj.apiVersion,
        kind: obj.kind,
        name: obj.metadata.name,
        namespace: obj.metadata.namespace,
        uid: obj.metadata.uid,
        resourceVersion: obj.metadata.resourceVersion,
      },
      type,
      reason,
      message: message.slice(0, 1024),
      count: 1,
      firstTimestamp: time,
      lastTimestamp: time,
      source: { component: this.opts.component },
      reportingComponent: this.opts.component,
      reportingInstance: this.opts.instance,
    };
  }

  private async write(decision: EventDecision): Promise<void> {
    const { event } = decision;
    if (decision.action === "skip") {
      this.opts.logger.debug(
        { reason: event.reason, object: event.involvedObject.name },
        "event dropped by the spam filter",
      );
      return;
    }
    try {
      if (decision.action === "patch") {
        try {
          await kubeRequest(this.kc, {
            method: "PATCH",
            path: `/api/v1/namespaces/${decision.namespace}/events/${decision.name}`,
            body: decision.patch,
            contentType: "application/merge-patch+json",
            fence: this.opts.fence,
          });
          return;
        } catch (err) {
          if (!isNotFound(err)) throw err;
          // The Event expired or was deleted: start a new one, and bump that one from now on.
          this.correlator.created(event);
        }
      }
      await kubeRequest(this.kc, {
        method: "POST",
        path: `/api/v1/namespaces/${event.metadata.namespace}/events`,
        body: event,
        fence: this.opts.fence,
      });
    } catch (err) {
      this.opts.logger.warn(
        { reason: event.reason, object: event.involvedObject.name, err: String(err) },
        "could not record event",
      );
    }
  }
}
