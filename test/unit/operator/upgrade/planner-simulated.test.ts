// The planner over whole rollouts, simulated against a model cluster (planner-sim.ts) with random
// kubelets, gate outcomes, failures and restarts.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type PlanInput, planRollout } from "../../../../src/operator/upgrade/planner.js";
import { dice, observe, scenarioArb, shuffle, simulate, STEP_MS, touched, up } from "./planner-sim.js";

const RUNS = 500;

describe("planRollout, simulated rollouts", () => {
  it("keeps every invariant and ends Complete, RolledBack, or Failed as its failures say", () => {
    const seen = { complete: 0, rolledBack: 0, failed: 0 };
    fc.assert(
      fc.property(scenarioArb(), (sc) => {
        const out = simulate(sc);
        const targets = out.nodes.filter((n) => n.targeted);
        for (const n of out.nodes.filter((m) => !m.targeted)) {
          expect(n.edited || n.starts > 0, `untargeted ${n.name} was touched`).toBe(false);
        }
        if (!out.markedFailed) {
          // (5) Without failures the rollout completes, every targeted node on the new revision.
          expect(out.phase).toBe("Complete");
          expect(out.lastPlan.updated).toBe(targets.length);
          for (const n of targets) {
            expect(n.inNew && !n.inOld && n.oldPod === undefined && up(n.newPod, out.step)).toBe(true);
            expect(n.starts).toBe(1);
          }
          seen.complete++;
        } else if (sc.autoRollback) {
          // (4) After a rollback every touched node is back on the old revision, and the others were never touched.
          expect(out.phase).toBe("RolledBack");
          for (const n of targets) {
            if (touched(n)) {
              expect(n.inOld && !n.inNew && up(n.oldPod, out.step), `${n.name} is not back`).toBe(true);
              expect(n.starts).toBe(1);
            } else {
              expect(n.inOld && !n.inNew).toBe(true);
            }
          }
          seen.rolledBack++;
        } else {
          expect(out.phase).toBe("Failed");
          expect(out.lastPlan.failed.length).toBeGreaterThan(0);
          seen.failed++;
        }
      }),
      { numRuns: RUNS },
    );
    // Every ending is reached often enough that the properties above are not vacuous.
    expect(seen.complete).toBeGreaterThan(RUNS / 10);
    expect(seen.rolledBack).toBeGreaterThan(RUNS / 20);
    expect(seen.failed).toBeGreaterThan(RUNS / 20);
  });

  it("plans the same from the same cluster, whatever order its nodes are listed in", () => {
    fc.assert(
      fc.property(scenarioArb(), fc.integer({ min: 1, max: 60 }), (sc, stopAt) => {
        // Part-way through a rollout, a restarted operator has nothing but the cluster, listed in
        // whatever order its cache fills; it must decide what the running one would have.
        const out = simulate(sc, stopAt);
        const observed = out.nodes.map((n) => observe(n, out.step));
        const input: PlanInput = {
          nodes: observed,
          spec: {
            strategy: sc.strategy,
            maxUnavailable: sc.maxUnavailable,
            progressDeadlineSeconds: sc.deadlineSteps,
            paused: false,
            autoRollback: sc.autoRollback,
          },
          now: out.step * STEP_MS,
          rollingBack: false,
        };
        const want = planRollout(input);
        expect(planRollout({ ...input, nodes: [...observed].reverse() })).toEqual(want);
        expect(planRollout({ ...input, nodes: shuffle(observed, dice(sc.seed)) })).toEqual(want);
      }),
      { numRuns: RUNS },
    );
  });
});
