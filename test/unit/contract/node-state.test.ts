// The name of a DeviceNodeState: pinned, bounded, a valid object name, and one per (config, node) pair.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { deviceNodeStateName, hasCurrentName } from "../../../src/contract/node-state.js";

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

// A valid Kubernetes object name (config names and node names both are one): a DNS subdomain.
const subdomainLabel = fc
  .tuple(
    fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789"),
    fc.stringMatching(/^([-a-z0-9]{0,61}[a-z0-9])?$/),
  )
  .map(([first, rest]) => `${first}${rest}`);
const objectName = fc
  .array(subdomainLabel, { minLength: 1, maxLength: 5 })
  .map((labels) => labels.join(".").slice(0, 253))
  .filter((name) => DNS_SUBDOMAIN.test(name));
type Pair = [config: string, node: string];
/**
 * Two (config, node) pairs, mostly of the kinds that random names would almost never produce and a
 * naive name confuses: the same `<config>-<node>` split at another dash, and long names that share
 * everything the readable part keeps.
 */
const twoPairs: fc.Arbitrary<[Pair, Pair]> = fc.oneof(
  fc.tuple(fc.tuple(objectName, objectName), fc.tuple(objectName, objectName)),
  fc
    .array(fc.stringMatching(/^[a-z0-9](\.?[a-z0-9]){0,4}$/), { minLength: 2, maxLength: 6 })
    .chain((words) =>
      fc.tuple(
        fc.constant(words),
        fc.integer({ min: 1, max: words.length - 1 }),
        fc.integer({ min: 1, max: words.length - 1 }),
      ),
    )
    .map(([words, i, j]): [Pair, Pair] => [
      [words.slice(0, i).join("-"), words.slice(i).join("-")],
      [words.slice(0, j).join("-"), words.slice(j).join("-")],
    ]),
  fc
    .tuple(fc.stringMatching(/^[a-z0-9]{52,70}$/), objectName, objectName)
    .map(([config, n1, n2]): [Pair, Pair] => [
      [config, n1],
      [config, n2],
    ]),
);

describe("deviceNodeStateName", () => {
  // Pinned: the name is how a plugin finds its report again after a restart, and how the operator tells a
  // current report from a superseded one, so a change here is a migration, not a refactoring.
  it.each([
    { config: "example-foo", node: "node-a", want: "example-foo-node-a-1c111f8095" },
    {
      config: "gpu.example.com",
      node: "worker-1.zone-a",
      want: "gpu.example.com-worker-1.zone-a-47b9460cd1",
    },
    { config: "a-b", node: "c", want: "a-b-c-4e84717d75" },
    { config: "a", node: "b-c", want: "a-b-c-b88f83c840" },
  ])("is <config>-<node>-<hash of the pair>: $want", ({ config, node, want }) => {
    expect(deviceNodeStateName(config, node)).toBe(want);
  });

  it.each([
    { what: "a dash moved between config and node", a: ["a-b", "c"], b: ["a", "b-c"] },
    { what: "the dash after a dotted config", a: ["gpu.example-com", "n1"], b: ["gpu.example", "com-n1"] },
    {
      what: "long names sharing the readable head",
      a: ["c".repeat(60), "node-a"],
      b: ["c".repeat(60), "node-b"],
    },
  ])("tells apart pairs that <config>-<node> confuses: $what", ({ a, b }) => {
    expect(`${a[0]}-${a[1]}`.slice(0, 52)).toBe(`${b[0]}-${b[1]}`.slice(0, 52));
    expect(deviceNodeStateName(a[0]!, a[1]!)).not.toBe(deviceNodeStateName(b[0]!, b[1]!));
  });

  it.each([
    { config: "c".repeat(60), node: "node-a", head: "c".repeat(52) },
    {
      config: "example-foo",
      node: `${"n".repeat(50)}.compute.internal.example`,
      head: `example-foo-${"n".repeat(40)}`,
    },
    // Cuts that land just after a '.' or a '-', which must not be left before the hash.
    { config: `${"c".repeat(51)}.x`, node: "node-a", head: "c".repeat(51) },
    { config: "c".repeat(51), node: "node-a", head: "c".repeat(51) },
    { config: `${"c".repeat(46)}.ex`, node: "n", head: `${"c".repeat(46)}.ex-n` },
    {
      config: "example-foo",
      node: `${"ip-10-0-0-1."}${"r".repeat(230)}`,
      head: `example-foo-ip-10-0-0-1.${"r".repeat(28)}`,
    },
  ])("cuts long names to fit 63 characters and stays a valid name: $head", ({ config, node, head }) => {
    const name = deviceNodeStateName(config, node);
    expect(name.length).toBeLessThanOrEqual(63);
    expect(name).toMatch(DNS_SUBDOMAIN);
    expect(name).toMatch(new RegExp(`^${head.replaceAll(".", "\\.")}-[0-9a-f]{10}$`));
    expect(deviceNodeStateName(config, `${node}x`)).not.toBe(name);
  });

  it("never gives two distinct (config, node) pairs of valid names the same valid name", () => {
    fc.assert(
      fc.property(twoPairs, ([a, b]) => {
        fc.pre(a[0] !== b[0] || a[1] !== b[1]);
        const nameA = deviceNodeStateName(a[0], a[1]);
        expect(nameA.length).toBeLessThanOrEqual(63);
        expect(nameA).toMatch(DNS_SUBDOMAIN);
        expect(nameA).not.toBe(deviceNodeStateName(b[0], b[1]));
      }),
      { numRuns: 1000 },
    );
  });

  it("is the same for the same pair, and tells which reports carry it", () => {
    expect(deviceNodeStateName("example-foo", "node-a")).toBe(deviceNodeStateName("example-foo", "node-a"));
    const report = (name: string) => ({ metadata: { name }, spec: { configName: "a", nodeName: "b-c" } });
    expect(hasCurrentName(report(deviceNodeStateName("a", "b-c")))).toBe(true);
    expect(hasCurrentName(report("a-b-c"))).toBe(false);
    expect(hasCurrentName(report(deviceNodeStateName("a-b", "c")))).toBe(false);
  });
});
