import { describe, expect, it } from "vitest";
import {
  nodeKeys,
  parseNodeRecordText,
  serializeNodeRecord,
  standbyWanted,
  type NodeRecord,
} from "../../../src/contract/node-upgrade.js";

const key = nodeKeys("gpus").upgrade;
const text = (record: object) => JSON.stringify(record);

describe("standbyWanted", () => {
  const cases: { name: string; annotations?: Record<string, string>; revision?: string; want: boolean }[] = [
    { name: "no annotations", want: false, revision: "r2" },
    { name: "no record for the config", annotations: { other: "x" }, revision: "r2", want: false },
    {
      name: "a standby record for this revision",
      annotations: { [key]: text({ from: "r1", to: "r2", standby: true }) },
      revision: "r2",
      want: true,
    },
    {
      name: "a record without standby (a surge, or a Replace that stops the old plugin first)",
      annotations: { [key]: text({ from: "r1", to: "r2", fencedAt: 5 }) },
      revision: "r2",
      want: false,
    },
    {
      name: "a standby record of another upgrade: the old plugin coming back in a rollback registers",
      annotations: { [key]: text({ from: "r1", to: "r2", standby: true }) },
      revision: "r1",
      want: false,
    },
    {
      name: "standby not exactly true",
      annotations: { [key]: text({ from: "r1", to: "r2", standby: "true" }) },
      revision: "r2",
      want: false,
    },
    { name: "unreadable record", annotations: { [key]: "{not json" }, revision: "r2", want: false },
    {
      name: "a plugin run without a revision",
      annotations: { [key]: text({ from: "r1", to: "r2", standby: true }) },
      want: false,
    },
    {
      name: "another config's record",
      annotations: { [nodeKeys("nics").upgrade]: text({ from: "r1", to: "r2", standby: true }) },
      revision: "r2",
      want: false,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      expect(standbyWanted(c.annotations, "gpus", c.revision)).toBe(c.want);
    });
  }
});

describe("node record text", () => {
  it("round-trips every field, standby included, in a fixed key order", () => {
    const record: NodeRecord = {
      from: "a",
      to: "b",
      startedAt: 1,
      baseline: 4,
      failed: true,
      fencedAt: 2,
      standby: true,
    };
    const serialized = serializeNodeRecord(record);
    expect(parseNodeRecordText(serialized)).toEqual(record);
    expect(serializeNodeRecord({ standby: true, to: "b", from: "a" })).toBe(
      '{"from":"a","to":"b","standby":true}',
    );
  });

  it("drops fields of the wrong type and refuses a record without its revisions", () => {
    expect(parseNodeRecordText(text({ from: "a", to: "b", startedAt: "1", standby: 1 }))).toEqual({
      from: "a",
      to: "b",
    });
    expect(parseNodeRecordText(text({ from: "a" }))).toBeUndefined();
    expect(parseNodeRecordText("null")).toBeUndefined();
    expect(parseNodeRecordText(undefined)).toBeUndefined();
  });
});
