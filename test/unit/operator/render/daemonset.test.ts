// The plugin DaemonSet whatever the backend: its namespace, labels and owner, the command and its args, the
// fields passed through, the config hash and revision, mounts and volumes, bounded names, and a stable render.
import { describe, expect, it } from "vitest";
import type { DevicePluginConfigSpecInput } from "../../../../src/api/v1beta1/spec.js";
import { configHash } from "../../../../src/contract/plugin-config.js";
import { renderPluginConfigMap } from "../../../../src/operator/render/configmap.js";
import {
  DEFAULT_PLUGIN_RESOURCES,
  pluginRevision,
  renderPluginDaemonSet,
} from "../../../../src/operator/render/daemonset.js";
import { ctx, config, podSpec, container } from "./render-support.js";

describe("renderPluginDaemonSet", () => {
  it("lives in the operator namespace, labelled, owned by the config and selecting its pods", () => {
    const ds = renderPluginDaemonSet(config(), ctx);
    const revision = pluginRevision(config(), ctx);
    expect(revision).toMatch(/^[0-9a-f]{10}$/);
    expect(ds.apiVersion).toBe("apps/v1");
    expect(ds.kind).toBe("DaemonSet");
    expect(ds.metadata?.name).toBe(`dpo-example-foo-${revision}`);
    expect(ds.metadata?.namespace).toBe("dpo-system");
    expect(ds.metadata?.ownerReferences).toEqual([
      {
        apiVersion: "dpo.dev/v1beta1",
        kind: "DevicePluginConfig",
        name: "example-foo",
        uid: "uid-1",
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    expect(ds.spec?.selector.matchLabels).toEqual({
      "dpo.dev/config": "example-foo",
      "dpo.dev/revision": revision,
    });
    // The API server refuses a selector that does not match the template's labels.
    expect(ds.spec?.template.metadata?.labels).toMatchObject(ds.spec!.selector.matchLabels!);
    expect(ds.spec?.template.metadata?.labels).toEqual(ds.metadata?.labels);
    // The operator moves nodes between revisions: a role change must never restart pods.
    expect(ds.spec?.updateStrategy).toEqual({ type: "OnDelete" });
    expect(ds.spec?.revisionHistoryLimit).toBe(2);
    // By default the base: every node without a revision label runs it.
    expect(
      podSpec(ds).affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
        ?.nodeSelectorTerms?.[0],
    ).toEqual({ matchExpressions: [{ key: "revision.dpo.dev/example-foo", operator: "DoesNotExist" }] });
    expect(podSpec(ds).terminationGracePeriodSeconds).toBe(10);
    expect(podSpec(ds).serviceAccountName).toBe("dpo-plugin");
    expect(podSpec(ds).priorityClassName).toBe("system-node-critical");
  });

  it("runs `dpo plugin` on the mounted config with the node name from the downward API", () => {
    const c = container(renderPluginDaemonSet(config({ plugin: { logLevel: "debug" } }), ctx));
    expect(c.name).toBe("plugin");
    expect(c.imagePullPolicy).toBe("IfNotPresent");
    expect(c.args).toEqual([
      "plugin",
      "--config",
      "/etc/dpo/config.yaml",
      "--registration",
      "kubelet",
      "--metrics-addr",
      ":8080",
      "--health-addr",
      ":8081",
    ]);
    expect(c.env).toEqual([
      { name: "NODE_NAME", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "spec.nodeName" } } },
      {
        name: "POD_NAMESPACE",
        valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } },
      },
      { name: "POD_UID", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.uid" } } },
      { name: "DPO_LOG_LEVEL", value: "debug" },
      { name: "DPO_REVISION", value: pluginRevision(config({ plugin: { logLevel: "debug" } }), ctx) },
    ]);
    expect(c.ports).toEqual([
      { name: "metrics", containerPort: 8080, protocol: "TCP" },
      { name: "health", containerPort: 8081, protocol: "TCP" },
    ]);
    expect(c.readinessProbe?.httpGet).toEqual({ path: "/readyz", port: "health", scheme: "HTTP" });
    expect(c.livenessProbe?.httpGet).toEqual({ path: "/healthz", port: "health", scheme: "HTTP" });
    expect(c.volumeMounts?.[0]).toEqual({ name: "config", mountPath: "/etc/dpo", readOnly: true });
    const ds = renderPluginDaemonSet(config(), ctx);
    expect(podSpec(ds).volumes?.[0]).toEqual({
      name: "config",
      configMap: { name: ds.metadata?.name, defaultMode: 0o444 },
    });
  });

  it.each([
    { image: "", want: "registry.example/dpo:1.2.3" },
    { image: "registry.example/custom:9", want: "registry.example/custom:9" },
  ])("uses image '$image' → $want", ({ image, want }) => {
    expect(container(renderPluginDaemonSet(config({ plugin: { image } }), ctx)).image).toBe(want);
  });

  it("passes nodeSelector, tolerations, priority class and resources through, and leaves empty ones out", () => {
    const ds = renderPluginDaemonSet(
      config({
        nodeSelector: { "feature.example/foo": "true" },
        tolerations: [{ key: "gpu", operator: "Exists", effect: "NoSchedule" }],
        plugin: {
          priorityClassName: "custom-priority",
          resources: { requests: { cpu: "10m", memory: "32Mi" }, limits: { memory: "64Mi" } },
        },
      }),
      ctx,
    );
    expect(podSpec(ds).nodeSelector).toEqual({ "feature.example/foo": "true" });
    // The config's tolerations, and the rollout's Replace taint (ADR 0004), which every revision tolerates.
    expect(podSpec(ds).tolerations).toEqual([
      { key: "gpu", operator: "Exists", effect: "NoSchedule" },
      { key: "replace.dpo.dev/example-foo", operator: "Exists", effect: "NoSchedule" },
    ]);
    expect(podSpec(ds).priorityClassName).toBe("custom-priority");
    expect(container(ds).resources).toEqual({
      requests: { cpu: "10m", memory: "32Mi" },
      limits: { memory: "64Mi" },
    });

    const bare = renderPluginDaemonSet(config({ plugin: { priorityClassName: "" } }), ctx);
    expect(podSpec(bare)).not.toHaveProperty("nodeSelector");
    expect(podSpec(bare).tolerations).toEqual([
      { key: "replace.dpo.dev/example-foo", operator: "Exists", effect: "NoSchedule" },
    ]);
    expect(podSpec(bare)).not.toHaveProperty("priorityClassName");
    // No resources in the config: the measured defaults (daemonset-resources.test.ts), never none.
    expect(container(bare).resources).toEqual(DEFAULT_PLUGIN_RESOURCES);
  });

  it("annotates the pod template with the ConfigMap's hash, so a spec change rolls the pods", () => {
    const c = config();
    const ds = renderPluginDaemonSet(c, ctx);
    const hash = ds.spec?.template.metadata?.annotations?.["dpo.dev/config-hash"];
    expect(hash).toBe(configHash(renderPluginConfigMap(c, ctx, "0123456789").data!));
    const changed = renderPluginDaemonSet(config({ sharing: { strategy: "TimeSlicing", replicas: 2 } }), ctx);
    expect(changed.spec?.template.metadata?.annotations?.["dpo.dev/config-hash"]).not.toBe(hash);
  });

  it("gives every mount a volume and every volume a unique name", () => {
    const ds = renderPluginDaemonSet(config({ backend: { type: "PCI", pci: { vendor: "10de" } } }), {
      ...ctx,
      registrationMode: "watcher",
    });
    const names = (podSpec(ds).volumes ?? []).map((v) => v.name);
    expect(new Set(names).size).toBe(names.length);
    const mounts = container(ds).volumeMounts ?? [];
    // The loop below passes on no mount at all; the plugin always mounts the device-plugins directory.
    expect(mounts.length).toBeGreaterThan(0);
    for (const mount of mounts) expect(names).toContain(mount.name);
  });

  it("bounds the names of a config with a long name", () => {
    const ds = renderPluginDaemonSet(config({}, `${"n".repeat(70)}.example.com`), ctx);
    expect(ds.metadata!.name!.length).toBeLessThanOrEqual(63);
    expect(podSpec(ds).volumes?.[0]?.configMap?.name).toBe(ds.metadata?.name);
  });

  it("gives every template its own revision, and none to a change of spec.upgrade", () => {
    const base = pluginRevision(config(), ctx);
    expect(pluginRevision(config(), ctx)).toBe(base);
    expect(pluginRevision(config({ plugin: { image: "registry.example/dpo:2" } }), ctx)).not.toBe(base);
    expect(pluginRevision(config({ plugin: { logLevel: "debug" } }), ctx)).not.toBe(base);
    expect(pluginRevision(config({ sharing: { strategy: "TimeSlicing", replicas: 2 } }), ctx)).not.toBe(base);
    expect(
      pluginRevision(config({ upgrade: { paused: true, maxUnavailable: "50%", strategy: "Replace" } }), ctx),
    ).toBe(base);
    // The role is where the revision runs, not what it runs.
    const moving = renderPluginDaemonSet(config(), ctx, { role: "moving" });
    expect(moving.metadata?.labels?.["dpo.dev/revision"]).toBe(base);
  });

  it.each([
    {
      role: "base" as const,
      want: (rev: string) => [
        { matchExpressions: [{ key: "revision.dpo.dev/example-foo", operator: "DoesNotExist" }] },
        { matchExpressions: [{ key: "revision.dpo.dev/example-foo", operator: "In", values: [rev] }] },
        { matchExpressions: [{ key: "surge.dpo.dev/example-foo", operator: "In", values: [rev] }] },
      ],
    },
    {
      role: "moving" as const,
      want: (rev: string) => [
        { matchExpressions: [{ key: "revision.dpo.dev/example-foo", operator: "In", values: [rev] }] },
        { matchExpressions: [{ key: "surge.dpo.dev/example-foo", operator: "In", values: [rev] }] },
      ],
    },
  ])(
    "places the $role revision by the nodes' revision labels, whatever the number of nodes",
    ({ role, want }) => {
      const ds = renderPluginDaemonSet(config(), ctx, { role });
      expect(
        podSpec(ds).affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms,
      ).toEqual(want(pluginRevision(config(), ctx)));
    },
  );

  it("keys the node labels by the config label value, bounded for a long config name", () => {
    const long = `${"n".repeat(70)}.example.com`;
    const ds = renderPluginDaemonSet(config({}, long), ctx, { role: "moving" });
    const terms =
      podSpec(ds).affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ??
      [];
    for (const term of terms) {
      for (const e of term.matchExpressions ?? []) {
        const [prefix, name] = e.key.split("/");
        expect(prefix).toMatch(/^(revision|surge)\.dpo\.dev$/);
        expect(name!.length).toBeLessThanOrEqual(63);
      }
    }
  });

  it("renders the same object every time", () => {
    const spec: Partial<DevicePluginConfigSpecInput> = {
      backend: { type: "DevFS", devFS: { paths: [{ glob: "/dev/ttyUSB*" }, { glob: "/dev/ttyACM*" }] } },
      tolerations: [{ operator: "Exists" }],
    };
    const a = renderPluginDaemonSet(config(spec), ctx);
    const b = renderPluginDaemonSet(config(spec), ctx);
    expect(b).toEqual(a);
    expect(JSON.stringify(b)).toBe(JSON.stringify(a));
  });
});
