#!/usr/bin/env node
// `dpo` command-line entry; the commands are in run.ts.
import { basename } from "node:path";
import { fileURLToPath } from "node:url";
import { describeFailure } from "./flags.js";
import { setCliEntry } from "./plugin-config-apart.js";
import { main } from "./run.js";

setCliEntry(fileURLToPath(import.meta.url));

// `dpo crds | head`: the reader closed the pipe, so there is nobody left to write to. Stop quietly, as a
// Unix tool does on SIGPIPE, instead of an unhandled EPIPE stack trace.
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (err.code === "EPIPE") process.exit(0);
  throw err;
});

// kubectl completes a plugin's arguments by running kubectl_complete-<plugin> with them: the same program
// under a third name (package.json's bin), answering as `dpo __complete` does.
const invokedAs = basename(process.argv[1] ?? "");
const argv = invokedAs.startsWith("kubectl_complete-")
  ? ["__complete", ...process.argv.slice(2)]
  : process.argv.slice(2);

main(argv).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    // main answers every error itself; this is for a bug in that answer.
    process.stderr.write(describeFailure(err).text);
    process.exitCode = 1;
  },
);
