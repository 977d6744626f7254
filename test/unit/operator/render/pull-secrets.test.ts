// The plugin pods' image pull Secrets: the operator's --plugin-image-pull-secrets list, parsed and rendered.
import { describe, expect, it } from "vitest";
import { DevicePluginConfigSchema, type DevicePluginConfig } from "../../../../src/api/v1beta1/config.js";
import { OPERATOR_FLAGS } from "../../../../src/cli/operator.js";
import type { RenderContext } from "../../../../src/operator/render/context.js";
import { pluginRevision, renderPluginDaemonSet } from "../../../../src/operator/render/daemonset.js";
import { parseImagePullSecretNames } from "../../../../src/operator/render/pull-secrets.js";

const ctx: RenderContext = {
  namespace: "dpo-system",
  operatorImage: "registry.example/dpo:1.2.3",
  pluginServiceAccount: "dpo-plugin",
  registrationMode: "kubelet",
};

function config(): DevicePluginConfig {
  return DevicePluginConfigSchema.parse({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: "example-foo", uid: "uid-1", generation: 1 },
    spec: { resourceName: "hardware-vendor.example/foo", backend: { type: "Mock", mock: { devices: 4 } } },
  });
}

describe("parseImagePullSecretNames", () => {
  it.each([
    ["empty", "", []],
    ["one", "regcred", ["regcred"]],
    ["several, in order", "b,a,c", ["b", "a", "c"]],
    ["blanks and empty entries ignored", " a , ,b,", ["a", "b"]],
    ["each once", "a,b,a", ["a", "b"]],
    ["dotted names", "registry.example-cred", ["registry.example-cred"]],
  ])("%s", (_what, list, expected) => {
    expect(parseImagePullSecretNames(list, "--plugin-image-pull-secrets")).toEqual(expected);
  });

  it.each([
    ["upper case", "RegCred"],
    ["an underscore", "reg_cred"],
    ["a leading dash", "-regcred"],
    ["a slash", "ns/regcred"],
    ["too long", "a".repeat(254)],
  ])("refuses a name with %s, naming the field and the name", (_what, name) => {
    expect(() => parseImagePullSecretNames(`ok,${name}`, "--plugin-image-pull-secrets")).toThrow(
      `--plugin-image-pull-secrets: '${name}' is not a Secret name`,
    );
  });
});

describe("renderPluginDaemonSet with the operator's plugin image pull Secrets", () => {
  it("gives the plugin pods the Secrets, in order", () => {
    const ds = renderPluginDaemonSet(config(), { ...ctx, pluginImagePullSecrets: ["regcred", "mirror"] });
    expect(ds.spec?.template.spec?.imagePullSecrets).toEqual([{ name: "regcred" }, { name: "mirror" }]);
  });

  it("leaves the field out without any, and the revision as it was without the flag", () => {
    const none = renderPluginDaemonSet(config(), { ...ctx, pluginImagePullSecrets: [] });
    expect(none.spec?.template.spec).not.toHaveProperty("imagePullSecrets");
    expect(renderPluginDaemonSet(config(), ctx).spec?.template.spec).not.toHaveProperty("imagePullSecrets");
    // Upgrading an operator that gains the flag, unset, must not roll every plugin.
    expect(pluginRevision(config(), { ...ctx, pluginImagePullSecrets: [] })).toBe(
      pluginRevision(config(), ctx),
    );
    // Setting it does: the pods must be recreated to pull with the Secrets.
    expect(pluginRevision(config(), { ...ctx, pluginImagePullSecrets: ["regcred"] })).not.toBe(
      pluginRevision(config(), ctx),
    );
  });
});

describe("dpo operator --plugin-image-pull-secrets", () => {
  it("is a flag with an environment fallback and an empty default", () => {
    expect(OPERATOR_FLAGS.find((f) => f.name === "plugin-image-pull-secrets")).toMatchObject({
      env: "DPO_PLUGIN_IMAGE_PULL_SECRETS",
      default: "",
    });
  });
});
