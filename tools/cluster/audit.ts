// Reads the API server's JSON audit log (a cluster started with `auditPolicy`): when requests arrived and
// when they were answered, as the server timed them, with microseconds.

/**
 * An audit policy that logs the DevicePluginConfig status writes and nothing else: their spacing is then timed
 * where they arrive, not where a watch delivers their events (a loaded machine delays some deliveries more
 * than others). The cluster tier's control plane and bench-operator run with it.
 */
export const AUDIT_STATUS_WRITES = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
  - level: Metadata
    verbs: [update, patch]
    resources:
      - group: dpo.dev
        resources: [devicepluginconfigs/status]
  - level: None
`;

export interface AuditedRequest {
  verb: string;
  user: string;
  resource: string;
  subresource: string | undefined;
  name: string | undefined;
  code: number | undefined;
  /** Milliseconds since the epoch, with the server's microseconds as the fraction. */
  receivedMs: number;
  /** When the stage of this line (ResponseComplete under a policy that omits the others) was reached. */
  stageMs: number;
}

/** An RFC 3339 timestamp with up to nanoseconds, e.g. 2026-11-25T15:20:01.123456Z, in fractional ms. */
export function parseMicroTime(value: string): number {
  const match = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/.exec(value);
  if (match === null) throw new Error(`not an RFC 3339 time: ${JSON.stringify(value)}`);
  const whole = Date.parse(`${match[1]}${match[3]}`);
  if (Number.isNaN(whole)) throw new Error(`not an RFC 3339 time: ${JSON.stringify(value)}`);
  return whole + Number(`0.${match[2] ?? "0"}`) * 1_000;
}

/** The ResponseComplete lines of an audit log; other stages and lines that are not events are skipped. */
export function parseAuditLog(text: string): AuditedRequest[] {
  const requests: AuditedRequest[] = [];
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    let event: {
      kind?: string;
      stage?: string;
      verb?: string;
      user?: { username?: string };
      objectRef?: { resource?: string; subresource?: string; name?: string };
      responseStatus?: { code?: number };
      requestReceivedTimestamp?: string;
      stageTimestamp?: string;
    };
    try {
      event = JSON.parse(line) as typeof event;
    } catch {
      continue; // a line cut short while the server writes it
    }
    if (event.kind !== "Event" || event.stage !== "ResponseComplete") continue;
    if (event.requestReceivedTimestamp === undefined || event.stageTimestamp === undefined) continue;
    requests.push({
      verb: event.verb ?? "",
      user: event.user?.username ?? "",
      resource: event.objectRef?.resource ?? "",
      subresource: event.objectRef?.subresource,
      name: event.objectRef?.name,
      code: event.responseStatus?.code,
      receivedMs: parseMicroTime(event.requestReceivedTimestamp),
      stageMs: parseMicroTime(event.stageTimestamp),
    });
  }
  return requests;
}
