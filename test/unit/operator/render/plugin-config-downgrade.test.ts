// The plugin ConfigMap this operator writes is read by the previous release's plugin, taken from git history.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { toV1beta1 } from "../../../../src/api/conversion/index.js";
import {
  loadDevicePluginConfig,
  parseManifestDocuments,
  validateAnyVersion,
  validateDevicePluginConfig,
  type ValidationResult,
} from "../../../../src/api/validate.js";
import type { DevicePluginConfig } from "../../../../src/api/v1beta1/config.js";
import { PLUGIN_CONFIG_KEY } from "../../../../src/contract/plugin-config.js";
import { renderPluginConfigData } from "../../../../src/operator/render/configmap.js";

/**
 * dpo 0.1.0, the previous minor release. It has no git tag: this is the commit whose CHANGELOG.md first has
 * the heading `## [0.1.0] - 2026-11-27` (make release and make version), with nothing under Unreleased yet.
 */
const PREVIOUS_RELEASE = { version: "0.1.0", commit: "dc85f72a3c117a65f3d3a977972740bd8c20d42b" };

/**
 * Configs the previous release's plugin must refuse, and the field it names: time-slicing with publish DRA
 * came after it, and a plugin that dropped the sharing would hand one device to one claim only; so did MIG
 * (ADR 0007), and a plugin that dropped `mig` would offer no MIG device but its GPUs, unhealthy.
 */
const DEVFS_GROUP_FIELDS = ["groupBy", "pciVendor", "sysfsRoot"].map((f) => `spec.backend.devFS.${f}`);
const NEEDS_NEWER_PLUGIN: Record<string, string | string[]> = {
  "test/fixtures/valid/mock-dra-timeslicing.yaml": "spec.sharing.strategy",
  "test/fixtures/valid-v1alpha1/mock-dra-shared.yaml": "spec.sharing.strategy",
  "config/samples/nvidia-mig-1g-10gb.yaml": "spec.backend.nvidia.mig",
  // The kernel log read from /dev/kmsg without a dmesg binary came after it too.
  "config/samples/nvidia-gpu.yaml": "spec.backend.nvidia.kmsgPath",
  "test/fixtures/valid/nvidia-mig-mixed.yaml": "spec.backend.nvidia.mig",
  // DevFS device groups and the PCI driver and physical-function selectors (ADR 0010).
  "config/samples/amd-instinct-gpu.yaml": [
    ...DEVFS_GROUP_FIELDS.slice(0, 2),
    "spec.backend.devFS.sharedPaths",
    DEVFS_GROUP_FIELDS[2]!,
  ],
  "config/samples/intel-data-center-gpu.yaml": DEVFS_GROUP_FIELDS,
  "config/samples/xilinx-alveo-fpga.yaml": DEVFS_GROUP_FIELDS,
  "config/samples/sriov-nic-vfs.yaml": ["spec.backend.pci.drivers", "spec.backend.pci.physicalFunctions"],
};

const REPO = join(import.meta.dirname, "..", "..", "..", "..");
const SOURCES = ["config/samples", "test/fixtures/valid", "test/fixtures/valid-v1alpha1"];

type Loader = (text: string) => ValidationResult<{ metadata: object; spec: Record<string, unknown> }>;

/**
 * The previous release's src/api (its schemas import only zod, yaml and each other), extracted under
 * .local/ where this repository's node_modules resolve; once per commit, renamed into place when whole.
 */
async function previousReleaseLoader(): Promise<Loader> {
  const dir = join(REPO, ".local", "old-api", PREVIOUS_RELEASE.commit);
  const validate = join(dir, "src", "api", "validate.ts");
  if (!existsSync(validate)) {
    const partial = `${dir}.partial-${process.pid}`;
    rmSync(partial, { recursive: true, force: true });
    mkdirSync(partial, { recursive: true });
    try {
      execFileSync("sh", [
        "-c",
        `git -C "$0" archive "$1" src/api | tar -x -C "$2"`,
        REPO,
        PREVIOUS_RELEASE.commit,
        partial,
      ]);
    } catch (err) {
      throw new Error(
        `cannot extract src/api of dpo ${PREVIOUS_RELEASE.version} (${PREVIOUS_RELEASE.commit}); a shallow clone lacks it: git fetch --unshallow`,
        { cause: err },
      );
    }
    rmSync(dir, { recursive: true, force: true });
    renameSync(partial, dir);
  }
  const mod = (await import(pathToFileURL(validate).href)) as { loadDevicePluginConfig: Loader };
  return mod.loadDevicePluginConfig;
}

/** Every config of the samples and valid fixtures, as the operator holds it after the API server stored it. */
function storedConfigs(): { name: string; config: DevicePluginConfig }[] {
  const out: { name: string; config: DevicePluginConfig }[] = [];
  for (const source of SOURCES) {
    for (const file of readdirSync(join(REPO, source))
      .filter((f) => f.endsWith(".yaml"))
      .sort()) {
      if (file === "kustomization.yaml") continue;
      const name = `${source}/${file}`;
      for (const doc of parseManifestDocuments(readFileSync(join(REPO, name), "utf8"))) {
        if (!doc.ok) throw new Error(`${name}: ${doc.error}`);
        const any = validateAnyVersion(doc.value);
        if (!any.ok) throw new Error(`${name}: ${JSON.stringify(any.errors)}`);
        const beta =
          any.apiVersion === "dpo.dev/v1beta1"
            ? { ok: true as const, value: any.value }
            : toV1beta1(any.value);
        if (!beta.ok) throw new Error(`${name}: ${beta.problem}`);
        const stored = validateDevicePluginConfig({
          ...beta.value,
          metadata: { ...beta.value.metadata, uid: "uid-1" },
        });
        if (!stored.ok) throw new Error(`${name}: ${JSON.stringify(stored.errors)}`);
        out.push({ name, config: stored.value });
      }
    }
  }
  return out;
}

describe(`the plugin ConfigMap read by the plugin of dpo ${PREVIOUS_RELEASE.version}`, () => {
  let previousLoader: Loader;
  beforeAll(async () => {
    previousLoader = await previousReleaseLoader();
  }, 60_000);

  const configs = storedConfigs();

  it("covers every sample and valid fixture of both API versions", () => {
    expect(configs.length).toBeGreaterThanOrEqual(20);
    expect(configs.some((c) => c.name.startsWith("test/fixtures/valid-v1alpha1/"))).toBe(true);
    expect(configs.map((c) => c.name)).toEqual(expect.arrayContaining(Object.keys(NEEDS_NEWER_PLUGIN)));
  });

  it.each(configs.filter((c) => NEEDS_NEWER_PLUGIN[c.name] === undefined))(
    "$name: read, with the spec today's plugin reads",
    ({ config }) => {
      const text = renderPluginConfigData(config)[PLUGIN_CONFIG_KEY]!;
      const old = previousLoader(text);
      if (!old.ok)
        throw new Error(
          `the ${PREVIOUS_RELEASE.version} plugin refuses it: ${JSON.stringify(old.errors)}\n${text}`,
        );
      const today = loadDevicePluginConfig(text);
      if (!today.ok) throw new Error(JSON.stringify(today.errors));
      // Both readers default spec.upgrade, and today's spec.priority and spec.nodeLabels, which no plugin reads.
      const { upgrade: _oldUpgrade, ...oldSpec } = old.value.spec;
      const {
        upgrade: _upgrade,
        priority: _priority,
        nodeLabels: _nodeLabels,
        ...todaySpec
      } = today.value.spec;
      expect(oldSpec).toEqual(todaySpec);
      expect(old.value.metadata).toEqual({ name: config.metadata.name, uid: "uid-1" });
    },
  );

  it.each(configs.filter((c) => NEEDS_NEWER_PLUGIN[c.name] !== undefined))(
    "$name: refused, naming the field that plugin cannot serve",
    ({ name, config }) => {
      const old = previousLoader(renderPluginConfigData(config)[PLUGIN_CONFIG_KEY]!);
      expect(old.ok).toBe(false);
      if (old.ok) return;
      expect(old.errors.map((e) => e.path)).toEqual([NEEDS_NEWER_PLUGIN[name]].flat());
    },
  );
});
