// fast-check arbitraries of the backend members of a DevicePluginConfig (api-arbitraries.ts builds the
// objects around them), and the field helpers both modules draw with.
import fc from "fast-check";
import { BACKEND_TYPES } from "../../../src/api/v1beta1/spec.js";

export interface Options {
  /** Also draw values the schemas refuse. */
  invalid: boolean;
}

/** A valid value, or about one time in twelve one of the invalid ones when allowed. */
export function pick<T>(o: Options, valid: fc.Arbitrary<T>, ...invalid: T[]): fc.Arbitrary<T> {
  if (!o.invalid || invalid.length === 0) return valid;
  return fc.oneof({ arbitrary: valid, weight: 11 }, { arbitrary: fc.constantFrom(...invalid), weight: 1 });
}

/** A record whose keys are each present or absent. */
export function partial<T extends Record<string, unknown>>(arbs: { [K in keyof T]: fc.Arbitrary<T[K]> }) {
  return fc.record(arbs, { requiredKeys: [] });
}

export const absolutePath = (o: Options) =>
  pick(o, fc.constantFrom("/", "/dev", "/run/dpo/health.json"), "dev", "/a/../b");

const mockMember = (o: Options) =>
  fc.record(
    {
      devices: pick(o, fc.integer({ min: 1, max: 4096 }), 0, 4097, 1.5),
      idPrefix: pick(o, fc.constantFrom("mock", "foo", "gpu.0"), "Foo", ""),
      numaNodes: pick(o, fc.integer({ min: 0, max: 64 }), -1, 65),
      healthFile: absolutePath(o),
      attributes: fc.dictionary(fc.constantFrom("model", "memory"), fc.constantFrom("X100", "80Gi")),
    },
    { requiredKeys: ["devices"] },
  );

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
    dmesgPath: absolutePath(o),
    ignoredXids: fc.array(pick(o, fc.constantFrom(13, 31, 79), 0, -1), { maxLength: 3 }),
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
