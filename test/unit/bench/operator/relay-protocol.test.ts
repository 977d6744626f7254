// The main thread's and the relay thread's bookkeeping (bench/operator/relay-protocol.ts): each question is
// settled by its own answer, whatever order answers come in, and a thread that ended fails what was asked.
import { describe, expect, it } from "vitest";
import {
  answer,
  requester,
  workerExecArgv,
  type RelayMessage,
  type RelayRequest,
} from "../../../../bench/operator/relay-protocol.js";

describe("requester", () => {
  it("settles each question with the answer carrying its id, in any order", async () => {
    const sent: RelayRequest[] = [];
    const asks = requester((r) => sent.push(r));
    const counts = asks.counts();
    const delay = asks.loopDelayMs();
    expect(sent.map((r) => r.type)).toEqual(["counts", "loop-delay"]);
    const [c, d] = sent as unknown as [{ id: number }, { id: number }];
    expect(c.id).not.toBe(d.id);
    expect(asks.settle({ type: "loop-delay", id: d.id, maxMs: 12.5 })).toBe(true);
    expect(asks.settle({ type: "counts", id: c.id, counts: { connections: 3, history: [] } })).toBe(true);
    await expect(delay).resolves.toBe(12.5);
    await expect(counts).resolves.toEqual({ connections: 3, history: [] });
  });

  it("ignores ready and answers to nothing asked, and does not settle a question twice", async () => {
    const sent: RelayRequest[] = [];
    const asks = requester((r) => sent.push(r));
    const delay = asks.loopDelayMs();
    const id = (sent[0] as { id: number }).id;
    expect(asks.settle({ type: "ready", port: 1 })).toBe(false);
    expect(asks.settle({ type: "loop-delay", id: id + 100, maxMs: 1 })).toBe(false);
    expect(asks.settle({ type: "loop-delay", id, maxMs: 7 })).toBe(true);
    expect(asks.settle({ type: "loop-delay", id, maxMs: 8 })).toBe(false);
    await expect(delay).resolves.toBe(7);
  });

  it("rejects an answer of the wrong kind", async () => {
    const sent: RelayRequest[] = [];
    const asks = requester((r) => sent.push(r));
    const counts = asks.counts();
    asks.settle({ type: "loop-delay", id: (sent[0] as { id: number }).id, maxMs: 1 });
    await expect(counts).rejects.toThrow(/answered counts with loop-delay/);
  });

  it("fails open questions and later ones once the thread is gone", async () => {
    const asks = requester(() => undefined);
    const open = asks.counts();
    asks.failAll(new Error("the relay thread exited (code 1)"));
    await expect(open).rejects.toThrow("the relay thread exited (code 1)");
    await expect(asks.loopDelayMs()).rejects.toThrow("the relay thread exited (code 1)");
  });
});

describe("answer", () => {
  const history = [{ openedAt: 1, closedAt: 5, closedBy: "server" as const }, { openedAt: 2 }];
  const relay = { connections: () => [2], history: () => history };

  it("answers counts with the first backend's connections and a copy of the history", () => {
    const m = answer({ type: "counts", id: 4 }, relay, () => 0) as Extract<RelayMessage, { type: "counts" }>;
    expect(m).toEqual({ type: "counts", id: 4, counts: { connections: 2, history } });
    expect(m.counts.history[1]).not.toBe(history[1]);
  });

  it("answers loop-delay from the monitor, and counts 0 before any backend", () => {
    expect(answer({ type: "loop-delay", id: 9 }, relay, () => 31)).toEqual({
      type: "loop-delay",
      id: 9,
      maxMs: 31,
    });
    const none = { connections: () => [], history: () => [] };
    expect(answer({ type: "counts", id: 1 }, none, () => 0)).toMatchObject({ counts: { connections: 0 } });
  });
});

describe("workerExecArgv", () => {
  it.each([
    { parent: [], file: "w.ts", want: ["--import", "tsx"] },
    { parent: ["--conditions", "dev"], file: "w.ts", want: ["--import", "tsx"] },
    { parent: ["--expose-gc", "--import", "tsx"], file: "w.ts", want: undefined },
    { parent: ["--import=tsx"], file: "w.ts", want: undefined },
    { parent: ["--expose-gc"], file: "w.js", want: undefined },
  ])("$parent for $file", ({ parent, file, want }) => {
    expect(workerExecArgv(parent, file)).toEqual(want);
  });
});
