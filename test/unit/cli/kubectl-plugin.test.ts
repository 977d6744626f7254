// `kubectl dpo`'s command lines without a cluster: completion, the usage errors that name the flag, undo's
// refusal, and --context picking a kubeconfig context as kubectl does.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { completeWords, completionScript, formatCompletion } from "../../../src/cli/completion.js";
import { describeFailure } from "../../../src/cli/flags.js";
import { loadKubeConfig } from "../../../src/cli/kubeconfig.js";
import { runCompleteCommand, runRolloutCommand, undoRefusal } from "../../../src/cli/kubectl-plugin.js";

function sink(): { stream: NodeJS.WritableStream; text: () => string } {
  let text = "";
  return {
    stream: { write: (chunk: string) => (text += chunk) } as unknown as NodeJS.WritableStream,
    text: () => text,
  };
}

describe("completeWords", () => {
  it.each<[string[], string[], string | undefined]>([
    [[""], ["status", "rollout", "describe", "completion"], undefined],
    [["ro"], ["rollout"], undefined],
    [["rollout", ""], ["status", "pause", "resume", "undo"], undefined],
    [["rollout", "p"], ["pause"], undefined],
    [["rollout", "status", ""], [], "config"],
    [["rollout", "status", "gpu", ""], [], undefined],
    [["rollout", "status", "--t"], ["--timeout"], undefined],
    [["rollout", "status", "gpu", "--watch", ""], ["true", "false"], undefined],
    [["--context", "kind", "status", ""], [], "config"],
    [["status", "--kubeconfig", ""], [], undefined],
    [["status", ""], [], "config"],
    [["status", "--"], ["--kubeconfig", "--context", "--namespace", "--help"], undefined],
    [["describe", ""], ["node"], undefined],
    [["describe", "node", ""], [], "node"],
    [["completion", ""], ["bash", "zsh"], undefined],
    [["completion", "bash", ""], [], undefined],
  ])("after %j offers %j", (words, candidates, names) => {
    const completion = completeWords(words);
    expect(completion.candidates).toEqual(candidates);
    expect(completion.names).toBe(names);
  });

  it("answers kubectl in cobra's format: a candidate a line, then :4 (no file names)", () => {
    expect(formatCompletion(["a", "b"])).toBe("a\nb\n:4\n");
  });

  it("offers static candidates and nothing else where no cluster can be reached", async () => {
    const out = sink();
    const env = { KUBECONFIG: join(tmpdir(), "no-such-kubeconfig") };
    expect(await runCompleteCommand(["rollout", "status", ""], out.stream, env)).toBe(0);
    expect(out.text()).toBe(":4\n");
    const more = sink();
    await runCompleteCommand(["rollout", "re"], more.stream, env);
    expect(more.text()).toBe("resume\n:4\n");
  });

  it.each(["bash", "zsh"] as const)(
    "the %s script completes kubectl-dpo and dpo through __complete",
    (shell) => {
      const script = completionScript(shell);
      expect(script).toContain("complete -o default -F _dpo_complete kubectl-dpo dpo");
      expect(script).toContain('"$cmd" __complete');
      if (shell === "zsh") expect(script).toContain("bashcompinit");
    },
  );
});

async function failureOf(promise: Promise<unknown>): Promise<{ text: string; exitCode: number }> {
  try {
    await promise;
  } catch (err) {
    return describeFailure(err);
  }
  throw new Error("expected the command to fail");
}

describe("kubectl dpo rollout's command line", () => {
  it.each([
    [["status"], /rollout status takes exactly one CONFIG/],
    [["restart", "gpu"], /rollout takes status, pause, resume or undo, got: restart/],
    [["status", "gpu", "--timeout", "30"], /--timeout: '30' is not a duration/],
    [["status", "gpu", "--watch=maybe"], /--watch must be true or false, got 'maybe'/],
    [["status", "gpu", "--bogus"], /unknown flag '--bogus'/],
  ])("%j is a usage error naming what is wrong (exit 2)", async (args, message) => {
    const failure = await failureOf(runRolloutCommand(args, sink().stream, {}));
    expect(failure.exitCode).toBe(2);
    expect(failure.text).toMatch(message);
    expect(failure.text).toContain("Usage: kubectl dpo rollout");
  });

  it("undo refuses before reaching any cluster, and says what to do with GitOps (exit 1)", async () => {
    const failure = await failureOf(runRolloutCommand(["undo", "gpu"], sink().stream, {}));
    expect(failure.exitCode).toBe(1);
    expect(failure.text).toBe(`dpo: ${undoRefusal("gpu")}\n`);
    expect(failure.text).toMatch(/does not record a config's previous spec/);
    expect(failure.text).toMatch(/git revert/);
    expect(failure.text).toMatch(/kubectl dpo rollout pause gpu/);
  });

  it("--help prints the usage and succeeds", async () => {
    const out = sink();
    expect(await runRolloutCommand(["--help"], out.stream, {})).toBe(0);
    expect(out.text()).toMatch(/^Usage: kubectl dpo rollout status CONFIG/);
  });
});

describe("--context", () => {
  const dir = mkdtempSync(join(tmpdir(), "dpo-kubectl-context-"));
  const file = join(dir, "config");
  writeFileSync(
    file,
    `apiVersion: v1
kind: Config
current-context: one
clusters:
- name: one
  cluster: { server: "https://one.example:6443" }
- name: two
  cluster: { server: "https://two.example:6443" }
contexts:
- name: one
  context: { cluster: one, user: u }
- name: two
  context: { cluster: two, user: u }
users:
- name: u
  user: { token: t }
`,
  );

  it("without it, the kubeconfig's current-context", () => {
    expect(loadKubeConfig(file, {}).getCurrentCluster()?.server).toBe("https://one.example:6443");
  });

  it("picks the named context's cluster", () => {
    expect(loadKubeConfig(file, {}, undefined, "two").getCurrentCluster()?.server).toBe(
      "https://two.example:6443",
    );
  });

  it("refuses a context the kubeconfig lacks, naming the flag and the context", () => {
    expect(() => loadKubeConfig(file, {}, undefined, "three")).toThrow(
      "--context: the kubeconfig (--kubeconfig) has no context 'three'",
    );
  });
});
