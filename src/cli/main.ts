#!/usr/bin/env node
// `dpo` command-line entry; the commands are in run.ts.
import { describeFailure } from "./flags.js";
import { main } from "./run.js";

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    // main answers every error itself; this is for a bug in that answer.
    process.stderr.write(describeFailure(err).text);
    process.exitCode = 1;
  },
);
