// Conversion: many configs listed as the stored v1beta1 and as v1alpha1 through the operator's webhook.
import type { KubeConfig } from "@kubernetes/client-node";
import { kubeRequest } from "../../src/kube/request.js";
import { waitFor } from "../../tools/cluster/wait.js";
import { percentile } from "../../tools/stats.js";
import { CONVERSION_LISTS, CONVERSION_OBJECTS } from "./knobs.js";
import { metric } from "./metrics.js";
import type { Row } from "./targets.js";

export async function benchConversion(kc: KubeConfig, metricsPort: number, rows: Row[]): Promise<void> {
  if (CONVERSION_OBJECTS <= 0) return;
  const created = Date.now();
  for (let start = 0; start < CONVERSION_OBJECTS; start += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, CONVERSION_OBJECTS - start) }, (_, i) =>
        kubeRequest(kc, {
          method: "POST",
          path: "/apis/dpo.dev/v1beta1/devicepluginconfigs",
          body: {
            apiVersion: "dpo.dev/v1beta1",
            kind: "DevicePluginConfig",
            metadata: { name: `conv-${start + i}` },
            spec: {
              resourceName: `conv.example/dev-${start + i}`,
              backend: { type: "Mock", mock: { devices: 4 } },
              sharing: { strategy: "TimeSlicing", replicas: 4, failRequestsGreaterThanOne: true },
              topology: { allocationPolicy: "Packed" },
              nodeSelector: { "conv.example/none": "true" },
            },
          },
        }),
      ),
    );
  }
  // Let the operator reconcile them (a DaemonSet and ConfigMap each) before measuring reads.
  await waitFor(
    "the operator to reconcile the conversion configs",
    async (observe) => {
      const depth = await metric(metricsPort, "dpo_operator_queue_depth");
      const reconciles = await metric(metricsPort, "dpo_operator_reconciles_total");
      observe({ depth, reconciles });
      return depth === 0 && reconciles >= CONVERSION_OBJECTS;
    },
    { timeoutMs: 600_000, intervalMs: 2_000 },
  );
  console.error(
    `bench-operator: ${CONVERSION_OBJECTS} configs created and reconciled in ${Date.now() - created} ms`,
  );
  const timings: Record<"v1beta1" | "v1alpha1", number[]> = { v1beta1: [], v1alpha1: [] };
  for (let i = 0; i < CONVERSION_LISTS + 2; i++) {
    for (const version of ["v1beta1", "v1alpha1"] as const) {
      const started = performance.now();
      const list = await kubeRequest<{ items: unknown[] }>(kc, {
        method: "GET",
        path: `/apis/dpo.dev/${version}/devicepluginconfigs`,
      });
      const ms = performance.now() - started;
      if (list.items.length < CONVERSION_OBJECTS)
        throw new Error(`${version} list has ${list.items.length} items`);
      // The first two rounds warm the watch cache and the webhook's connections.
      if (i >= 2) timings[version].push(ms);
    }
  }
  const reviews = await metric(metricsPort, "dpo_webhook_conversion_reviews_total");
  const p = (version: "v1beta1" | "v1alpha1", q: number): number => percentile(timings[version], q);
  for (const version of ["v1beta1", "v1alpha1"] as const) {
    rows.push({
      metric: `list of ${CONVERSION_OBJECTS} configs read as ${version} (${CONVERSION_LISTS} lists${version === "v1alpha1" ? ", through the webhook" : ", stored version"})`,
      value: `p50 ${p(version, 50).toFixed(0)} ms, p99 ${p(version, 99).toFixed(0)} ms`,
      target: "(reported)",
    });
  }
  rows.push({
    metric: "conversion cost per list of configs: v1alpha1 p50 − v1beta1 p50 (per object)",
    value: `${(p("v1alpha1", 50) - p("v1beta1", 50)).toFixed(0)} ms (${(((p("v1alpha1", 50) - p("v1beta1", 50)) / CONVERSION_OBJECTS) * 1000).toFixed(0)} µs), ${reviews} reviews answered`,
    target: "(reported)",
  });
}
