// The incumbent DaemonSets takeovers readied (ADR 0012), listed in every namespace when a leader starts its
// term: a config deleted while no operator led, before its takeover moved a node, left nothing else (no
// mark on a Node, its own objects collected), and only this list finds it again (rediscovery.ts), so that
// its reconcile gives the incumbent its own fields back. Not an informer: reading DaemonSets in every
// namespace is the takeover's opt-in right, and a deleted config's incumbent needs finding once a term.
import type { V1DaemonSet } from "@kubernetes/client-node";
import { DAEMON_SETS, isForbidden, type ObjectClient } from "../../../kube/index.js";
import { LABEL_TAKEOVER } from "../../model/takeover.js";

/**
 * Every DaemonSet carrying a takeover's label, or none where the operator may not list DaemonSets in every
 * namespace (no takeover can have readied one then). Other errors are thrown, for the caller to retry.
 */
export async function listReadiedIncumbents(objects: ObjectClient): Promise<V1DaemonSet[]> {
  if (objects.list === undefined) return [];
  try {
    return await objects.list<V1DaemonSet>(DAEMON_SETS, undefined, { labelSelector: LABEL_TAKEOVER });
  } catch (err) {
    if (isForbidden(err)) return [];
    throw err;
  }
}
