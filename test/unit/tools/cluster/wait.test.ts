// waitFor: what the timeout error shows is what the test needs to see.
import { describe, expect, it, vi } from "vitest";
import { waitFor } from "../../../../tools/cluster/wait.js";

describe("waitFor", () => {
  it("returns the first truthy value", async () => {
    let n = 0;
    await expect(waitFor("n to reach 3", () => (++n >= 3 ? n : undefined), { intervalMs: 1 })).resolves.toBe(
      3,
    );
  });

  it("shows the last observed state on timeout", async () => {
    let n = 0;
    await expect(
      waitFor(
        "never",
        (observe) => {
          observe({ attempt: ++n });
          return false;
        },
        { timeoutMs: 50, intervalMs: 5 },
      ),
    ).rejects.toThrow(/timed out after 0\.1s waiting for never; last seen: \{ attempt: \d+ \}/);
  });

  it("shows the last error a probe threw", async () => {
    await expect(
      waitFor(
        "a failing probe",
        () => {
          throw new Error("connection refused");
        },
        { timeoutMs: 30, intervalMs: 5 },
      ),
    ).rejects.toThrow(/last seen: Error: connection refused$/);
  });

  it("keeps what the previous probe saw when the deadline cuts a hanging probe off", async () => {
    let calls = 0;
    await expect(
      waitFor(
        "a probe that hangs the second time",
        async (observe) => {
          calls++;
          if (calls === 1) {
            observe("2/3 ready");
            return false;
          }
          return new Promise<false>(() => undefined);
        },
        { timeoutMs: 80, intervalMs: 5 },
      ),
    ).rejects.toThrow(/last seen: 2\/3 ready \(and the probe after it was still running at the deadline\)$/);
  });
  it("starts no probe after one the deadline cut off, even when the clock read next lags the timer", async () => {
    // Timers and clock reads can disagree by a millisecond or more on a loaded machine: the timer that cuts a
    // probe off may fire while a clock read a moment later still says the deadline is ahead.
    const real = performance.now.bind(performance);
    let lag = 0;
    const clock = vi.spyOn(performance, "now").mockImplementation(() => real() - lag);
    let calls = 0;
    try {
      await expect(
        waitFor(
          "a probe that hangs the second time",
          async (observe) => {
            calls++;
            if (calls === 1) {
              observe("2/3 ready");
              return false;
            }
            // Once the deadline's timer is armed for this probe, the clock reads 50 ms behind it.
            setImmediate(() => {
              lag = 50;
            });
            return new Promise<false>(() => undefined);
          },
          { timeoutMs: 80, intervalMs: 5 },
        ),
      ).rejects.toThrow(
        /last seen: 2\/3 ready \(and the probe after it was still running at the deadline\)$/,
      );
      expect(calls).toBe(2);
    } finally {
      clock.mockRestore();
    }
  });
});
