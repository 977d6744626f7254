import { describe, expect, it } from "vitest";
import { parseAuditLog, parseMicroTime } from "../../../../tools/cluster/audit.js";

describe("parseMicroTime", () => {
  it.each([
    ["2026-11-25T15:20:01Z", Date.UTC(2026, 10, 25, 15, 20, 1)],
    ["2026-11-25T15:20:01.5Z", Date.UTC(2026, 10, 25, 15, 20, 1) + 500],
    ["2026-11-25T15:20:01.123456Z", Date.UTC(2026, 10, 25, 15, 20, 1) + 123.456],
    ["2026-11-25T15:20:01.000001Z", Date.UTC(2026, 10, 25, 15, 20, 1) + 0.001],
    ["2026-11-25T16:20:01.250+01:00", Date.UTC(2026, 10, 25, 15, 20, 1) + 250],
  ])("%s", (text, want) => {
    expect(parseMicroTime(text)).toBeCloseTo(want, 3);
  });

  it.each(["", "yesterday", "2026-11-25 15:20:01Z", "2026-11-25T15:20:01.Z"])("rejects %j", (text) => {
    expect(() => parseMicroTime(text)).toThrow(/RFC 3339/);
  });
});

describe("parseAuditLog", () => {
  const event = (stage: string, received: string, at: string): string =>
    JSON.stringify({
      kind: "Event",
      apiVersion: "audit.k8s.io/v1",
      level: "Metadata",
      stage,
      verb: "patch",
      user: { username: "system:serviceaccount:dpo-system:dpo-operator" },
      objectRef: { resource: "devicepluginconfigs", subresource: "status", name: "a", apiGroup: "dpo.dev" },
      responseStatus: { code: 200 },
      requestReceivedTimestamp: received,
      stageTimestamp: at,
    });

  it("keeps ResponseComplete events with the server's timings, skips other stages and torn lines", () => {
    const text = [
      event("RequestReceived", "2026-11-25T15:20:01.000100Z", "2026-11-25T15:20:01.000100Z"),
      event("ResponseComplete", "2026-11-25T15:20:01.000100Z", "2026-11-25T15:20:01.004300Z"),
      '{"kind":"Event","stage":"ResponseCompl',
      "",
    ].join("\n");
    const [only, ...rest] = parseAuditLog(text);
    expect(rest).toEqual([]);
    expect(only).toMatchObject({
      verb: "patch",
      user: "system:serviceaccount:dpo-system:dpo-operator",
      resource: "devicepluginconfigs",
      subresource: "status",
      name: "a",
      code: 200,
    });
    expect(only!.stageMs - only!.receivedMs).toBeCloseTo(4.2, 3); // epoch ms as a double: good to a fraction of a microsecond;
    expect(only!.credentialId).toBeUndefined();
  });

  it("names the credential (a token's id) and the namespace, so replicas of one ServiceAccount are told apart", () => {
    const line = JSON.stringify({
      kind: "Event",
      stage: "ResponseComplete",
      verb: "update",
      user: {
        username: "system:serviceaccount:dpo-system:dpo-operator",
        extra: { "authentication.kubernetes.io/credential-id": ["JTI=0b7c5a5e-1"] },
      },
      objectRef: {
        resource: "leases",
        namespace: "dpo-system",
        name: "dpo-operator",
        apiGroup: "coordination.k8s.io",
      },
      responseStatus: { code: 409 },
      requestReceivedTimestamp: "2026-11-25T15:20:01.000100Z",
      stageTimestamp: "2026-11-25T15:20:01.000900Z",
    });
    expect(parseAuditLog(line)).toMatchObject([
      {
        verb: "update",
        resource: "leases",
        namespace: "dpo-system",
        credentialId: "JTI=0b7c5a5e-1",
        code: 409,
      },
    ]);
  });
});
