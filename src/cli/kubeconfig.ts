// Where a command that talks to the cluster (the operator, `dpo crds apply`) finds it: --kubeconfig, in-cluster, $KUBECONFIG or ~/.kube/config. A missing
// or broken kubeconfig is one line naming the file and what is wrong, before anything starts.
import { KubeConfig } from "@kubernetes/client-node";
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import { CommandError } from "./flags.js";

/** The first line of a loader's error, with the errno code where there is one (ENOENT, EACCES). */
function reason(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (typeof code === "string" && code.startsWith("E")) return code;
  const message = err instanceof Error ? err.message : String(err);
  return message.split("\n")[0] ?? message;
}

function loadFile(kc: KubeConfig, file: string, source: string): void {
  try {
    kc.loadFromFile(file);
  } catch (err) {
    throw new CommandError(`cannot load the kubeconfig ${file} (${source}): ${reason(err)}`);
  }
}

/** The kubeconfig must name a cluster with a server, or the first request fails far from its cause. */
function checkCurrentCluster(kc: KubeConfig, source: string): void {
  const context = kc.getCurrentContext();
  if (!context) throw new CommandError(`the kubeconfig (${source}) has no current-context`);
  const cluster = kc.getCurrentCluster();
  if (!cluster) {
    throw new CommandError(`the kubeconfig (${source}): current-context '${context}' names no known cluster`);
  }
  if (!URL.canParse(cluster.server)) {
    throw new CommandError(
      `the kubeconfig (${source}): cluster '${cluster.name}' has no valid server URL ('${cluster.server}')`,
    );
  }
}

/**
 * Loads the kubeconfig the way kubectl picks it, except that finding none is an error instead of
 * http://localhost:8080; `context` (kubectl's --context) replaces its current-context. Throws CommandError
 * with one line naming the file and the problem.
 */
export function loadKubeConfig(
  flag: string | undefined,
  env: Readonly<Record<string, string | undefined>> = process.env,
  home: string = homedir(),
  context?: string,
): KubeConfig {
  const kc = new KubeConfig();
  let source: string;
  if (flag) {
    source = "--kubeconfig";
    loadFile(kc, flag, source);
  } else if (env["KUBERNETES_SERVICE_HOST"]) {
    source = "in-cluster";
    try {
      kc.loadFromCluster();
    } catch (err) {
      throw new CommandError(`cannot use the in-cluster credentials: ${reason(err)}`);
    }
  } else if (env["KUBECONFIG"]) {
    source = "$KUBECONFIG";
    const files = env["KUBECONFIG"].split(delimiter).filter(Boolean);
    const [first, ...rest] = files;
    if (first === undefined) throw new CommandError("$KUBECONFIG names no file");
    loadFile(kc, first, source);
    for (const file of rest) {
      const more = new KubeConfig();
      loadFile(more, file, source);
      kc.mergeConfig(more);
    }
  } else {
    const file = join(home, ".kube", "config");
    if (!existsSync(file)) {
      throw new CommandError(
        `no kubeconfig: not in a cluster, $KUBECONFIG is unset and ${file} does not exist; pass --kubeconfig FILE`,
      );
    }
    source = "~/.kube/config";
    loadFile(kc, file, source);
  }
  if (context !== undefined) {
    if (!kc.getContexts().some((c) => c.name === context)) {
      throw new CommandError(`--context: the kubeconfig (${source}) has no context '${context}'`);
    }
    kc.setCurrentContext(context);
  }
  checkCurrentCluster(kc, source);
  return kc;
}
