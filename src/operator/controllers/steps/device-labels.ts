// Reconcile step: the labels each node a config serves gets from its plugin's report (ADR 0011), written
// with one server-side apply per node per change under the config's own field manager, and taken off
// (an apply of none) where the config no longer serves the node, has them turned off, or is gone. A node
// whose labels already say what the report does costs no write. A bounded batch per pass.
import type { V1Node } from "@kubernetes/client-node";
import type { DeviceNodeState, DeviceNodeStateStatus } from "../../../api/v1beta1/devicenodestate.js";
import type { DevicePluginConfig } from "../../../api/v1beta1/config.js";
import { configLabelValue } from "../../../contract/names.js";
import { isConflict, isNotFound } from "../../../kube/index.js";
import { labelsFromReport } from "../../node-labels/from-report.js";
import { labelApply, type LabelApply } from "../../node-labels/ownership.js";
import { chooseReport } from "../../status/node-health.js";
import {
  CLEANUP_ERROR_RETRY_MS,
  CLEANUP_RETRY_MS,
  INDEX_BY_CONFIG,
  WRITE_CONFLICT_RETRY_MS,
  soonerRetry,
  type StepDeps,
} from "../reconciler-deps.js";
import { NodeWriteExpectations } from "./node-write-expectations.js";

/** Node applies one pass sends at most. */
export const NODE_LABEL_BATCH = 100;

/** The Nodes each config's label passes wrote, until the cache shows them (see node-write-expectations.ts). */
const labelled = new NodeWriteExpectations();

/** The report to believe per node, of the config's reports that carry a status. */
function reportsByNode(deps: StepDeps, configName: string): Map<string, DeviceNodeState> {
  const byNode = new Map<string, DeviceNodeState[]>();
  for (const report of deps.reports.byIndex(INDEX_BY_CONFIG, configName)) {
    if (report.status === undefined) continue;
    byNode.set(report.spec.nodeName, [...(byNode.get(report.spec.nodeName) ?? []), report]);
  }
  const chosen = new Map<string, DeviceNodeState>();
  for (const [node, reports] of byNode) {
    const report = chooseReport(reports);
    if (report !== undefined) chosen.set(node, report);
  }
  return chosen;
}

/**
 * The labels of each report, kept beside the cached report object until the cache replaces it: a pass
 * plans every node the config serves, and at 5000 nodes the passes that write the first labels (100 Node
 * applies each) would make every node's labels again each time, 50 passes × 5000 nodes. Keyed by what
 * the labels depend on besides the report: the config's name, sharing and backend type.
 */
const labelsByReport = new WeakMap<object, { key: string; labels: Record<string, string> }>();

function reportLabels(config: DevicePluginConfig, status: DeviceNodeStateStatus): Record<string, string> {
  const key = `${config.metadata.name}\u0000${config.spec.backend.type}\u0000${JSON.stringify(config.spec.sharing)}`;
  const known = labelsByReport.get(status);
  if (known?.key === key) return known.labels;
  const labels = labelsFromReport(config, status);
  labelsByReport.set(status, { key, labels });
  return labels;
}

/**
 * Gives every node the config serves (`serves`) the labels of its report, and takes them off every other
 * node, or off all when the config turned them off. Returns when to come back, as stripNodeLabels does.
 */
export async function labelServedNodes(
  deps: StepDeps,
  config: DevicePluginConfig,
  serves: (node: V1Node) => boolean,
): Promise<number | undefined> {
  const name = config.metadata.name;
  const enabled = config.spec.nodeLabels.enabled;
  const reports = enabled ? reportsByNode(deps, name) : new Map<string, DeviceNodeState>();
  return applyLabels(deps, name, deps.nodes.list(), (node) => {
    const report = reports.get(node.metadata?.name ?? "");
    return report?.status === undefined || !serves(node) ? {} : reportLabels(config, report.status);
  });
}

/** Takes a config's labels off every node that carries them: the config is gone, or refused. */
export function unlabelConfig(deps: StepDeps, name: string): Promise<number | undefined> {
  const marked = deps.nodes.byIndex(INDEX_BY_CONFIG, configLabelValue(name));
  return applyLabels(deps, name, marked, () => ({}));
}

async function applyLabels(
  deps: StepDeps,
  configName: string,
  nodes: readonly V1Node[],
  wanted: (node: V1Node) => Record<string, string>,
): Promise<number | undefined> {
  const send = deps.nodeLabels;
  if (send === undefined) return undefined;
  const pending = labelled.pending(deps, configName);
  let waiting = 0;
  const applies: { apply: LabelApply; resourceVersion: string | undefined }[] = [];
  for (const node of nodes) {
    const apply = labelApply(node, configName, wanted(node));
    if (apply === undefined) continue;
    const resourceVersion = node.metadata?.resourceVersion;
    if (pending.get(apply.node) === resourceVersion) waiting++;
    else applies.push({ apply, resourceVersion });
  }
  let retry = applies.length > NODE_LABEL_BATCH || waiting > 0 ? CLEANUP_RETRY_MS : undefined;
  let written = 0;
  for (const { apply, resourceVersion } of applies.slice(0, NODE_LABEL_BATCH)) {
    try {
      await send(apply);
      deps.metrics.applies.inc({ kind: "Node" });
      written++;
      if (apply.yielded.length > 0)
        deps.logger.info(
          { config: configName, node: apply.node, labels: apply.yielded },
          "left node labels another labeller owns as they are",
        );
    } catch (err) {
      if (isNotFound(err)) continue;
      // A key another manager took since the cache saw the node: planned again once the cache shows it.
      if (isConflict(err)) retry = soonerRetry(retry, WRITE_CONFLICT_RETRY_MS);
      else {
        // Labels are not worth holding up the config's status: logged, and tried again later.
        deps.logger.warn(
          { config: configName, node: apply.node, err: String(err) },
          "could not write the node's device labels",
        );
        retry = soonerRetry(retry, CLEANUP_ERROR_RETRY_MS);
      }
    }
    if (resourceVersion !== undefined) labelled.expect(deps, configName, apply.node, resourceVersion);
  }
  if (written > 0)
    deps.logger.info({ config: configName, nodes: written }, "wrote the device labels of nodes");
  return retry;
}

/** Configs whose label writes the Node cache has yet to show (the state kept per config, for its bound). */
export function labelWritesPending(deps: StepDeps): number {
  return labelled.configs(deps);
}
