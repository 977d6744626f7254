// Reads the table `kubectl get` prints. kubectl aligns its columns with a tab writer: every cell starts
// at the offset of its header, and an empty cell (a printer column whose JSONPath finds nothing yet,
// such as a status field before the operator's first write) is only blanks. Splitting a row on runs of
// spaces would shift every later cell one column left; cutting it at the header's offsets does not.

/** One row per line after the header, keyed by column name; an empty cell is "". */
export function kubectlTable(stdout: string): Record<string, string>[] {
  const lines = stdout.split("\n").filter((l) => l.trim() !== "");
  const header = lines[0];
  if (header === undefined) return [];
  // A header name never holds two spaces in a row (kubectl's own, like NOMINATED NODE, hold one).
  const columns = [...header.matchAll(/\S+(?: \S+)*/g)].map((m) => ({ name: m[0], start: m.index }));
  return lines.slice(1).map((line) =>
    Object.fromEntries(
      columns.map(({ name, start }, i) => {
        const end = columns[i + 1]?.start ?? line.length;
        return [name, line.slice(start, end).trim()];
      }),
    ),
  );
}
