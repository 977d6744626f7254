// `dpo crds`: prints the CustomResourceDefinitions generated from the API schemas, for `dpo crds | kubectl apply -f -`;
// `dpo crds apply` applies them server-side itself (the chart's CRD upgrade hook runs it: the image has no kubectl).
import { allCrds, renderCrdsYamlStream, type CrdOptions } from "../api/crd.js";
import { ServerSideApplier } from "../kube/apply.js";
import { CommandError, formatFlagHelp, resolveFlags, UsageError, type FlagSpec } from "./flags.js";
import { loadKubeConfig } from "./kubeconfig.js";

export const CRDS_FLAGS: readonly FlagSpec[] = [
  {
    name: "webhook-namespace",
    env: "DPO_WEBHOOK_NAMESPACE",
    description: "Namespace of the dpo-webhook Service the DevicePluginConfig CRD converts through.",
    default: "dpo-system",
  },
  {
    name: "webhook-service",
    env: "DPO_WEBHOOK_SERVICE",
    description: "Name of that Service (the operator's --webhook-service).",
    default: "dpo-webhook",
  },
  {
    name: "kubeconfig",
    env: "DPO_KUBECONFIG",
    description: "apply: kubeconfig to use; default: in-cluster config, else $KUBECONFIG or ~/.kube/config.",
  },
  {
    name: "field-manager",
    env: "DPO_FIELD_MANAGER",
    description: "apply: the server-side apply field manager, which takes over conflicting fields.",
    default: "dpo-crds",
  },
];

const USAGE = `Usage: dpo crds [apply] [flags]

Prints the dpo.dev CustomResourceDefinitions as a YAML stream; with apply, applies them server-side
(taking over fields other managers own) to the cluster of the kubeconfig.

Flags:
${formatFlagHelp(CRDS_FLAGS)}
`;

/** The exit status, at once when printing, once every CRD is applied with `apply`. */
export function runCrdsCommand(
  args: readonly string[],
  out: NodeJS.WritableStream = process.stdout,
  env: Readonly<Record<string, string | undefined>> = process.env,
): number | Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    out.write(USAGE);
    return 0;
  }
  const { values, positionals } = resolveFlags(CRDS_FLAGS, args, env);
  const [action, ...extra] = positionals;
  if (extra.length > 0 || (action !== undefined && action !== "apply")) {
    throw new UsageError(`crds takes no arguments but 'apply', got: ${positionals.join(" ")}`, USAGE);
  }
  const webhookNamespace = values["webhook-namespace"] ?? "";
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(webhookNamespace) || webhookNamespace.length > 63) {
    throw new UsageError(`--webhook-namespace: '${webhookNamespace}' is not a namespace name`, USAGE);
  }
  const webhookService = values["webhook-service"] ?? "";
  if (!/^[a-z]([-a-z0-9]*[a-z0-9])?$/.test(webhookService) || webhookService.length > 63) {
    throw new UsageError(`--webhook-service: '${webhookService}' is not a Service name`, USAGE);
  }
  if (action === undefined) {
    out.write(renderCrdsYamlStream({ webhookNamespace, webhookService }));
    return 0;
  }
  return applyCrds(values, { webhookNamespace, webhookService }, out, env);
}

async function applyCrds(
  values: Record<string, string | undefined>,
  crdOptions: CrdOptions,
  out: NodeJS.WritableStream,
  env: Readonly<Record<string, string | undefined>>,
): Promise<number> {
  const applier = new ServerSideApplier(loadKubeConfig(values["kubeconfig"], env), {
    fieldManager: values["field-manager"] ?? "dpo-crds",
    force: true,
  });
  for (const crd of allCrds(crdOptions)) {
    try {
      await applier.apply(crd);
    } catch (err) {
      // One line, as every error of the command: the API server's message says what to fix.
      throw new CommandError(
        `applying CustomResourceDefinition ${crd.metadata.name}: ${(err as Error).message.split("\n")[0]}`,
      );
    }
    out.write(`customresourcedefinition.apiextensions.k8s.io/${crd.metadata.name} serverside-applied\n`);
  }
  return 0;
}
