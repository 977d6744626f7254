// spec.plugin's pod fields in the plugin pod: what it gets, how the Secrets combine with the operator's flag,
// that a change is a new revision, that others' annotations are no drift, and that v1alpha1 carries them through.
import type { V1DaemonSet } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { toV1alpha1, toV1beta1, LOST_FIELDS_ANNOTATION } from "../../../../src/api/conversion/index.js";
import { type DevicePluginConfig } from "../../../../src/api/v1beta1/config.js";
import { pluginRevision, renderPluginDaemonSet } from "../../../../src/operator/render/daemonset.js";
import { pluginImagePullSecrets } from "../../../../src/operator/render/pull-secrets.js";
import { renderRevision } from "../../../../src/operator/render/revision.js";
import { decideRollout, type RolloutInput } from "../../../../src/operator/upgrade/rollout.js";
import { config, configInput as input, ctx } from "./render-support.js";
import { type Plugin, withPlugin, ALL_FIELDS } from "./plugin-pod-fields-support.js";

describe("renderPluginDaemonSet with spec.plugin's pod fields", () => {
  const pod = (plugin: Plugin) => renderPluginDaemonSet(withPlugin(plugin), ctx).spec!.template;

  it.each<{ field: string; plugin: Plugin; check: (ds: ReturnType<typeof pod>) => void }>([
    {
      field: "imagePullPolicy",
      plugin: { imagePullPolicy: "Always" },
      check: (t) => expect(t.spec!.containers[0]!.imagePullPolicy).toBe("Always"),
    },
    {
      field: "runtimeClassName",
      plugin: { runtimeClassName: "nvidia" },
      check: (t) => expect(t.spec!.runtimeClassName).toBe("nvidia"),
    },
    {
      field: "imagePullSecrets",
      plugin: { imagePullSecrets: [{ name: "regcred" }] },
      check: (t) => expect(t.spec!.imagePullSecrets).toEqual([{ name: "regcred" }]),
    },
    {
      field: "podAnnotations, beside the operator's own",
      plugin: { podAnnotations: { "example.com/team": "gpu" } },
      check: (t) =>
        expect(t.metadata!.annotations).toEqual({
          "example.com/team": "gpu",
          "dpo.dev/config-hash": expect.stringMatching(/^[0-9a-f]{16}$/) as string,
        }),
    },
    {
      field: "env, after the operator's own so values may refer to them",
      plugin: { env: [{ name: "HOST", value: "$(NODE_NAME)" }, { name: "EMPTY" }] },
      check: (t) => {
        const env = t.spec!.containers[0]!.env!;
        const names = env.map((e) => e.name);
        expect(names.indexOf("HOST")).toBeGreaterThan(names.indexOf("NODE_NAME"));
        expect(env.filter((e) => e.name === "HOST" || e.name === "EMPTY")).toEqual([
          { name: "HOST", value: "$(NODE_NAME)" },
          { name: "EMPTY" },
        ]);
        // The revision stays last, appended to the rendered template.
        expect(names.at(-1)).toBe("DPO_REVISION");
      },
    },
  ])("renders $field", ({ plugin, check }) => {
    check(pod(plugin));
  });

  it("every field is part of the revision: changing any rolls the plugin out as a new revision", () => {
    const base = pluginRevision(withPlugin(ALL_FIELDS), ctx);
    const changes: Plugin[] = [
      { ...ALL_FIELDS, imagePullSecrets: [{ name: "regcred" }] },
      { ...ALL_FIELDS, imagePullPolicy: "IfNotPresent" },
      { ...ALL_FIELDS, runtimeClassName: "kata" },
      { ...ALL_FIELDS, podAnnotations: { "example.com/team": "other" } },
      { ...ALL_FIELDS, env: [{ name: "TZ", value: "CET" }] },
    ];
    const revisions = changes.map((plugin) => pluginRevision(withPlugin(plugin), ctx));
    expect(new Set([base, ...revisions]).size).toBe(1 + changes.length);
    expect(pluginRevision(withPlugin(ALL_FIELDS), ctx)).toBe(base);
  });
});

describe("spec.plugin.imagePullSecrets with the operator's --plugin-image-pull-secrets: the union, the config's first", () => {
  it.each<{ what: string; spec?: string[]; flag?: string[]; want: string[] | undefined }>([
    { what: "neither", want: undefined },
    { what: "only the flag's", flag: ["operator-cred"], want: ["operator-cred"] },
    { what: "only the config's", spec: ["regcred"], want: ["regcred"] },
    {
      what: "both, the config's first",
      spec: ["regcred"],
      flag: ["operator-cred"],
      want: ["regcred", "operator-cred"],
    },
    {
      what: "a name in both, once, where the config puts it",
      spec: ["b", "a"],
      flag: ["a", "c"],
      want: ["b", "a", "c"],
    },
    { what: "a name twice in the config, once", spec: ["a", "a"], want: ["a"] },
    { what: "empty lists", spec: [], flag: [], want: undefined },
  ])("$what", ({ spec, flag, want }) => {
    const fromSpec = spec?.map((name) => ({ name }));
    const context = flag === undefined ? ctx : { ...ctx, pluginImagePullSecrets: flag };
    expect(pluginImagePullSecrets(context, fromSpec)).toEqual(want?.map((name) => ({ name })));
    const rendered = renderPluginDaemonSet(
      config(fromSpec === undefined ? {} : { plugin: { imagePullSecrets: fromSpec } }),
      context,
    );
    expect(rendered.spec!.template.spec!.imagePullSecrets).toEqual(want?.map((name) => ({ name })));
  });
});

describe("a rollout with podAnnotations: the operator's render is compared, others' additions are no drift", () => {
  const NOW = Date.parse("2026-11-23T12:00:00Z");
  const WITH = withPlugin(ALL_FIELDS);
  const stored = (c: DevicePluginConfig): V1DaemonSet => {
    const ds = renderPluginDaemonSet(c, ctx);
    ds.metadata = { ...ds.metadata, uid: "ds-1", resourceVersion: "7", creationTimestamp: new Date(0) };
    return ds;
  };
  const decide = (c: DevicePluginConfig, ds: V1DaemonSet) =>
    decideRollout({
      desired: renderRevision(c, ctx),
      daemonSets: [ds],
      nodes: [
        {
          metadata: { name: "a" },
          status: {
            allocatable: { "hardware-vendor.example/foo": "4" },
            nodeInfo: { kubeletVersion: "v1.37.0" } as never,
          },
        },
      ],
      pods: [],
      reports: [],
      now: NOW,
    } satisfies RolloutInput);

  it("writes nothing when the live template carries the config's annotations and another's", () => {
    const ds = stored(WITH);
    ds.spec!.template.metadata!.annotations!["kubectl.kubernetes.io/restartedAt"] = "2026-11-23T11:00:00Z";
    expect(decide(WITH, ds).writes).toEqual([]);
  });

  it.each<[string, (ds: V1DaemonSet) => void]>([
    ["a removed annotation", (ds) => delete ds.spec!.template.metadata!.annotations!["example.com/team"]],
    ["an edited annotation", (ds) => (ds.spec!.template.metadata!.annotations!["example.com/team"] = "x")],
    ["a removed runtimeClassName", (ds) => delete ds.spec!.template.spec!.runtimeClassName],
    [
      "an edited env value",
      (ds) => (ds.spec!.template.spec!.containers[0]!.env!.find((e) => e.name === "TZ")!.value = "x"),
    ],
    ["a removed pull Secret", (ds) => ds.spec!.template.spec!.imagePullSecrets!.pop()],
  ])("puts back %s in one write", (_what, edit) => {
    const ds = stored(WITH);
    const rendered = structuredClone(ds.spec);
    edit(ds);
    const d = decide(WITH, ds);
    expect(d.writes.map((w) => w.kind)).toEqual(["Update"]);
    const put = d.writes[0]!.kind === "Update" ? d.writes[0]!.daemonSet : undefined;
    expect(put?.spec).toEqual(rendered);
  });

  it("starts an upgrade to a new revision when podAnnotations change", () => {
    const changed = withPlugin({ ...ALL_FIELDS, podAnnotations: { "example.com/team": "other" } });
    const d = decide(changed, stored(WITH));
    expect(d.writes.map((w) => w.kind)).toEqual(["Create"]);
    expect(d.status.updateRevision).toBe(pluginRevision(changed, ctx));
    expect(d.status.currentRevision).toBe(pluginRevision(WITH, ctx));
  });
});

describe("v1beta1 → v1alpha1 → v1beta1 keeps the pod fields", () => {
  it("carries them in the conversion annotation and restores them", () => {
    const beta = input({ plugin: ALL_FIELDS });
    const alpha = toV1alpha1(beta);
    expect(JSON.parse(alpha.metadata.annotations![LOST_FIELDS_ANNOTATION]!)).toEqual({
      spec: { plugin: ALL_FIELDS },
    });
    const back = toV1beta1(alpha);
    if (!back.ok) throw new Error(back.error);
    expect(back.warnings).toEqual([]);
    expect(back.value).toStrictEqual(beta);
  });
});
