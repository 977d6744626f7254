// What `kubectl dpo status` and `kubectl dpo describe node` print, from the objects the API server holds:
// each DevicePluginConfig's status, the plugins' DeviceNodeStates and the Nodes. Pure, so every line can
// be pinned by a table of objects.
import type { V1Node } from "@kubernetes/client-node";
import type { DeviceNodeState, ReportedDevice } from "../api/v1beta1/devicenodestate.js";
import type { DevicePluginConfigStatus } from "../api/v1beta1/status.js";
import { nodeKeys } from "../contract/node-upgrade.js";

/** A DevicePluginConfig as the status views read it. */
export interface ConfigObject {
  metadata: { name: string; generation?: number };
  spec?: { resourceName?: string; upgrade?: { paused?: boolean } };
  status?: DevicePluginConfigStatus;
}

/** Columns padded to their widest cell, two spaces apart, as kubectl prints a table. */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return [line(header), ...rows.map(line)].join("\n") + "\n";
}

function readyOf(node: V1Node | undefined): string | undefined {
  return node?.status?.conditions?.find((c) => c.type === "Ready")?.status;
}

/** Whether the node carries the config's Replace taint: a rollout is replacing its plugin. */
export function isFenced(node: V1Node | undefined, configName: string): boolean {
  const key = nodeKeys(configName).replace;
  return (node?.spec?.taints ?? []).some((t) => t.key === key);
}

/** How many of the devices each publish path holds since a switch of spec.publish: `DRA:2`, or `-`. */
function heldByText(devices: readonly ReportedDevice[]): string {
  const counts = new Map<string, number>();
  for (const d of devices) if (d.heldBy !== undefined) counts.set(d.heldBy, (counts.get(d.heldBy) ?? 0) + 1);
  return counts.size === 0 ? "-" : [...counts].map(([path, n]) => `${path}:${n}`).join(",");
}

/**
 * Why a config's plugin on a node is not simply serving, most pressing first: the node itself, the
 * rollout, what the operator lists as the node's problem, the plugin's registration, its devices. "" when
 * nothing holds it.
 */
export function nodeWaitReason(
  config: ConfigObject,
  nodeName: string,
  node: V1Node | undefined,
  reports: readonly DeviceNodeState[],
): string {
  const status = config.status;
  if (node === undefined) return "the Node object is gone";
  const ready = readyOf(node);
  if (ready !== undefined && ready !== "True") return `the node is not Ready (${ready})`;
  const upgrade = status?.upgrade;
  if (upgrade?.failed?.includes(nodeName))
    return `the rollout failed here: ${upgrade.message ?? upgrade.phase}`;
  if (isFenced(node, config.metadata.name)) return "fenced: the rollout is replacing the plugin";
  if (upgrade?.inFlight?.includes(nodeName)) {
    return `the rollout is moving it to revision ${upgrade.updateRevision}`;
  }
  const problem = status?.problems?.find((p) => p.node === nodeName);
  if (problem !== undefined) {
    const devices = problem.devices?.length ? ` [${problem.devices.join(", ")}]` : "";
    return `${problem.reason}${problem.message ? `: ${problem.message}` : ""}${devices}`;
  }
  const statuses = reports.flatMap((r) => (r.status === undefined ? [] : [r.status]));
  if (statuses.length === 0) return "no report from the plugin yet";
  const reg = (statuses.find((s) => s.registration.state === "Registered") ?? statuses[0]!).registration;
  if (reg.state === "StandingBy") return "standing by until the plugin it replaces stops";
  if (reg.state !== "Registered") return `not registered${reg.lastError ? `: ${reg.lastError}` : ""}`;
  if (node.spec?.unschedulable === true) return "cordoned: serves, but no new pod lands here";
  return "";
}

function revisionText(status: DevicePluginConfigStatus | undefined): string {
  const upgrade = status?.upgrade;
  if (upgrade === undefined) return "";
  if (upgrade.currentRevision === upgrade.updateRevision || upgrade.phase === "Complete") {
    return `revision ${upgrade.updateRevision}`;
  }
  const arrow = upgrade.phase === "RollingBack" || upgrade.phase === "RolledBack" ? "back from" : "from";
  return `revision ${upgrade.updateRevision} (${upgrade.phase} ${arrow} ${upgrade.currentRevision}: ${upgrade.summary})`;
}

function configHeadline(config: ConfigObject): string {
  const status = config.status;
  const ready = status?.conditions?.find((c) => c.type === "Ready");
  const stalled = status?.conditions?.find((c) => c.type === "Stalled" && c.status === "True");
  const parts = [
    `config ${config.metadata.name}`,
    config.spec?.resourceName ?? "",
    revisionText(status),
    ready ? `Ready=${ready.status}${ready.status === "True" ? "" : ` (${ready.reason})`}` : "no status yet",
    stalled ? `Stalled (${stalled.reason}): ${stalled.message}` : "",
    config.spec?.upgrade?.paused === true ? "rollout paused" : "",
  ];
  const nodes = status?.nodes;
  const devices = status?.devices;
  const totals = [
    nodes ? `nodes ${nodes.available ?? nodes.ready}/${nodes.desired} serving, ${nodes.updated} updated` : "",
    devices
      ? `devices ${devices.allocatable}/${devices.capacity} allocatable, ${devices.unhealthy} unhealthy${devices.allocated === undefined ? "" : `, ${devices.allocated} allocated`}`
      : "",
  ].filter(Boolean);
  return `${parts.filter(Boolean).join("  ")}\n${totals.length ? `  ${totals.join("; ")}\n` : ""}`;
}

/** The nodes a config's rows cover: those its plugins report from, those its status names. */
function nodesOfConfig(config: ConfigObject, reports: readonly DeviceNodeState[]): string[] {
  const names = new Set(reports.map((r) => r.spec.nodeName));
  for (const p of config.status?.problems ?? []) names.add(p.node);
  for (const n of config.status?.upgrade?.inFlight ?? []) names.add(n);
  for (const n of config.status?.upgrade?.failed ?? []) names.add(n);
  return [...names].sort();
}

/**
 * `kubectl dpo status`: per config its headline (resource, revision and rollout, Ready, the totals), then a
 * row per node and plugin revision: the revision, the registration, devices healthy/advertised, allocated,
 * held by a publish path, and why the node waits.
 */
export function formatStatus(
  configs: readonly ConfigObject[],
  reports: readonly DeviceNodeState[],
  nodes: readonly V1Node[],
): string {
  if (configs.length === 0) return "No DevicePluginConfigs found.\n";
  const byName = new Map(nodes.map((n) => [n.metadata?.name ?? "", n]));
  const blocks = [...configs]
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))
    .map((config) => {
      const own = reports.filter((r) => r.spec.configName === config.metadata.name);
      const rows: string[][] = [];
      for (const nodeName of nodesOfConfig(config, own)) {
        const onNode = own
          .filter((r) => r.spec.nodeName === nodeName)
          .sort((a, b) => (a.spec.revision ?? "").localeCompare(b.spec.revision ?? ""));
        const why = nodeWaitReason(config, nodeName, byName.get(nodeName), onNode) || "-";
        if (onNode.length === 0) {
          rows.push([nodeName, "-", "-", "-", "-", "-", why]);
          continue;
        }
        for (const report of onNode) {
          const s = report.status;
          rows.push([
            nodeName,
            report.spec.revision ?? "-",
            s?.registration.state ?? "-",
            s ? `${s.healthy}/${s.advertised}` : "-",
            s?.allocated === undefined ? "-" : String(s.allocated),
            s ? heldByText(s.devices) : "-",
            why,
          ]);
        }
      }
      const table =
        rows.length === 0
          ? "  no node reports yet\n"
          : formatTable(
              ["NODE", "REVISION", "REGISTRATION", "HEALTHY/ADVERTISED", "ALLOCATED", "HELD BY", "WAITING"],
              rows,
            )
              .split("\n")
              .map((l) => (l === "" ? l : `  ${l}`))
              .join("\n");
      return configHeadline(config) + table;
    });
  return blocks.join("\n");
}

/** `kubectl dpo describe node`: the node, then every config's state there, each device with health and reason. */
export function formatNodeDescription(
  nodeName: string,
  node: V1Node | undefined,
  configs: readonly ConfigObject[],
  reports: readonly DeviceNodeState[],
): string {
  const lines: string[] = [`Node: ${nodeName}`];
  if (node === undefined) {
    lines.push("  the Node object does not exist");
  } else {
    lines.push(
      `  Ready: ${readyOf(node) ?? "Unknown"}${node.spec?.unschedulable === true ? ", cordoned" : ""}`,
    );
    const taints = (node.spec?.taints ?? []).map(
      (t) => `${t.key}${t.value ? `=${t.value}` : ""}:${t.effect}`,
    );
    lines.push(`  Taints: ${taints.length ? taints.join(", ") : "<none>"}`);
  }
  const onNode = reports.filter((r) => r.spec.nodeName === nodeName);
  const relevant = [...configs]
    .filter(
      (c) =>
        onNode.some((r) => r.spec.configName === c.metadata.name) || nodesOfConfig(c, []).includes(nodeName),
    )
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  if (relevant.length === 0) {
    lines.push("", "No DevicePluginConfig runs a plugin on this node.");
    return lines.join("\n") + "\n";
  }
  for (const config of relevant) {
    const own = onNode
      .filter((r) => r.spec.configName === config.metadata.name)
      .sort((a, b) => (a.spec.revision ?? "").localeCompare(b.spec.revision ?? ""));
    lines.push("", `Config: ${config.metadata.name} (${config.spec?.resourceName ?? "no resource name"})`);
    const why = nodeWaitReason(config, nodeName, node, own);
    lines.push(`  Waiting: ${why === "" ? "no, serving" : why}`);
    for (const report of own) {
      const s = report.status;
      lines.push(`  Plugin revision ${report.spec.revision ?? "-"} (report ${report.metadata.name}):`);
      if (s === undefined) {
        lines.push("    no status written yet");
        continue;
      }
      const reg = s.registration;
      lines.push(
        `    Registration: ${reg.state} since ${reg.since}${reg.lastError ? ` (last error: ${reg.lastError})` : ""}`,
      );
      lines.push(
        `    Plugin: ${s.pluginVersion}, kubelet API ${s.kubeletAPIVersion}, reported ${s.updateTime}`,
      );
      lines.push(
        `    Devices: ${s.healthy}/${s.advertised} healthy/advertised${s.allocated === undefined ? "" : `, ${s.allocated} allocated`}`,
      );
      if (s.devices.length > 0) {
        const table = formatTable(
          ["DEVICE", "HEALTH", "REPLICAS", "HELD BY", "SINCE", "REASON"],
          s.devices.map((d) => [
            d.id,
            d.health,
            String(d.replicas),
            d.heldBy ?? "-",
            d.since,
            d.reason ?? (d.health === "Healthy" ? "-" : "no reason given"),
          ]),
        );
        lines.push(
          ...table
            .trimEnd()
            .split("\n")
            .map((l) => `    ${l}`),
        );
      }
    }
  }
  return lines.join("\n") + "\n";
}
