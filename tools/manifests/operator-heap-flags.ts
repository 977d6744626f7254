// The Node heap flags the operator Deployment runs with (config/manager/deployment.yaml), for tests that run
// the operator, or a part of it, under the same heap.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";

export function operatorHeapFlags(repoRoot: string): string[] {
  const text = readFileSync(join(repoRoot, "config/manager/deployment.yaml"), "utf8");
  for (const doc of parseAllDocuments(text)) {
    const deployment = doc.toJS() as {
      kind?: string;
      spec?: { template?: { spec?: { containers?: { name: string; command?: string[] }[] } } };
    };
    if (deployment.kind !== "Deployment") continue;
    const command = deployment.spec?.template?.spec?.containers?.find((c) => c.name === "manager")?.command;
    const flags = (command ?? []).filter((arg) => /^--max-(old|semi)-space-size=/.test(arg));
    if (flags.length > 0) return flags;
  }
  throw new Error("config/manager/deployment.yaml: the manager container's command has no heap flags");
}
