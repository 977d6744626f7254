// fast-check arbitraries of the backend members of a DevicePluginConfig (api-arbitraries.ts builds the
// objects around them), and the field helpers both modules draw with.
import fc from "fast-check";
import { BACKEND_TYPES } from "../../../src/api/v1beta1/spec.js";

import { partial, pick, type Options } from "./arbitrary-basics.js";
import { migMember } from "./mig-arbitraries.js";

export { partial, pick, type Options };

export const absolutePath = (o: Options) =>
  pick(o, fc.constantFrom("/", "/dev", "/run/dpo/health.json"), "dev", "/a/../b");

const mockMember = (o: Options) =>
  fc
    .record(
      {
        devices: pick(o, fc.integer({ min: 1, max: 4096 }), 0, 4097, 1.5),
        idPrefix: pick(o, fc.constantFrom("mock", "foo", "gpu.0"), "Foo", ""),
        numaNodes: pick(o, fc.integer({ min: 0, max: 64 }), -1, 65),
        healthFile: absolutePath(o),
        attributes: fc.dictionary(fc.constantFrom("model", "memory"), fc.constantFrom("X100", "80Gi")),
      },
      { requiredKeys: ["devices"] },
    )
    .chain((m) => {
      // One id per device, each once (a takeover's ids); the invalid ones miscount or repeat.
      const n =
        typeof m.devices === "number" && Number.isInteger(m.devices) && m.devices <= 8 ? m.devices : 0;
      if (n === 0) return fc.constant(m);
      const ids = fc.uniqueArray(
        fc.constantFrom("Dev-1", "Dev-2", "GPU-8f1c", "card0", "a.b_c", "x9", "Y", "z-0", "q"),
        { minLength: n, maxLength: n },
      );
      const bad = o.invalid ? [["Dev-1", "Dev-1"], ["has space"]] : [];
      return fc
        .option(pick(o, ids, ...bad), { nil: undefined })
        .map((i) => (i === undefined ? m : { ...m, ids: i }));
    });

/** v1beta1's DevFS group fields (ADR 0010), kept valid together unless `invalid`. */
const devFSGroupFields = (o: Options) =>
  partial({
    sysfsRoot: absolutePath(o),
    pciVendor: pick(o, fc.constantFrom("1002", "10ee"), "10DE", "1"),
    groupBy: fc.oneof(
      fc.record({ key: fc.constantFrom("SysfsParent" as const, "PCIAddress" as const, "PCISlot" as const) }),
      fc.record({
        key: fc.constant("Pattern" as const),
        pattern: pick(o, fc.constantFrom("accel(\\d+)$", "/dev/fpga/(\\w+)/"), "no-group", "("),
      }),
    ),
    sharedPaths: fc.array(
      fc.record(
        {
          glob: pick(o, fc.constantFrom("/dev/kfd", "/dev/fpga/ctl*"), "dev/kfd"),
          permissions: fc.constantFrom("rw", "r"),
        },
        { requiredKeys: ["glob"] },
      ),
      { maxLength: 2 },
    ),
  });

/** A DevFS member; with `beta`, v1beta1's group fields too, and what they need (sysfsRoot, one slot). */
const devFSMember = (o: Options, beta = false) =>
  fc.tuple(devFSMemberAlpha(o), beta ? devFSGroupFields(o) : fc.constant({})).map(([member, drawn]) => {
    const groups: { groupBy?: { key: string } } = drawn;
    const out: Record<string, unknown> = { ...member, ...groups };
    const needsSysfs =
      "pciVendor" in groups || (groups.groupBy !== undefined && groups.groupBy.key !== "Pattern");
    if (!o.invalid && needsSysfs && out.sysfsRoot === undefined) out.sysfsRoot = "/sys";
    if (!o.invalid && groups.groupBy !== undefined) {
      out.paths = (member.paths as Record<string, unknown>[]).map(
        ({ maxContainersPerDevice: _m, ...p }) => p,
      );
    }
    return out as typeof member;
  });

const devFSMemberAlpha = (o: Options) =>
  fc.record(
    {
      root: absolutePath(o),
      paths: fc.array(
        fc.record(
          {
            glob: pick(o, fc.constantFrom("/dev/ttyUSB*", "/dev/fpga?"), "dev/tty*"),
            type: fc.constantFrom("CharDevice" as const, "BlockDevice" as const, "File" as const),
            permissions: pick(o, fc.constantFrom("rw", "r", "rwm", "m"), "x", "wr"),
            maxContainersPerDevice: pick(o, fc.integer({ min: 1, max: 1024 }), 0),
          },
          { requiredKeys: ["glob"] },
        ),
        { minLength: o.invalid ? 0 : 1, maxLength: 3 },
      ),
    },
    { requiredKeys: ["paths"] },
  );

const pciMember = (o: Options, beta = false) =>
  fc.record(
    {
      vendor: pick(o, fc.constantFrom("10de", "8086"), "10DE", "10d"),
      devices: fc.array(pick(o, fc.constantFrom("20b0", "1eb8"), "XYZ0"), { maxLength: 2 }),
      classPrefix: pick(o, fc.constantFrom("03", "0302"), "3"),
      sysfsRoot: absolutePath(o),
      devRoot: absolutePath(o),
      // v1beta1's selectors; never drawn for v1alpha1, whose schema lacks them.
      ...(beta
        ? {
            drivers: fc.array(pick(o, fc.constantFrom("vfio-pci", "iavf"), "a b"), { maxLength: 2 }),
            physicalFunctions: fc.array(pick(o, fc.constantFrom("0000:3b:00.0"), "3b:00.0"), {
              maxLength: 1,
            }),
          }
        : {}),
    },
    { requiredKeys: ["vendor"] },
  );

const nvidiaMember = (o: Options) =>
  partial({
    nvidiaSmiPath: absolutePath(o),
    devRoot: absolutePath(o),
    sysfsRoot: absolutePath(o),
    pollIntervalSeconds: pick(o, fc.integer({ min: 1, max: 3600 }), 0, 3601),
    timeoutSeconds: pick(o, fc.integer({ min: 1, max: 300 }), 0),
    kmsgPath: absolutePath(o),
    dmesgPath: absolutePath(o),
    ignoredXids: fc.array(pick(o, fc.constantFrom(13, 31, 79), 0, -1), { maxLength: 3 }),
    mig: migMember(o),
  }).map((member) => {
    // A valid member sets kmsgPath or the deprecated dmesgPath, never both.
    if (o.invalid || !("kmsgPath" in member) || !("dmesgPath" in member)) return member;
    const { dmesgPath: _deprecated, ...rest } = member;
    return rest;
  });

export type BackendType = (typeof BACKEND_TYPES)[number];
export const backendType = fc.constantFrom(...BACKEND_TYPES);

/** Which members are set: the one the type names, and with `invalid` sometimes none or an extra one. */
export function members(o: Options, type: BackendType, beta = false) {
  const set = { Mock: false, DevFS: false, PCI: false, NVIDIA: false, [type]: true } as Record<
    BackendType,
    boolean
  >;
  const variants = o.invalid
    ? fc.oneof(
        { arbitrary: fc.constant(set), weight: 6 },
        { arbitrary: fc.constant({ ...set, [type]: false }), weight: 1 },
        { arbitrary: backendType.map((extra) => ({ ...set, [extra]: true })), weight: 1 },
      )
    : fc.constant(set);
  return variants.chain((s) =>
    fc.record({
      mock: s.Mock ? mockMember(o) : fc.constant(undefined),
      devFS: s.DevFS ? devFSMember(o, beta) : fc.constant(undefined),
      pci: s.PCI ? pciMember(o, beta) : fc.constant(undefined),
      nvidia: s.NVIDIA ? nvidiaMember(o) : fc.constant(undefined),
    }),
  );
}
