// `dpo crds`: prints the CustomResourceDefinitions generated from the API schemas, for `dpo crds | kubectl apply -f -`.
import { renderCrdsYamlStream } from "../api/crd.js";
import { UsageError } from "./flags.js";

const USAGE = "Usage: dpo crds\n\nPrints the dpo.dev CustomResourceDefinitions as a YAML stream.\n";

export function runCrdsCommand(args: readonly string[], out: NodeJS.WritableStream = process.stdout): number {
  if (args.includes("--help") || args.includes("-h")) {
    out.write(USAGE);
    return 0;
  }
  if (args.length > 0) throw new UsageError(`crds takes no arguments, got: ${args.join(" ")}`);
  out.write(renderCrdsYamlStream());
  return 0;
}
