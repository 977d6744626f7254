// `dpo probe`: what a config's backend discovers on this machine (devices, attributes, health, problems),
// so a node can be checked before a plugin is rolled out to it. Touches no kubelet socket.
import type { DevicePluginConfig } from "../api/v1beta1/config.js";
import { pino } from "pino";
import { parseManifestDocuments } from "../api/validate.js";
import { readPluginConfig } from "../contract/plugin-config-read.js";
import { createBackend } from "../plugin-runtime/backends/index.js";
import type { PhysicalDevice } from "../plugin-runtime/devices/types.js";
import { formatFlagHelp, resolveFlags, UsageError, type FlagSpec } from "./flags.js";
import { describeReadError, readSource, sourceName, type ReadSource } from "./sources.js";
import { documentIdentity, verdictLabel } from "./validate.js";

export const PROBE_FLAGS: readonly FlagSpec[] = [
  {
    name: "config",
    env: "DPO_CONFIG",
    description: "DevicePluginConfig manifest whose backend to probe; '-' reads standard input.",
  },
  {
    name: "output",
    short: "o",
    env: "DPO_PROBE_OUTPUT",
    description: "text or json.",
    default: "text",
    choices: ["text", "json"],
  },
];

export interface ProbeReport {
  config: string;
  backend: string;
  devices: readonly PhysicalDevice[];
  problems: readonly string[];
}

/** Exit status: 0 when devices were found and all are healthy, 1 otherwise. Pure. */
export function probeExitCode(report: ProbeReport): number {
  return report.devices.length > 0 && report.devices.every((d) => d.health === "Healthy") ? 0 : 1;
}

/** The report as a table, one device per line, then its attributes and the problems. Pure. */
export function formatProbeReport(report: ProbeReport): string {
  const lines = [`config ${report.config}: backend ${report.backend}, ${report.devices.length} device(s)`];
  const rows = report.devices.map((d) => [
    d.id,
    d.health,
    d.reason === "" ? "-" : d.reason,
    d.numaNode === undefined ? "-" : String(d.numaNode),
  ]);
  const header = ["DEVICE", "HEALTH", "REASON", "NUMA"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const format = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  if (rows.length > 0) lines.push(format(header), ...rows.map(format));
  for (const d of report.devices) {
    const attributes = Object.entries(d.attributes)
      .map(([k, v]) => `${k}=${v}`)
      .join(" ");
    if (attributes !== "") lines.push(`  ${d.id}: ${attributes}`);
  }
  if (report.problems.length > 0) lines.push("problems:", ...report.problems.map((p) => `  ${p}`));
  if (report.devices.length === 0) lines.push("no devices found");
  return `${lines.join("\n")}\n`;
}

/** Starts the backend, takes its first device list and stops it. */
export async function probeBackend(config: DevicePluginConfig): Promise<ProbeReport> {
  // Backend warnings go to stderr beside the report; the report itself says the same in `problems`.
  const logger = pino(
    { level: "error", base: { component: "probe", config: config.metadata.name } },
    pino.destination(2),
  );
  const backend = createBackend(config.spec, {
    logger,
    resourceName: config.spec.resourceName,
    cdi: { enabled: false },
  });
  try {
    const devices = await backend.start();
    return {
      config: config.metadata.name,
      backend: backend.type,
      devices,
      problems: backend.diagnostics?.() ?? [],
    };
  } finally {
    await backend.stop();
  }
}

export async function runProbeCommand(
  argv: readonly string[],
  read: ReadSource = readSource,
): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(
      `Usage: dpo probe --config FILE|- [-o text|json]\n\nPrints what the config's backend discovers on this machine (devices, attributes,\nhealth and problems) without registering with the kubelet. Exit status: 0 devices found\nand all healthy, 1 none found or some unhealthy, 2 usage or unreadable config.\n\nFlags:\n${formatFlagHelp(PROBE_FLAGS)}\n`,
    );
    return 0;
  }
  const { values, positionals } = resolveFlags(PROBE_FLAGS, argv, process.env);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  const path = values["config"];
  if (!path) throw new UsageError("--config (or DPO_CONFIG) is required");
  let text: string;
  try {
    text = await read(path);
  } catch (err) {
    process.stderr.write(`dpo: ${describeReadError(path, err)} (--config)\n`);
    return 2;
  }
  const loaded = readPluginConfig(text);
  if (!loaded.ok) {
    // The one document's kind and name, as far as it has them, so the line says which config is wrong.
    const docs = parseManifestDocuments(text);
    const [doc] = docs;
    const label = verdictLabel({
      file: sourceName(path),
      ...(docs.length === 1 && doc?.ok ? documentIdentity(doc.value) : {}),
    });
    process.stderr.write(
      `dpo: invalid config ${sourceName(path)}:\n${loaded.errors.map((e) => `${label}: ${e.path}: ${e.message}`).join("\n")}\n`,
    );
    return 2;
  }
  const report = await probeBackend(loaded.value);
  process.stdout.write(
    values["output"] === "json" ? `${JSON.stringify(report, null, 2)}\n` : formatProbeReport(report),
  );
  return probeExitCode(report);
}
