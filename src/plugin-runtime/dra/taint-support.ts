// Whether the API server keeps ResourceSlice device taints (KEP-5055): with the DRADeviceTaints gate off (1.35
// defaults) it drops `taints` silently and a tainted device would be published as a healthy one. The plugin
// finds out as the operator's extended-resource probe does, by a server-side dry run of a slice with one
// tainted device, and learns again from every real write that carried a taint.
import { createHash } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import type { Logger } from "../../observability/json-log.js";
import type { ApiClient } from "../report/api-client.js";
import {
  RESOURCE_SLICE_API_VERSION,
  RESOURCE_SLICE_KIND,
  RESOURCE_SLICES_PATH,
  type ResourceSlice,
  type SliceDevice,
} from "./slices.js";
import { UNHEALTHY_TAINT_KEY, type DeviceTaint } from "./taints.js";

/** `Kept`: taints stick; `Dropped`: the API server drops them; `Unknown`: no answer yet. */
export type TaintSupport = "Kept" | "Dropped" | "Unknown";

/** A probe that failed (unreachable, forbidden) is asked again after this long; meanwhile Unknown. */
export const DEFAULT_TAINT_PROBE_RETRY_MS = 20_000;

/** The taints a slice's devices carry, by device name (devices without any left out). Pure. */
function taintsByDevice(slice: { spec: { devices?: readonly SliceDevice[] } }): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const device of slice.spec.devices ?? []) {
    const taints = device.taints ?? [];
    if (taints.length > 0) {
      out.set(
        device.name,
        taints.map((t) => ({ key: t.key, value: t.value ?? "", effect: t.effect })),
      );
    }
  }
  return out;
}

/**
 * What the API server's answer to a write says about taint support: undefined when the slice sent carried
 * no taint (nothing to learn); `Kept` when every device came back with the taints it was sent with (key,
 * value and effect; the server may fill in timeAdded); `Dropped` otherwise. Pure.
 */
export function taintSupportFromWrite(
  sent: { spec: { devices?: readonly SliceDevice[] } },
  returned: { spec: { devices?: readonly SliceDevice[] } },
): TaintSupport | undefined {
  const want = taintsByDevice(sent);
  if (want.size === 0) return undefined;
  const got = taintsByDevice(returned);
  return isDeepStrictEqual(want, got) ? "Kept" : "Dropped";
}

/**
 * The slice sent as the dry run: one device with dpo's unhealthy taint, in the node's own pool (the
 * admission policy dpo-plugin-own-node-slices refuses any other pool; a dry run stores nothing, so the
 * real pool is not touched), under a name of its own. Pure.
 */
export function taintProbeSlice(driver: string, node: string): ResourceSlice {
  const hash = createHash("sha256").update(`${driver}/${node}/taint-probe`).digest("hex").slice(0, 16);
  const taint: DeviceTaint = { key: UNHEALTHY_TAINT_KEY, value: "Probe", effect: "NoSchedule" };
  return {
    apiVersion: RESOURCE_SLICE_API_VERSION,
    kind: RESOURCE_SLICE_KIND,
    metadata: { name: `dpo-taint-probe-${hash}` },
    spec: {
      driver,
      nodeName: node,
      pool: { name: node, generation: 1, resourceSliceCount: 1 },
      devices: [{ name: "probe", taints: [taint] }],
    },
  };
}

export interface DeviceTaintProbeOptions {
  readonly client: Pick<ApiClient, "request">;
  readonly driver: string;
  readonly node: string;
  readonly logger: Logger;
  readonly retryMs?: number;
  readonly now?: () => number;
}

/**
 * Taint support as this plugin knows it. `kept()` asks the API server once (a dry run: nothing is stored)
 * and again after a failure once `retryMs` passed; `learn()` takes what a real write showed, so a cluster
 * whose gate changes is followed on the next write with a taint.
 */
export class DeviceTaintProbe {
  private support: TaintSupport = "Unknown";
  private failedAtMs: number | undefined;
  private inFlight: Promise<TaintSupport> | undefined;

  constructor(private readonly opts: DeviceTaintProbeOptions) {}

  state(): TaintSupport {
    return this.support;
  }

  /** Whether taints stick; probes when not known yet. Never throws: a failed probe reads as not kept. */
  async kept(signal?: AbortSignal): Promise<boolean> {
    if (this.support !== "Unknown") return this.support === "Kept";
    const now = this.opts.now?.() ?? Date.now();
    const retryMs = this.opts.retryMs ?? DEFAULT_TAINT_PROBE_RETRY_MS;
    if (this.failedAtMs !== undefined && now - this.failedAtMs < retryMs) return false;
    this.inFlight ??= this.probe(signal).finally(() => (this.inFlight = undefined));
    return (await this.inFlight) === "Kept";
  }

  /** Takes what the answer to a real write says; true when that changed what is known. */
  learn(sent: ResourceSlice, returned: ResourceSlice): boolean {
    const seen = taintSupportFromWrite(sent, returned);
    if (seen === undefined || seen === this.support) return false;
    this.opts.logger.info(
      { taints: seen, before: this.support },
      "a ResourceSlice write shows whether the API server keeps device taints",
    );
    this.support = seen;
    return true;
  }

  private async probe(signal?: AbortSignal): Promise<TaintSupport> {
    const sent = taintProbeSlice(this.opts.driver, this.opts.node);
    try {
      const returned = await this.opts.client.request<ResourceSlice>({
        method: "POST",
        path: `${RESOURCE_SLICES_PATH}?dryRun=All`,
        body: sent,
        signal,
      });
      this.support = taintSupportFromWrite(sent, returned) ?? "Dropped";
      this.failedAtMs = undefined;
      this.opts.logger.info(
        { taints: this.support },
        this.support === "Kept"
          ? "the API server keeps device taints: unhealthy devices stay in the slice, tainted"
          : "the API server drops device taints (DRADeviceTaints off): unhealthy devices are left out of the slice",
      );
    } catch (err) {
      this.failedAtMs = this.opts.now?.() ?? Date.now();
      this.opts.logger.warn(
        { err: err instanceof Error ? err.message : String(err) },
        "probing whether the API server keeps device taints failed; unhealthy devices are left out meanwhile",
      );
    }
    return this.support;
  }
}
