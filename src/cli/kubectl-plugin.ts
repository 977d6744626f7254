// The commands `kubectl dpo` adds to kubectl (the same program as `dpo`, installed as kubectl-dpo): status,
// rollout status|pause|resume|undo, describe node and completion. Each finds the cluster as kubectl does
// (--kubeconfig, --context, -n) and reads the API server only; what they print is decided in
// status-view.ts and rollout-view.ts.
import type { KubeConfig, V1Node } from "@kubernetes/client-node";
import { parseArgs } from "node:util";
import type { DeviceNodeState } from "../api/v1beta1/devicenodestate.js";
import {
  listAll,
  kubeRequest,
  NotFoundError,
  runWatch,
  heartbeatAwareWatch,
  systemClock,
} from "../kube/index.js";
import { clusterFlagsOf, completeWords, completionScript, formatCompletion } from "./completion.js";
import { argsError, CommandError, UsageError } from "./flags.js";
import { loadKubeConfig } from "./kubeconfig.js";
import {
  formatDuration,
  formatProgressLine,
  formatProgressPlain,
  parseDuration,
  RolloutPace,
  rolloutProgress,
  rolloutVerdict,
  type ConfigView,
} from "./rollout-view.js";
import { formatNodeDescription, formatStatus, isFenced, type ConfigObject } from "./status-view.js";

const CONFIGS_PATH = "/apis/dpo.dev/v1beta1/devicepluginconfigs";

const CLUSTER_FLAGS = `  --kubeconfig FILE   the kubeconfig (default: $KUBECONFIG, then ~/.kube/config)
  --context NAME      the kubeconfig context to use (default: its current-context)
  -n, --namespace NS  where the plugins' DeviceNodeStates are (default: every namespace)`;

export const STATUS_USAGE = `Usage: kubectl dpo status [CONFIG] [flags]

Per config (every one, or CONFIG) and per node: the plugin revision, its registration, devices
healthy/advertised, allocated and held by a publish path, and why a node waits.

Flags:
${CLUSTER_FLAGS}
`;

export const ROLLOUT_USAGE = `Usage: kubectl dpo rollout status CONFIG [--timeout DURATION] [--watch=false] [flags]
       kubectl dpo rollout pause|resume|undo CONFIG [flags]

status  waits until the config's plugin has rolled out to every node (exit 0), or fails or is rolled back
        (exit 1); --timeout 5m gives up after that long (exit 1; 0, the default, waits forever);
        --watch=false prints where it stands once. On a terminal a live progress line, plain lines otherwise.
pause   sets spec.upgrade.paused: no node starts the new revision; nodes in flight finish.
resume  clears spec.upgrade.paused.
undo    refuses: the operator does not record a config's previous spec (see docs/cli.md).

Flags:
${CLUSTER_FLAGS}
`;

export const DESCRIBE_USAGE = `Usage: kubectl dpo describe node NODE [flags]

Every config's state on the node: the plugin revision and its registration, and each device with its
health and reason.

Flags:
${CLUSTER_FLAGS}
`;

export const COMPLETION_USAGE = `Usage: kubectl dpo completion bash|zsh

Prints a completion script: source <(kubectl dpo completion bash), or for zsh
source <(kubectl dpo completion zsh). It completes kubectl-dpo and dpo, and, through kubectl's plugin
completion, 'kubectl dpo' once kubectl_complete-dpo is on the PATH (docs/cli.md).
`;

interface ClusterArgs {
  kc: KubeConfig;
  namespace: string | undefined;
  positionals: string[];
  values: Record<string, string | boolean | undefined>;
}

/** Parses the cluster flags and the command's own; --help prints `usage` and yields undefined. */
function parseClusterArgs(
  argv: readonly string[],
  usage: string,
  extra: Record<string, { type: "string" | "boolean" }>,
  out: NodeJS.WritableStream,
  env: Readonly<Record<string, string | undefined>>,
): (Omit<ClusterArgs, "kc"> & { connect: () => KubeConfig }) | undefined {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: {
        kubeconfig: { type: "string" },
        context: { type: "string" },
        namespace: { type: "string", short: "n" },
        help: { type: "boolean", short: "h" },
        ...extra,
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw argsError(err, usage);
  }
  if (parsed.values.help === true) {
    out.write(usage);
    return undefined;
  }
  const { kubeconfig, context, namespace } = parsed.values as Record<string, string | undefined>;
  return {
    namespace,
    positionals: parsed.positionals,
    values: parsed.values,
    connect: () => loadKubeConfig(kubeconfig, env, undefined, context),
  };
}

/** A kubectl-like error for an API answer: `devicepluginconfigs.dpo.dev "x" not found`. */
function apiFailure(err: unknown, what: string): CommandError {
  if (err instanceof NotFoundError) return new CommandError(`${what} not found`);
  return new CommandError(`${what}: ${(err as Error).message.split("\n")[0]}`);
}

async function getConfig(
  kc: KubeConfig,
  name: string,
): Promise<ConfigObject & ConfigView & { metadata: { resourceVersion?: string } }> {
  try {
    return await kubeRequest(kc, { method: "GET", path: `${CONFIGS_PATH}/${encodeURIComponent(name)}` });
  } catch (err) {
    throw apiFailure(err, `devicepluginconfigs.dpo.dev "${name}"`);
  }
}

async function listReports(kc: KubeConfig, namespace: string | undefined): Promise<DeviceNodeState[]> {
  const path =
    namespace === undefined
      ? "/apis/dpo.dev/v1beta1/devicenodestates"
      : `/apis/dpo.dev/v1beta1/namespaces/${encodeURIComponent(namespace)}/devicenodestates`;
  try {
    return (await listAll<DeviceNodeState & { metadata: { name: string } }>(kc, path, {})).items;
  } catch (err) {
    throw apiFailure(err, "listing devicenodestates.dpo.dev");
  }
}

async function listNodes(kc: KubeConfig): Promise<V1Node[]> {
  try {
    return (await listAll<V1Node>(kc, "/api/v1/nodes", {})).items;
  } catch (err) {
    throw apiFailure(err, "listing nodes");
  }
}

/** `kubectl dpo status [CONFIG]`. */
export async function runStatusCommand(
  argv: readonly string[],
  out: NodeJS.WritableStream = process.stdout,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<number> {
  const args = parseClusterArgs(argv, STATUS_USAGE, {}, out, env);
  if (args === undefined) return 0;
  if (args.positionals.length > 1) {
    throw new UsageError(`status takes at most one config, got: ${args.positionals.join(" ")}`, STATUS_USAGE);
  }
  const kc = args.connect();
  const [name] = args.positionals;
  let configs: ConfigObject[];
  if (name === undefined) {
    try {
      configs = (await listAll<ConfigObject & { metadata: { name: string } }>(kc, CONFIGS_PATH, {})).items;
    } catch (err) {
      throw apiFailure(err, "listing devicepluginconfigs.dpo.dev");
    }
  } else {
    configs = [await getConfig(kc, name)];
  }
  const [reports, nodes] = await Promise.all([listReports(kc, args.namespace), listNodes(kc)]);
  out.write(formatStatus(configs, reports, nodes));
  return 0;
}

/** `kubectl dpo describe node NODE`. */
export async function runDescribeCommand(
  argv: readonly string[],
  out: NodeJS.WritableStream = process.stdout,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<number> {
  const args = parseClusterArgs(argv, DESCRIBE_USAGE, {}, out, env);
  if (args === undefined) return 0;
  const [kind, nodeName, ...extra] = args.positionals;
  if (kind !== "node" && kind !== "nodes" && kind !== "no") {
    throw new UsageError(
      `describe takes 'node NODE', got: ${args.positionals.join(" ") || "nothing"}`,
      DESCRIBE_USAGE,
    );
  }
  if (nodeName === undefined || extra.length > 0) {
    throw new UsageError("describe node takes exactly one NODE", DESCRIBE_USAGE);
  }
  const kc = args.connect();
  let node: V1Node | undefined;
  try {
    node = await kubeRequest<V1Node>(kc, {
      method: "GET",
      path: `/api/v1/nodes/${encodeURIComponent(nodeName)}`,
    });
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw apiFailure(err, `nodes "${nodeName}"`);
  }
  let configs: ConfigObject[];
  try {
    configs = (await listAll<ConfigObject & { metadata: { name: string } }>(kc, CONFIGS_PATH, {})).items;
  } catch (err) {
    throw apiFailure(err, "listing devicepluginconfigs.dpo.dev");
  }
  const reports = await listReports(kc, args.namespace);
  if (node === undefined && !reports.some((r) => r.spec.nodeName === nodeName)) {
    throw new CommandError(`nodes "${nodeName}" not found`);
  }
  out.write(formatNodeDescription(nodeName, node, configs, reports));
  return 0;
}

/** `kubectl dpo completion bash|zsh`. */
export function runCompletionCommand(
  argv: readonly string[],
  out: NodeJS.WritableStream = process.stdout,
): number {
  if (argv.includes("--help") || argv.includes("-h")) {
    out.write(COMPLETION_USAGE);
    return 0;
  }
  const [shell, ...extra] = argv;
  if ((shell !== "bash" && shell !== "zsh") || extra.length > 0) {
    throw new UsageError(
      `completion takes bash or zsh, got: ${argv.join(" ") || "nothing"}`,
      COMPLETION_USAGE,
    );
  }
  out.write(completionScript(shell));
  return 0;
}

/**
 * `kubectl-dpo __complete WORDS...` (and kubectl_complete-dpo): the candidates for the last word, with the
 * cluster's config or node names where one goes. A cluster that cannot be reached within two seconds
 * offers no names; completion never prints an error.
 */
export async function runCompleteCommand(
  words: readonly string[],
  out: NodeJS.WritableStream = process.stdout,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<number> {
  const completion = completeWords(words.length === 0 ? [""] : words);
  const names: string[] = [];
  if (completion.names !== undefined) {
    const current = words.at(-1) ?? "";
    try {
      const { kubeconfig, context } = clusterFlagsOf(words);
      const kc = loadKubeConfig(kubeconfig, env, undefined, context);
      const path = completion.names === "config" ? CONFIGS_PATH : "/api/v1/nodes";
      const list = await kubeRequest<{ items?: { metadata?: { name?: string } }[] }>(kc, {
        method: "GET",
        path,
        signal: AbortSignal.timeout(2000),
      });
      for (const item of list.items ?? []) {
        const name = item.metadata?.name;
        if (name !== undefined && name.startsWith(current)) names.push(name);
      }
    } catch {
      // No cluster, no names: the shell offers what it has.
    }
  }
  out.write(formatCompletion([...completion.candidates, ...names.sort()]));
  return 0;
}

/** What undo says instead of guessing a spec: nothing in the cluster keeps the one before. */
export function undoRefusal(name: string): string {
  return (
    `rollout undo ${name}: the operator does not record a config's previous spec (only the previous plugin ` +
    `revision, whose DaemonSet it removes once the rollout completes), so there is nothing to set the spec back to. ` +
    `Revert the change where the spec comes from: with GitOps, revert the commit (git revert) and let Argo CD or Flux ` +
    `sync it; otherwise kubectl apply the previous manifest. While nodes are still moving, ` +
    `'kubectl dpo rollout pause ${name}' stops new ones from starting; with spec.upgrade.autoRollback the operator ` +
    `already returns every node to the previous revision when the new one fails.`
  );
}

async function patchPaused(
  kc: KubeConfig,
  name: string,
  paused: boolean,
  out: NodeJS.WritableStream,
): Promise<number> {
  const config = await getConfig(kc, name);
  const was = config.spec?.upgrade?.paused === true;
  if (was === paused) {
    out.write(`devicepluginconfig.dpo.dev/${name} already ${paused ? "paused" : "resumed"}\n`);
    return 0;
  }
  try {
    await kubeRequest(kc, {
      method: "PATCH",
      path: `${CONFIGS_PATH}/${encodeURIComponent(name)}`,
      contentType: "application/merge-patch+json",
      // The resourceVersion makes the patch conditional: a config changed since it was read is refused
      // (409) rather than overwritten, as kubectl's own read-modify-write commands do.
      body: {
        metadata: { resourceVersion: config.metadata.resourceVersion },
        spec: { upgrade: { paused } },
      },
    });
  } catch (err) {
    throw apiFailure(err, `patching devicepluginconfigs.dpo.dev "${name}"`);
  }
  out.write(`devicepluginconfig.dpo.dev/${name} ${paused ? "paused" : "resumed"}\n`);
  return 0;
}

/** What `rollout status` writes to: the stream, whether it is a terminal, and how wide. */
export interface RolloutOutput {
  stream: NodeJS.WritableStream;
  isTTY: boolean;
  columns: () => number;
}

/** `kubectl dpo rollout status|pause|resume|undo CONFIG`. */
export async function runRolloutCommand(
  argv: readonly string[],
  out: NodeJS.WritableStream = process.stdout,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<number> {
  // kubectl spells it --watch=false; a bare --watch is the default spelled out.
  const normalized = argv.map((a) => (a === "--watch" || a === "-w" ? "--watch=true" : a));
  const args = parseClusterArgs(
    normalized,
    ROLLOUT_USAGE,
    { timeout: { type: "string" }, watch: { type: "string" } },
    out,
    env,
  );
  if (args === undefined) return 0;
  const [action, name, ...extra] = args.positionals;
  if (action === undefined || !["status", "pause", "resume", "undo"].includes(action)) {
    throw new UsageError(
      `rollout takes status, pause, resume or undo, got: ${action ?? "nothing"}`,
      ROLLOUT_USAGE,
    );
  }
  if (name === undefined || extra.length > 0) {
    throw new UsageError(`rollout ${action} takes exactly one CONFIG`, ROLLOUT_USAGE);
  }
  const watchText = (args.values["watch"] as string | undefined) ?? "true";
  if (watchText !== "true" && watchText !== "false") {
    throw new UsageError(`--watch must be true or false, got '${watchText}'`, ROLLOUT_USAGE);
  }
  let timeoutMs: number;
  try {
    timeoutMs = parseDuration("timeout", (args.values["timeout"] as string | undefined) ?? "0");
  } catch (err) {
    throw new UsageError((err as Error).message, ROLLOUT_USAGE);
  }
  if (action === "undo") throw new CommandError(undoRefusal(name));
  const kc = args.connect();
  if (action === "pause" || action === "resume") return patchPaused(kc, name, action === "pause", out);
  const stdout = out as NodeJS.WriteStream;
  return followRollout(kc, name, {
    watch: watchText === "true",
    timeoutMs,
    output: {
      stream: out,
      isTTY: stdout.isTTY === true,
      columns: () => (typeof stdout.columns === "number" && stdout.columns > 0 ? stdout.columns : 80),
    },
  });
}

/**
 * Follows the config with a watch until the verdict is in or the deadline passes. The Nodes are read
 * again only when the rollout's counts change, to count the fenced ones.
 */
export async function followRollout(
  kc: KubeConfig,
  name: string,
  options: { watch: boolean; timeoutMs: number; output: RolloutOutput },
): Promise<number> {
  const { output } = options;
  const startedAt = systemClock.now();
  const deadline = options.timeoutMs > 0 ? startedAt + options.timeoutMs : undefined;
  const pace = new RolloutPace();
  let config = await getConfig(kc, name);
  let fenced = 0;
  let countsKey = "";
  let lastPlain = "";
  let liveShown = false;

  const countFenced = async (): Promise<void> => {
    const upgrade = config.status?.upgrade;
    const key = `${upgrade?.updated}/${upgrade?.total}/${(upgrade?.inFlight ?? []).join(",")}/${upgrade?.phase}`;
    if (key === countsKey) return;
    countsKey = key;
    if ((upgrade?.inFlight?.length ?? 0) === 0 && (upgrade?.inFlightOmitted ?? 0) === 0) {
      fenced = 0;
      return;
    }
    fenced = (await listNodes(kc)).filter((n) => isFenced(n, name)).length;
  };
  const draw = (): void => {
    const progress = rolloutProgress(config, fenced);
    if (output.isTTY) {
      const now = systemClock.now();
      const line = formatProgressLine(
        name,
        progress,
        pace.remainingMs(progress.total),
        deadline === undefined ? undefined : deadline - now,
        output.columns(),
      );
      output.stream.write(`\r\x1b[2K${line}`);
      liveShown = true;
    } else {
      const line = formatProgressPlain(name, progress);
      if (line !== lastPlain) output.stream.write(`${line}\n`);
      lastPlain = line;
    }
  };
  const endLive = (): void => {
    if (liveShown) output.stream.write("\n");
    liveShown = false;
  };
  /** Draws the config's state; the exit code once it is over (0: rolled out; a failure throws). */
  const show = async (): Promise<number | undefined> => {
    const verdict = rolloutVerdict(config);
    await countFenced();
    pace.observe(systemClock.now(), rolloutProgress(config, fenced).updated);
    if (verdict.done) {
      if (output.isTTY) draw();
      endLive();
      // A failed rollout is the command's error, as kubectl's: one `dpo: ` line on standard error, exit 1.
      if (verdict.exitCode !== 0) throw new CommandError(verdict.message, verdict.exitCode);
      output.stream.write(`${verdict.message}\n`);
      return verdict.exitCode;
    }
    if (!options.watch) {
      output.stream.write(`${verdict.message}\n`);
      return 0;
    }
    draw();
    return undefined;
  };

  const first = await show();
  if (first !== undefined) return first;

  return new Promise<number>((resolve, reject) => {
    let finished = false;
    let stopWatch: (() => void) | undefined;
    const timers: NodeJS.Timeout[] = [];
    const finish = (result: number | Error): void => {
      if (finished) return;
      finished = true;
      for (const t of timers) clearTimeout(t);
      stopWatch?.();
      if (result instanceof Error) {
        endLive();
        reject(result);
      } else resolve(result);
    };
    if (deadline !== undefined) {
      timers.push(
        setTimeout(() => {
          const progress = rolloutProgress(config, fenced);
          finish(
            new CommandError(
              `timed out waiting for config "${name}" to roll out after ${formatDuration(options.timeoutMs)}: ${progress.updated} of ${progress.total} nodes updated (${progress.phase})`,
            ),
          );
        }, deadline - systemClock.now()),
      );
    }
    // The countdown of the live line; drawing only, nothing waits on it.
    if (output.isTTY) {
      const tick = setInterval(() => {
        if (!finished) draw();
      }, 1000);
      tick.unref();
      timers.push(tick);
    }
    // One event at a time: a verdict is drawn from the newest object, in order.
    let chain = Promise.resolve();
    const onObject = (object: unknown): void => {
      chain = chain
        .then(async () => {
          if (finished) return;
          config = object as typeof config;
          const code = await show();
          if (code !== undefined) finish(code);
        })
        .catch((err: unknown) => finish(err instanceof Error ? err : new Error(String(err))));
    };
    const watchOnce = (resourceVersion: string | undefined): void => {
      if (finished) return;
      const running = runWatch({
        watch: heartbeatAwareWatch(kc),
        path: CONFIGS_PATH,
        query: {
          fieldSelector: `metadata.name=${name}`,
          resourceVersion,
          allowWatchBookmarks: true,
          timeoutSeconds: 300,
        },
        clock: systemClock,
        onEvent: (type, object) => {
          if (type === "BOOKMARK") {
            resourceVersion = (object as { metadata?: { resourceVersion?: string } }).metadata
              ?.resourceVersion;
            return;
          }
          resourceVersion = (object as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion;
          if (type === "DELETED") {
            finish(
              new CommandError(
                `devicepluginconfigs.dpo.dev "${name}" was deleted while its rollout was followed`,
              ),
            );
            return;
          }
          onObject(object);
        },
        onStarted: () => undefined,
      });
      stopWatch = () => running.end("stopped");
      running.outcome.then(
        (outcome) => {
          if (finished || outcome === "stopped") return;
          // Closed by the server: watch on from where it left off; expired: read the config again first.
          if (outcome === "closed") {
            watchOnce(resourceVersion);
            return;
          }
          getConfig(kc, name).then((fresh) => {
            onObject(fresh);
            watchOnce(fresh.metadata.resourceVersion);
          }, finish);
        },
        (err: unknown) => finish(apiFailure(err, `watching devicepluginconfigs.dpo.dev "${name}"`)),
      );
    };
    watchOnce(config.metadata.resourceVersion);
  });
}
