// The `dpo` command line: dispatches to the operator, the plugin runtime and the small tools, and writes
// every error the same way (`dpo: <message>`, the usage after a usage error, no stack for a user's mistake).
import { parseArgs } from "node:util";
import { argsError, describeFailure, UsageError } from "./flags.js";

/** Each command's synopsis, for `dpo --help` and after a usage error of a command without its own usage. */
const COMMANDS: readonly (readonly [string, string, string])[] = [
  [
    "operator",
    "dpo operator [flags]",
    "run the controller that turns DevicePluginConfigs into plugin DaemonSets",
  ],
  ["plugin", "dpo plugin --config FILE [flags]", "run the device-plugin runtime on a node"],
  [
    "probe",
    "dpo probe --config FILE|- [-o text|json]",
    "print what a config's backend discovers on this machine",
  ],
  [
    "crds",
    "dpo crds [apply] [flags]",
    "print the dpo.dev CustomResourceDefinitions, or apply them server-side",
  ],
  [
    "validate",
    "dpo validate [-o text|json|junit] [--junit FILE] FILE|-...",
    "check DevicePluginConfig manifests (v1beta1 or v1alpha1)",
  ],
  [
    "convert",
    "dpo convert --to v1beta1|v1alpha1 [-o yaml|json] FILE|-...",
    "print manifests in another API version",
  ],
  ["version", "dpo version [-o text|json]", "print version, git commit and supported kubelet API versions"],
  [
    "status",
    "kubectl dpo status [CONFIG] [--kubeconfig FILE] [--context NAME] [-n NS]",
    "per config and node: revision, registration, devices, and why a node waits",
  ],
  [
    "rollout",
    "kubectl dpo rollout status|pause|resume|undo CONFIG [--timeout D] [--watch=false]",
    "follow a config's plugin rollout to its end, or pause or resume it",
  ],
  [
    "describe",
    "kubectl dpo describe node NODE",
    "every config's state on a node, each device's health and reason",
  ],
  ["completion", "kubectl dpo completion bash|zsh", "print a shell completion script"],
];

export const USAGE = `Usage: dpo <command> [flags]
       dpo --version

Commands:
${COMMANDS.map(([name, synopsis, what]) => `  ${name.padEnd(10)} ${what}\n             ${synopsis}`).join("\n")}

'dpo <command> --help' describes a command and its flags. Installed as kubectl-dpo (the npm package
does), status, rollout, describe and completion are 'kubectl dpo <command>'.
`;

function commandUsage(command: string): string | undefined {
  const entry = COMMANDS.find(([name]) => name === command);
  return entry && `Usage: ${entry[1]}\n\n'dpo ${command} --help' describes the command and its flags.\n`;
}

const VERSION_USAGE = `Usage: dpo version [-o text|json]
       dpo --version

Prints the version, the git commit, the kubelet device plugin API versions and Node.js's.

Flags:
  -o, --output text|json   text (default) or one JSON object; --json is the same as -o json
`;

/** Parses `dpo version`'s flags: whether to print JSON. `--json` stays as the older spelling of `-o json`. */
export function parseVersionArgs(argv: readonly string[]): { json: boolean; help: boolean } {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        output: { type: "string", short: "o" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
    }));
  } catch (err) {
    throw argsError(err, VERSION_USAGE);
  }
  const output = values.output ?? (values.json === true ? "json" : "text");
  if (output !== "text" && output !== "json") {
    throw new UsageError(`--output must be text or json, got '${output}'`, VERSION_USAGE);
  }
  if (values.json === true && output !== "json") {
    throw new UsageError(`--json and --output ${output} disagree`, VERSION_USAGE);
  }
  return { json: output === "json", help: values.help === true };
}

async function runVersionCommand(argv: readonly string[]): Promise<number> {
  const { json, help } = parseVersionArgs(argv);
  if (help) {
    process.stdout.write(VERSION_USAGE);
    return 0;
  }
  const { formatVersion } = await import("./version.js");
  process.stdout.write(formatVersion(json));
  return 0;
}

async function run(command: string | undefined, rest: string[]): Promise<number> {
  switch (command) {
    case "operator":
      return (await import("./operator.js")).runOperatorCommand(rest);
    case "plugin":
      return (await import("./plugin.js")).runPluginCommand(rest);
    case "probe":
      return (await import("./probe.js")).runProbeCommand(rest);
    case "validate":
      return (await import("./validate.js")).runValidateCommand(rest);
    case "convert":
      return (await import("./convert.js")).runConvertCommand(rest);
    case "crds":
      return (await import("./crds.js")).runCrdsCommand(rest);
    case "status":
      return (await import("./kubectl-plugin.js")).runStatusCommand(rest);
    case "rollout":
      return (await import("./kubectl-plugin.js")).runRolloutCommand(rest);
    case "describe":
      return (await import("./kubectl-plugin.js")).runDescribeCommand(rest);
    case "completion":
      return (await import("./kubectl-plugin.js")).runCompletionCommand(rest);
    case "__complete":
      return (await import("./kubectl-plugin.js")).runCompleteCommand(rest);
    case "version":
    case "--version":
      return runVersionCommand(rest);
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(USAGE);
      return command === undefined ? 2 : 0;
    default:
      throw new UsageError(
        command.startsWith("-") ? `unknown flag '${command}'` : `unknown command '${command}'`,
        USAGE,
      );
  }
}

/** Runs one dpo command line and returns its exit code; errors are written as `dpo: <message>`. */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    return await run(command, rest);
  } catch (err) {
    const withUsage =
      err instanceof UsageError && err.usage === undefined && command !== undefined
        ? new UsageError(err.message, commandUsage(command))
        : err;
    const failure = describeFailure(withUsage);
    process.stderr.write(failure.text);
    return failure.exitCode;
  }
}
