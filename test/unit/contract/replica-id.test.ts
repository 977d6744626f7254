// The grammar of time-sliced device ids, `<physical>::<k>`, read back.
import { describe, expect, it } from "vitest";
import { parseAdvertisedId, physicalIdOf } from "../../../src/contract/replica-id.js";

describe("parseAdvertisedId / physicalIdOf", () => {
  it.each([
    { id: "foo-0::3", physicalId: "foo-0", replica: 3 },
    { id: "foo-10::0", physicalId: "foo-10", replica: 0 },
    { id: "0000:3b:00.0::1", physicalId: "0000:3b:00.0", replica: 1 },
    { id: "0000:3b:00.0", physicalId: "0000:3b:00.0", replica: undefined },
    { id: "ttyUSB0", physicalId: "ttyUSB0", replica: undefined },
    { id: "a::b::2", physicalId: "a::b", replica: 2 },
    { id: "foo::x", physicalId: "foo::x", replica: undefined },
    { id: "foo::", physicalId: "foo::", replica: undefined },
    { id: "::3", physicalId: "::3", replica: undefined },
    { id: "foo::01", physicalId: "foo::01", replica: undefined },
    { id: "foo::12345678901234567890", physicalId: "foo::12345678901234567890", replica: undefined },
  ])("$id -> $physicalId replica $replica", ({ id, physicalId, replica }) => {
    expect(parseAdvertisedId(id)).toEqual({ physicalId, replica });
    expect(physicalIdOf(id)).toBe(physicalId);
  });
});
