// The plugin's process metrics (process-metrics.ts, no prom-client collectors) are the families the operator's
// prom-client collectDefaultMetrics writes, which docs/metrics.md documents: the same names, help, types and
// label names, each with a sample where prom-client has one.
import { afterAll, describe, expect, it } from "vitest";
import { collectProcessMetrics, Registry } from "../../../src/observability/metrics.js";
import { ProcessMetrics } from "../../../src/observability/process-metrics.js";

/** Each family of an exposition text: its HELP and TYPE lines, and its samples' names with label names. */
function families(text: string): Map<string, { help: string; type: string; samples: Set<string> }> {
  const out = new Map<string, { help: string; type: string; samples: Set<string> }>();
  let current: { help: string; type: string; samples: Set<string> } | undefined;
  for (const line of text.split("\n")) {
    const help = /^# HELP (\S+) (.*)$/.exec(line);
    if (help) {
      current = { help: help[2]!, type: "", samples: new Set() };
      out.set(help[1]!, current);
      continue;
    }
    const type = /^# TYPE \S+ (\S+)$/.exec(line);
    if (type && current) current.type = type[1]!;
    const sample = /^([a-z_]+)(\{[^}]*\})? \S+$/.exec(line);
    if (sample && current) {
      const labels = [...(sample[2] ?? "").matchAll(/([a-z_]+)="/g)].map((m) => m[1]).join(",");
      current.samples.add(`${sample[1]}{${labels}}`);
    }
  }
  return out;
}

const ours = new ProcessMetrics();
afterAll(() => ours.stop());

describe("ProcessMetrics", () => {
  it("writes prom-client's default families with their help, types and label names", async () => {
    const registry = new Registry();
    await collectProcessMetrics(registry);
    // Some garbage for the GC histogram, on both sides.
    for (let i = 0; i < 200; i++) new Array(10_000).fill(i);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const theirs = families(await registry.metrics());
    const mine = families(ours.render());
    expect([...mine.keys()]).toEqual([...theirs.keys()]);
    for (const [name, f] of theirs) {
      expect({ name, help: mine.get(name)?.help, type: mine.get(name)?.type }).toEqual({
        name,
        help: f.help,
        type: f.type,
      });
      // Per-type series (handles, resources) and GC kinds depend on the moment; the label names must not.
      for (const sample of f.samples) {
        if (/_bucket|_sum|_count|active_(handles|requests|resources)\{type\}/.test(sample)) continue;
        expect(mine.get(name)?.samples).toContain(sample);
      }
    }
  });

  it("reads what the process is: its RSS, its start, its Node version, and one scrape's lag on the next", async () => {
    const text = ours.render();
    const value = (name: string): number => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1]);
    expect(value("process_resident_memory_bytes")).toBeGreaterThan(10 * 1024 * 1024);
    expect(
      Math.abs(value("process_start_time_seconds") - (Date.now() / 1000 - process.uptime())),
    ).toBeLessThan(2);
    expect(value("process_open_fds")).toBeGreaterThan(2);
    expect(text).toContain(`nodejs_version_info{version="${process.version}",`);
    await new Promise((resolve) => setImmediate(resolve));
    expect(Number(/^nodejs_eventloop_lag_seconds (\S+)$/m.exec(ours.render())?.[1])).toBeGreaterThan(0);
  });
});
