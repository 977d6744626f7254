// Prints the closing summary of `make test` (summary.ts): each tier's tests and time, then the totals.
import { readTierReports, summaryLines } from "./summary.js";

const { tiers, startedAt } = readTierReports(process.argv[2] ?? ".local/test-results");
for (const line of summaryLines(tiers, startedAt)) console.log(line);
