#!/usr/bin/env node
// `dpo` command-line entry: dispatches to the operator, the plugin runtime and the small tools.
import { UsageError } from "./flags.js";

const USAGE = `Usage: dpo <command> [flags]

Commands:
  operator   run the controller that turns DevicePluginConfigs into plugin DaemonSets (dpo operator --help)
  plugin     run the device-plugin runtime on a node (dpo plugin --help)
  probe      print what a config's backend discovers on this machine: dpo probe --config FILE
  crds       print the dpo.dev CustomResourceDefinitions, or apply them server-side: dpo crds [apply]
  validate   check DevicePluginConfig manifests (v1beta1 or v1alpha1): dpo validate FILE...
  convert    print manifests in another API version: dpo convert --to v1beta1|v1alpha1 FILE...
  version    print version, git commit and supported kubelet API versions
`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "operator": {
      const { runOperatorCommand } = await import("./operator.js");
      return runOperatorCommand(rest);
    }
    case "plugin": {
      const { runPluginCommand } = await import("./plugin.js");
      return runPluginCommand(rest);
    }
    case "probe":
      return (await import("./probe.js")).runProbeCommand(rest);
    case "validate": {
      if (rest.length === 0 || rest.includes("--help") || rest.includes("-h")) {
        process.stderr.write(
          "Usage: dpo validate FILE...\n\nChecks DevicePluginConfig manifests in dpo.dev/v1beta1 or dpo.dev/v1alpha1 and\nsays which version each document uses. Exit status: 0 valid, 1 invalid, 2 unreadable.\n",
        );
        return rest.length === 0 ? 2 : 0;
      }
      const { validateFiles } = await import("./validate.js");
      const out = await validateFiles(rest);
      const stream = out.exitCode === 0 ? process.stdout : process.stderr;
      stream.write(out.lines.join("\n") + "\n");
      return out.exitCode;
    }
    case "convert":
      return (await import("./convert.js")).runConvertCommand(rest);
    case "crds":
      return (await import("./crds.js")).runCrdsCommand(rest);
    case "version": {
      const { formatVersion } = await import("./version.js");
      process.stdout.write(formatVersion(rest.includes("--json")));
      return 0;
    }
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(USAGE);
      return command === undefined ? 2 : 0;
    default:
      process.stderr.write(`dpo: unknown command '${command}'\n\n${USAGE}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof UsageError) {
      process.stderr.write(`dpo: ${err.message}\n`);
      process.exitCode = 2;
      return;
    }
    process.stderr.write(`dpo: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
