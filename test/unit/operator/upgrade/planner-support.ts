// Builders for the planner's tests: a node as the planner observes it (untouched, started, done), a
// rollout spec, and one row of the node-by-node table with the check every row gets.
import { expect } from "vitest";
import { type NodeObservation, type Plan, planRollout } from "../../../../src/operator/upgrade/planner.js";
import type { RolloutSpec } from "../../../../src/operator/model/rollout.js";

export const NOW = 1_000_000;
export const SURGE_KUBELET = "v1.37.0";
export const REPLACE_KUBELET = "v1.36.5";

/** An untouched node on a kubelet that can surge, with 4 healthy devices served by the old plugin. */
export function node(name: string, over: Partial<NodeObservation> = {}): NodeObservation {
  return {
    name,
    kubeletVersion: SURGE_KUBELET,
    inOld: true,
    inNew: false,
    oldPodPresent: true,
    newRegistered: false,
    oldRegistered: true,
    allocatable: 4,
    unhealthy: 0,
    ...over,
  };
}

/** A node first touched `ago` ms before NOW, with its baseline recorded. */
export function started(name: string, over: Partial<NodeObservation> = {}, ago = 1000): NodeObservation {
  return node(name, { startedAt: NOW - ago, baseline: 4, ...over });
}

/** Done on the new revision. */
export function updatedNode(name: string, over: Partial<NodeObservation> = {}): NodeObservation {
  return started(name, {
    inOld: false,
    inNew: true,
    oldPodPresent: false,
    newRegistered: true,
    oldRegistered: false,
    ...over,
  });
}

export function spec(over: Partial<RolloutSpec> = {}): RolloutSpec {
  return {
    strategy: "Auto",
    maxUnavailable: 1,
    progressDeadlineSeconds: 600,
    paused: false,
    autoRollback: false,
    ...over,
  };
}

export function plan(nodes: NodeObservation[], over: Partial<RolloutSpec> = {}, rollingBack = false): Plan {
  return planRollout({ nodes, spec: spec(over), now: NOW, rollingBack });
}

/** Actions as "node:Kind" strings, which read better in a table. */
export function acts(p: Plan): string[] {
  return p.actions.map((a) => `${a.node}:${a.kind}`);
}

/** Past the default 600 s progress deadline. */
export const EXPIRED = 601_000;

/** One row of the node-by-node table: the cluster, the spec over the default, and the plan it must give. */
export interface NodeCase {
  name: string;
  nodes: NodeObservation[];
  spec?: Partial<RolloutSpec>;
  rollingBack?: boolean;
  actions: string[];
  phase: Plan["phase"];
  inFlight?: string[];
  failed?: string[];
  updated?: number;
}

/** The actions and phase always; in-flight, failed and updated nodes where the row names them. */
export function expectPlan(c: NodeCase): void {
  const p = plan(c.nodes, c.spec, c.rollingBack ?? false);
  expect(acts(p)).toEqual(c.actions);
  expect(p.phase).toBe(c.phase);
  if (c.inFlight !== undefined) expect(p.inFlight).toEqual(c.inFlight);
  if (c.failed !== undefined) expect(p.failed).toEqual(c.failed);
  if (c.updated !== undefined) expect(p.updated).toBe(c.updated);
}
