// Shell completion of `kubectl dpo` (and `dpo`): what may come next after the words typed so far, and the
// bash and zsh scripts that ask the program itself (`kubectl-dpo __complete WORDS...`). kubectl completes a
// plugin's arguments the same way through an executable kubectl_complete-dpo (the npm package installs it),
// which answers in cobra's format: one candidate a line, then `:4` (no file names).

/** What a completion asks the cluster for, where a config or node name goes. */
export type NameKind = "config" | "node";

export interface Completion {
  /** Candidates starting with the word being typed. */
  candidates: string[];
  /** Names to look up in the cluster and offer as well. */
  names?: NameKind;
}

const CLUSTER_FLAGS = ["--kubeconfig", "--context", "--namespace", "-n", "--help"];
const VALUE_FLAGS = new Set(["--kubeconfig", "--context", "--namespace", "-n", "--timeout", "--watch"]);

const TOP = ["status", "rollout", "describe", "completion"];
const ROLLOUT = ["status", "pause", "resume", "undo"];

/**
 * The completion of the last word of `words` (the words after the program's name; the last may be "").
 * Flags that take a value swallow the word after them, as the parser does.
 */
export function completeWords(words: readonly string[]): Completion {
  const current = words.at(-1) ?? "";
  const before = words.slice(0, -1);
  const positionals: string[] = [];
  for (let i = 0; i < before.length; i++) {
    const word = before[i]!;
    if (VALUE_FLAGS.has(word)) i++;
    else if (!word.startsWith("-")) positionals.push(word);
  }
  const previous = before.at(-1);
  if (previous !== undefined && VALUE_FLAGS.has(previous)) {
    return {
      candidates: previous === "--watch" ? ["true", "false"].filter((c) => c.startsWith(current)) : [],
    };
  }
  const pick = (all: readonly string[]): string[] => all.filter((c) => c.startsWith(current));
  const [command, sub] = positionals;
  if (current.startsWith("-")) {
    const own = command === "rollout" && sub === "status" ? ["--timeout", "--watch=false"] : [];
    return { candidates: command === "completion" ? [] : pick([...own, ...CLUSTER_FLAGS]) };
  }
  switch (command) {
    case undefined:
      return { candidates: pick(TOP) };
    case "status":
      return positionals.length === 1 ? { candidates: [], names: "config" } : { candidates: [] };
    case "rollout":
      if (sub === undefined) return { candidates: pick(ROLLOUT) };
      return positionals.length === 2 && ROLLOUT.includes(sub)
        ? { candidates: [], names: "config" }
        : { candidates: [] };
    case "describe":
      if (sub === undefined) return { candidates: pick(["node"]) };
      return positionals.length === 2 && sub === "node"
        ? { candidates: [], names: "node" }
        : { candidates: [] };
    case "completion":
      return positionals.length === 1 ? { candidates: pick(["bash", "zsh"]) } : { candidates: [] };
    default:
      return { candidates: [] };
  }
}

/** The cluster flags among the words typed, so a name lookup asks the cluster the command will. */
export function clusterFlagsOf(words: readonly string[]): { kubeconfig?: string; context?: string } {
  const found: { kubeconfig?: string; context?: string } = {};
  for (let i = 0; i < words.length - 1; i++) {
    if (words[i] === "--kubeconfig") found.kubeconfig = words[i + 1]!;
    if (words[i] === "--context") found.context = words[i + 1]!;
  }
  return found;
}

/** The cobra answer kubectl expects from kubectl_complete-dpo: a candidate a line, then `:4`. */
export function formatCompletion(candidates: readonly string[]): string {
  return [...candidates, ":4"].join("\n") + "\n";
}

const BASH = `# kubectl dpo completion bash: source <(kubectl dpo completion bash)
_dpo_complete() {
  local IFS=$'\\n'
  local cmd="\${COMP_WORDS[0]}"
  local out
  out=$("$cmd" __complete "\${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null) || return
  COMPREPLY=($(printf '%s\\n' "$out" | grep -v '^:'))
}
complete -o default -F _dpo_complete kubectl-dpo dpo
`;

const ZSH = `# kubectl dpo completion zsh: source <(kubectl dpo completion zsh)
autoload -U +X bashcompinit && bashcompinit
${BASH}`;

/** The completion script of a shell. */
export function completionScript(shell: "bash" | "zsh"): string {
  return shell === "bash" ? BASH : ZSH;
}
