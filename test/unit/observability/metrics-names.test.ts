// The dpo metric names, types, help texts, label names and buckets users scrape stay what they were.
import * as promClient from "prom-client";
import { describe, expect, it } from "vitest";
import {
  collectProcessMetrics,
  Counter,
  Gauge,
  Histogram,
  Registry,
} from "../../../src/observability/metrics.js";
import { OperatorMetrics } from "../../../src/operator/metrics.js";
import { PluginMetrics } from "../../../src/plugin-runtime/metrics.js";

interface ScrapedFamily {
  type: string;
  help: string;
  /** Label names seen on any sample of the family, `le` excluded, sorted. */
  labels: string[];
  /** Histogram bucket boundaries, in exposition order; empty for other types. */
  buckets: string[];
}

/** Parses the text exposition into families, keeping only the `dpo_` ones (defaults are not ours to pin). */
function parseExposition(text: string): Map<string, ScrapedFamily> {
  const families = new Map<string, ScrapedFamily>();
  const family = (name: string): ScrapedFamily => {
    let f = families.get(name);
    if (!f) {
      f = { type: "", help: "", labels: [], buckets: [] };
      families.set(name, f);
    }
    return f;
  };
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const meta = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line);
    if (meta) {
      const [, kind, name, rest] = meta as unknown as [string, string, string, string];
      if (kind === "HELP") family(name).help = rest;
      else family(name).type = rest;
      continue;
    }
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+$/.exec(line);
    if (!sample) throw new Error(`not an exposition line: ${line}`);
    const [, sampleName, labelText = ""] = sample as unknown as [string, string, string | undefined];
    // A histogram's samples are <name>_bucket, _sum and _count; they belong to the family <name>.
    const base = [...families.keys()].find(
      (n) => families.get(n)?.type === "histogram" && /^(.*)_(bucket|sum|count)$/.exec(sampleName)?.[1] === n,
    );
    const f = family(base ?? sampleName);
    for (const m of labelText.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"/g)) {
      const labelName = m[1] ?? "";
      if (labelName === "le") {
        const le = /le="([^"]*)"/.exec(m[0])?.[1] ?? "";
        if (!f.buckets.includes(le)) f.buckets.push(le);
      } else if (!f.labels.includes(labelName)) f.labels.push(labelName);
    }
  }
  for (const [name, f] of families) {
    if (!name.startsWith("dpo_")) families.delete(name);
    f.labels.sort();
  }
  return families;
}

function expected(type: string, help: string, labels: string[], buckets: number[] = []): ScrapedFamily {
  return {
    type,
    help,
    labels,
    buckets: buckets.length ? [...buckets.map(String), "+Inf"] : [],
  };
}

describe("plugin metrics", () => {
  it("exposes every dpo_plugin_ metric with its type, help, label names and buckets", async () => {
    const m = new PluginMetrics();
    // One sample per metric, with the label sets the runtime records (runtime.ts, device-plugin-server.ts,
    // dra/dra-runtime.ts, report/writer.ts), so that the label names show up in the exposition.
    m.devices.set({ resource: "example.com/foo", health: "Healthy" }, 2);
    m.recordDeviceSeries("example.com/foo", [
      { device: "foo-0", namespace: "ml", pod: "p", container: "c", allocated: 1, healthy: 1 },
    ]);
    m.podResourcesUp.set({ resource: "example.com/foo" }, 1);
    m.podResourcesErrors.inc({ resource: "example.com/foo", code: "UNAVAILABLE" });
    m.allocations.inc({ resource: "example.com/foo", result: "OK" });
    m.allocateDuration.observe({ resource: "example.com/foo" }, 0.0003);
    m.draPrepareDuration.observe({ resource: "example.com/foo" }, 0.004);
    m.draUnprepareDuration.observe({ resource: "example.com/foo" }, 0.0005);
    m.preferredAllocations.inc({ resource: "example.com/foo", result: "OK" });
    m.registrations.inc({ resource: "example.com/foo", path: "kubelet", result: "ok" });
    m.registered.set({ resource: "example.com/foo" }, 1);
    m.kubeletRestarts.inc({ resource: "example.com/foo" });
    m.listAndWatchStreams.set({ resource: "example.com/foo" }, 1);
    m.deviceListUpdates.inc({ resource: "example.com/foo" });
    m.reportWrites.inc({ result: "ok" });

    const scraped = parseExposition(await m.render());
    expect(Object.fromEntries(scraped)).toEqual({
      dpo_plugin_devices: expected("gauge", "Devices advertised to the kubelet, by health.", [
        "health",
        "resource",
      ]),
      dpo_plugin_device_allocated: expected(
        "gauge",
        "1 when the kubelet has allocated the device to the container in the pod, namespace and container labels, 0 when free.",
        ["container", "device", "namespace", "pod", "resource"],
      ),
      dpo_plugin_device_healthy: expected(
        "gauge",
        "1 when the advertised device is healthy, 0 when not; pod, namespace and container name its holder, if any.",
        ["container", "device", "namespace", "pod", "resource"],
      ),
      dpo_plugin_pod_resources_up: expected(
        "gauge",
        "1 when the last read of the kubelet's PodResources API succeeded, 0 when it failed.",
        ["resource"],
      ),
      dpo_plugin_pod_resources_errors_total: expected(
        "counter",
        "Failed reads of the kubelet's PodResources API, by gRPC status (UNAVAILABLE when the socket is missing).",
        ["code", "resource"],
      ),
      dpo_plugin_allocations_total: expected(
        "counter",
        "Allocate container requests answered, by result (ok or the gRPC status name).",
        ["resource", "result"],
      ),
      dpo_plugin_allocate_duration_seconds: expected(
        "histogram",
        "Time to answer one Allocate call.",
        ["resource"],
        [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1],
      ),
      dpo_plugin_dra_prepare_duration_seconds: expected(
        "histogram",
        "Time to answer one NodePrepareResources call (DRA), all its claims together.",
        ["resource"],
        [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
      ),
      dpo_plugin_dra_unprepare_duration_seconds: expected(
        "histogram",
        "Time to answer one NodeUnprepareResources call (DRA), all its claims together.",
        ["resource"],
        [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
      ),
      dpo_plugin_preferred_allocations_total: expected(
        "counter",
        "GetPreferredAllocation calls answered, by result.",
        ["resource", "result"],
      ),
      dpo_plugin_registrations_total: expected(
        "counter",
        "Registration attempts with the kubelet, by path (kubelet or watcher) and result.",
        ["path", "resource", "result"],
      ),
      dpo_plugin_registered: expected(
        "gauge",
        "1 while the kubelet has accepted the plugin's current registration.",
        ["resource"],
      ),
      dpo_plugin_reregistrations_total: expected(
        "counter",
        "Times the plugin registered again by itself, by reason (CapacityLost: the kubelet handed out fewer devices than the plugin advertised as healthy for longer than --capacity-heal-after).",
        [],
      ),
      dpo_plugin_kubelet_restarts_total: expected(
        "counter",
        "Kubelet restarts detected (kubelet.sock re-created or the plugin's socket removed).",
        ["resource"],
      ),
      dpo_plugin_list_and_watch_streams: expected("gauge", "Open ListAndWatch streams.", ["resource"]),
      dpo_plugin_device_list_updates_total: expected(
        "counter",
        "Device lists sent on ListAndWatch streams.",
        ["resource"],
      ),
      dpo_plugin_report_writes_total: expected(
        "counter",
        "DeviceNodeState report writes, by result: ok, error, or unchanged (nothing new, so not sent).",
        ["result"],
      ),
    });
  });
});

describe("operator metrics", () => {
  it("exposes every dpo_operator_ and dpo_webhook_ metric with its type, help, label names and buckets", async () => {
    const m = new OperatorMetrics();
    // The label sets the operator records (manager.ts, controllers/steps/).
    m.reconciles.inc({ result: "ok" });
    m.reconcileDuration.observe({}, 0.02);
    m.applies.inc({ kind: "DaemonSet" });
    m.applyErrors.inc({ kind: "DaemonSet" });
    m.statusWrites.inc();
    m.statusWritesDeferred.inc();
    m.apiRequests.inc({ verb: "GET", code: "200" });
    m.watchRestarts.inc({ resource: "nodes", reason: "expired" });
    m.leader.set({}, 1);
    m.queueDepth.set({}, 3);
    m.conversionReviews.inc({ to: "dpo.dev/v1beta1", result: "Success" });
    m.conversionObjects.inc({ to: "dpo.dev/v1beta1" }, 2);
    m.conversionDuration.observe(0.001);
    m.webhookCertificateExpiry.set(1_900_000_000);
    m.storageMigrations.inc({ result: "Migrated" });
    m.orphanedMarksRemoved.inc({ mark: "taint" });
    m.recordConfig("foo", {
      ready: true,
      stalledReason: undefined,
      nodesDesired: 3,
      nodesReady: 3,
      nodesAvailable: 3,
      nodesUpdated: 3,
      devicesAdvertised: 12,
      devicesAllocatable: 11,
      devicesUnhealthy: 1,
      problemNodes: { UnhealthyDevices: 1 },
      rolloutPhase: "Complete",
    });

    const scraped = parseExposition(await m.render());
    expect(Object.fromEntries(scraped)).toEqual({
      dpo_operator_reconciles_total: expected(
        "counter",
        "Reconciles of DevicePluginConfigs, by result (ok, requeue, error).",
        ["result"],
      ),
      dpo_operator_reconcile_duration_seconds: expected(
        "histogram",
        "Time to reconcile one DevicePluginConfig.",
        [],
        [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      ),
      dpo_operator_applies_total: expected("counter", "Server-side applies of plugin objects, by kind.", [
        "kind",
      ]),
      dpo_operator_apply_errors_total: expected(
        "counter",
        "Applies refused for good (forbidden, invalid), by kind.",
        ["kind"],
      ),
      dpo_operator_status_writes_total: expected("counter", "DevicePluginConfig status writes.", []),
      dpo_operator_status_writes_deferred_total: expected(
        "counter",
        "Status writes postponed to keep at most one per config per interval.",
        [],
      ),
      dpo_operator_api_requests_total: expected(
        "counter",
        "Requests to the API server, by verb (WATCH counts watch starts) and HTTP status code (none: no response).",
        ["code", "verb"],
      ),
      dpo_operator_watch_restarts_total: expected(
        "counter",
        "Informer list/watch restarts, by resource and reason (expired: 410 Gone, relisted at once; error: a failed list or watch, retried after a backoff, a watch from where it stopped).",
        ["reason", "resource"],
      ),
      dpo_operator_leader: expected("gauge", "1 while this replica leads.", []),
      dpo_operator_queue_depth: expected("gauge", "Keys waiting in the work queue.", []),
      dpo_operator_configs_with_unseen_writes: expected(
        "gauge",
        "Configs whose Node and workload writes the operator's caches have yet to show: the state it keeps per config between passes.",
        [],
      ),
      dpo_webhook_conversion_reviews_total: expected(
        "counter",
        "ConversionReviews answered, by desired version and result (Success, Failure).",
        ["result", "to"],
      ),
      dpo_webhook_converted_objects_total: expected(
        "counter",
        "Objects in the ConversionReviews answered, by desired version.",
        ["to"],
      ),
      dpo_webhook_conversion_duration_seconds: expected(
        "histogram",
        "Time to read, convert and answer one ConversionReview.",
        [],
        [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      ),
      dpo_webhook_certificate_expiry_timestamp_seconds: expected(
        "gauge",
        "When the conversion webhook's serving certificate expires, in seconds since the Unix epoch; absent until one is served.",
        [],
      ),
      dpo_operator_storage_migrations_total: expected(
        "counter",
        "Storage version migrations of DevicePluginConfigs run by the leader, by result (UpToDate, Migrated, Failed, StoredVersionsChanged, Aborted, error: the check itself failed).",
        ["result"],
      ),
      dpo_operator_orphaned_node_marks_removed_total: expected(
        "counter",
        "Marks of configs that no longer exist taken off Nodes by the leader, by place (label, annotation: an upgrade record, taint: a Replace fence).",
        ["mark"],
      ),
      dpo_config_ready: expected(
        "gauge",
        "1 while the DevicePluginConfig's Ready condition is True, else 0.",
        ["config"],
      ),
      dpo_config_stalled: expected(
        "gauge",
        "1 for the reason of the DevicePluginConfig's Stalled condition while it is True, 0 for the other reasons; all 0 while it is not stalled.",
        ["config", "reason"],
      ),
      dpo_config_nodes_desired: expected(
        "gauge",
        "Nodes the config's plugin should run on (status.nodes.desired).",
        ["config"],
      ),
      dpo_config_nodes_ready: expected(
        "gauge",
        "Nodes whose plugin is ready and registered and whose kubelet advertises what it reports (status.nodes.ready).",
        ["config"],
      ),
      dpo_config_nodes_available: expected(
        "gauge",
        "Nodes where a plugin of any revision runs, registered and advertised by the kubelet: the nodes serving devices, old revision included during an upgrade (status.nodes.available).",
        ["config"],
      ),
      dpo_config_nodes_updated: expected(
        "gauge",
        "Nodes running the plugin revision of the config's current spec (status.nodes.updated).",
        ["config"],
      ),
      dpo_config_devices_advertised: expected(
        "gauge",
        "Devices the kubelets advertise for the config's resource, summed over its nodes (status.devices.capacity).",
        ["config"],
      ),
      dpo_config_devices_allocatable: expected(
        "gauge",
        "Devices the kubelets can allocate for the config's resource: advertised and healthy (status.devices.allocatable).",
        ["config"],
      ),
      dpo_config_devices_unhealthy: expected(
        "gauge",
        "Devices the config's plugins report unhealthy (status.devices.unhealthy).",
        ["config"],
      ),
      dpo_admission_rejected_pods: expected(
        "gauge",
        "Pods the kubelets of the config's nodes rejected at admission for its resource (UnexpectedAdmissionError, as after a node reboot on the device plugin path) that still exist; the status's AdmissionRejected problems and Events name them.",
        ["config"],
      ),
      dpo_config_problem_nodes: expected(
        "gauge",
        "Nodes of the config with a problem, by reason (status.problems, counted before the list is cut short).",
        ["config", "reason"],
      ),
      dpo_config_rollout_phase: expected(
        "gauge",
        "1 for the phase of the config's plugin rollout (status.upgrade.phase), 0 for the others; all 0 before its first rollout.",
        ["config", "phase"],
      ),
    });
  });
});

describe("process metrics", () => {
  it("takes prom-client's own classes from its files, the ones its index exports", () => {
    // metrics.ts loads prom-client file by file (its index loads the cluster aggregator and more): a
    // prom-client release that moves or changes those files must fail here, not in a scrape.
    expect(Counter).toBe(promClient.Counter);
    expect(Gauge).toBe(promClient.Gauge);
    expect(Histogram).toBe(promClient.Histogram);
    expect(Registry).toBe(promClient.Registry);
  });

  it("adds Node's default metrics to a component's registry without touching the dpo ones", async () => {
    const m = new PluginMetrics();
    expect(await m.render()).not.toContain("process_resident_memory_bytes");
    await collectProcessMetrics(m.registry);
    const text = await m.render();
    for (const name of [
      "process_cpu_seconds_total",
      "process_resident_memory_bytes",
      "nodejs_heap_size_used_bytes",
      "nodejs_gc_duration_seconds",
      "nodejs_eventloop_lag_p99_seconds",
    ])
      expect(text).toMatch(new RegExp(`^# TYPE ${name} `, "m"));
    expect([...parseExposition(text).keys()]).toHaveLength(17);
    // A second component's registry stays empty of them: nothing goes through prom-client's global one.
    expect(await new OperatorMetrics().render()).not.toContain("process_");
  });
});
