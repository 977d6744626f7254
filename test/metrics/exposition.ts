// Reads samples back from a Prometheus text exposition (what a /metrics endpoint serves), for tests.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function unescape(value: string): string {
  return value.replace(/\\(["\\n])/g, (_whole, c: string) => (c === "n" ? "\n" : c));
}

/** Every sample of the exposition, comments skipped. */
export function parseSamples(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$/.exec(line);
    if (!match) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const m of (match[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[m[1]!] = unescape(m[2]!);
    }
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The samples of one metric, optionally only those whose labels include `where`. */
export function samplesOf(text: string, name: string, where: Record<string, string> = {}): Sample[] {
  return parseSamples(text).filter(
    (s) => s.name === name && Object.entries(where).every(([k, v]) => s.labels[k] === v),
  );
}

/**
 * One metric's samples as `device → "namespace/pod/container=value"` (free devices: "=value"), sorted by
 * device: a compact picture of the per-device series for assertions and wait messages.
 */
export function deviceTable(text: string, name: string): Record<string, string> {
  const rows = samplesOf(text, name).map((s): [string, string] => {
    const holder = s.labels.pod ? `${s.labels.namespace}/${s.labels.pod}/${s.labels.container}` : "";
    return [s.labels.device ?? "", `${holder}=${s.value}`];
  });
  return Object.fromEntries(rows.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
