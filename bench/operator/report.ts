// bench-operator's table: one row a figure, with its target and whether it held.
import { NODE_FLAGS } from "./knobs.js";
import { judgeOperator, type Row } from "./targets.js";

/** The table, after a line that says how the operator was started, and a line with Node and the time. */
export function printReport(rows: readonly Row[]): void {
  console.log(
    `\nbench-operator: operator started as its Deployment starts it (node ${NODE_FLAGS.join(" ")})\n`,
  );
  console.log("| metric | result | target | |");
  console.log("|---|---|---|---|");
  for (const r of rows) {
    const status = r.checks === undefined ? "" : judgeOperator([r]).length === 0 ? "ok" : "MISSED";
    console.log(`| ${r.metric} | ${r.value} | ${r.target} | ${status} |`);
  }
  console.log(`\nnode ${process.version}, ${new Date().toISOString()}`);
}
