// bench-operator's table: one row a figure, with its target and whether it held.
import { NODE_FLAGS } from "./knobs.js";

export interface Row {
  metric: string;
  value: string;
  target: string;
  ok: boolean;
}

/** The table, after a line that says how the operator was started, and a line with Node and the time. */
export function printReport(rows: readonly Row[]): void {
  console.log(
    `\nbench-operator: operator started as its Deployment starts it (node ${NODE_FLAGS.join(" ")})\n`,
  );
  console.log("| metric | result | target | |");
  console.log("|---|---|---|---|");
  for (const r of rows) console.log(`| ${r.metric} | ${r.value} | ${r.target} | ${r.ok ? "ok" : "MISSED"} |`);
  console.log(`\nnode ${process.version}, ${new Date().toISOString()}`);
}
