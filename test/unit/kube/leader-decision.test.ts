// Lease leader election's pure decision table (decideLease) and the time an observation is taken at.
import { describe, expect, it } from "vitest";
import {
  decideLease,
  observationTime,
  type LeaseDecision,
  type LeaseDecisionInput,
} from "../../../src/kube/index.js";
import { T0, held } from "./leader-support.js";

describe("decideLease", () => {
  const base: LeaseDecisionInput = {
    current: undefined,
    observedAt: T0,
    now: T0,
    wallNow: T0,
    identity: "me",
    leaseDurationSeconds: 15,
  };
  const cases: Array<{ name: string; input: Partial<LeaseDecisionInput>; expected: LeaseDecision }> = [
    {
      name: "no lease yet: create it, first holder, no transitions",
      input: { current: undefined },
      expected: {
        action: "create",
        record: {
          holderIdentity: "me",
          leaseDurationSeconds: 15,
          acquireTime: T0,
          renewTime: T0,
          leaseTransitions: 0,
        },
      },
    },
    {
      name: "held by us: renew, keeping acquireTime and transitions",
      input: { current: held("me"), now: T0 + 2_000, wallNow: T0 + 2_000 },
      expected: {
        action: "renew",
        record: {
          holderIdentity: "me",
          leaseDurationSeconds: 15,
          acquireTime: T0 - 60_000,
          renewTime: T0 + 2_000,
          leaseTransitions: 3,
        },
      },
    },
    {
      name: "held by us but expired: still ours to renew",
      input: { current: held("me"), observedAt: T0 - 60_000 },
      expected: {
        action: "renew",
        record: {
          holderIdentity: "me",
          leaseDurationSeconds: 15,
          acquireTime: T0 - 60_000,
          renewTime: T0,
          leaseTransitions: 3,
        },
      },
    },
    {
      name: "held by another, observed 14.999 s ago: wait",
      input: { current: held("other"), observedAt: T0 - 14_999 },
      expected: { action: "wait", holder: "other", expiresAt: T0 + 1 },
    },
    {
      name: "held by another, observed exactly one lease duration ago: expired, take it",
      input: { current: held("other"), observedAt: T0 - 15_000 },
      expected: {
        action: "take",
        record: {
          holderIdentity: "me",
          leaseDurationSeconds: 15,
          acquireTime: T0,
          renewTime: T0,
          leaseTransitions: 4,
        },
      },
    },
    {
      name: "the holder's own lease duration counts, not ours",
      input: { current: held("other", { leaseDurationSeconds: 60 }), observedAt: T0 - 30_000 },
      expected: { action: "wait", holder: "other", expiresAt: T0 + 30_000 },
    },
    {
      name: "renewTime far in the past on a skewed clock, but the record just changed: wait",
      input: { current: held("other", { renewTime: T0 - 3_600_000 }), observedAt: T0 },
      expected: { action: "wait", holder: "other", expiresAt: T0 + 15_000 },
    },
    {
      name: "renewTime in the future on a skewed clock, but unchanged for a lease duration: take",
      input: { current: held("other", { renewTime: T0 + 3_600_000 }), observedAt: T0 - 20_000 },
      expected: {
        action: "take",
        record: {
          holderIdentity: "me",
          leaseDurationSeconds: 15,
          acquireTime: T0,
          renewTime: T0,
          leaseTransitions: 4,
        },
      },
    },
    {
      name: "released (empty holder), just observed: take it at once",
      input: { current: held("", { leaseDurationSeconds: 1 }), observedAt: T0 },
      expected: {
        action: "take",
        record: {
          holderIdentity: "me",
          leaseDurationSeconds: 15,
          acquireTime: T0,
          renewTime: T0,
          leaseTransitions: 4,
        },
      },
    },
    {
      name: "expiry on the monotonic clock, times written from the wall clock",
      input: { current: held("other"), observedAt: 5_000, now: 20_000, wallNow: T0 },
      expected: {
        action: "take",
        record: {
          holderIdentity: "me",
          leaseDurationSeconds: 15,
          acquireTime: T0,
          renewTime: T0,
          leaseTransitions: 4,
        },
      },
    },
    {
      name: "the wall clock stepped an hour ahead: the monotonic clock says 1 s, so wait",
      input: { current: held("other"), observedAt: 5_000, now: 6_000, wallNow: T0 + 3_600_000 },
      expected: { action: "wait", holder: "other", expiresAt: 20_000 },
    },
    {
      name: "the wall clock stepped an hour back: the monotonic clock says 15 s, so take",
      input: { current: held("other"), observedAt: 5_000, now: 20_000, wallNow: T0 - 3_600_000 },
      expected: {
        action: "take",
        record: {
          holderIdentity: "me",
          leaseDurationSeconds: 15,
          acquireTime: T0 - 3_600_000,
          renewTime: T0 - 3_600_000,
          leaseTransitions: 4,
        },
      },
    },
  ];
  it.each(cases)("$name", ({ input, expected }) => {
    expect(decideLease({ ...base, ...input })).toEqual(expected);
  });
});

describe("observationTime", () => {
  const record = held("other");
  it.each([
    { name: "first sight", previous: undefined, next: record, expected: T0 },
    {
      name: "unchanged record keeps the old time",
      previous: record,
      next: { ...record },
      expected: T0 - 9_000,
    },
    { name: "a renewal is a change", previous: record, next: { ...record, renewTime: T0 }, expected: T0 },
    {
      name: "a new holder is a change",
      previous: record,
      next: { ...record, holderIdentity: "x" },
      expected: T0,
    },
  ])("$name", ({ previous, next, expected }) => {
    expect(observationTime(previous, T0 - 9_000, next, T0)).toBe(expected);
  });
});
