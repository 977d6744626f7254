// Reads the API server's JSON audit log (a cluster started with `auditPolicy`): when requests arrived and
// when they were answered, as the server timed them, with microseconds.

/** An audit policy with these rules, then one that logs nothing else. */
function auditPolicy(...rules: string[]): string {
  return `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
${rules.join("")}  - level: None
`;
}

const STATUS_WRITES_RULE = `  - level: Metadata
    verbs: [update, patch]
    resources:
      - group: dpo.dev
        resources: [devicepluginconfigs/status]
`;

/**
 * An audit policy that logs the DevicePluginConfig status writes and nothing else: their spacing is then timed
 * where they arrive, not where a watch delivers their events (a loaded machine delays some deliveries more
 * than others). bench-operator runs with it.
 */
export const AUDIT_STATUS_WRITES = auditPolicy(STATUS_WRITES_RULE);

/**
 * The cluster tier's policy: the status writes of AUDIT_STATUS_WRITES, and every write of the operator's
 * ServiceAccount (any resource, the Lease included), so test/e2e/leader-fence.test.ts can tell from the
 * server's own record which replica wrote what, and when. Replicas share the ServiceAccount; each has its
 * own token, whose id the audit event carries (AuditedRequest.credentialId).
 */
export const AUDIT_CLUSTER_TIER = auditPolicy(
  STATUS_WRITES_RULE,
  `  - level: Metadata
    users: ["system:serviceaccount:dpo-system:dpo-operator"]
    verbs: [create, update, patch, delete, deletecollection]
`,
);

/** The verbs that change something; the rest (get, list, watch) only read. */
export const WRITE_VERBS: ReadonlySet<string> = new Set([
  "create",
  "update",
  "patch",
  "delete",
  "deletecollection",
]);

export interface AuditedRequest {
  verb: string;
  user: string;
  /**
   * Which credential authenticated the request: "JTI=<token id>" for a ServiceAccount token, so two
   * processes with tokens of one ServiceAccount are told apart; undefined when the server gave none.
   */
  credentialId: string | undefined;
  resource: string;
  namespace: string | undefined;
  subresource: string | undefined;
  name: string | undefined;
  code: number | undefined;
  /** A dry run (`dryRun=All`): the server checked the request and stored nothing. */
  dryRun: boolean;
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

/** The user extra where the API server names the credential (a token's JTI) since Kubernetes 1.30. */
const CREDENTIAL_ID = "authentication.kubernetes.io/credential-id";

/** The ResponseComplete lines of an audit log; other stages and lines that are not events are skipped. */
export function parseAuditLog(text: string): AuditedRequest[] {
  const requests: AuditedRequest[] = [];
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    let event: {
      kind?: string;
      stage?: string;
      verb?: string;
      requestURI?: string;
      user?: { username?: string; extra?: Record<string, string[]> };
      objectRef?: { resource?: string; subresource?: string; name?: string; namespace?: string };
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
      credentialId: event.user?.extra?.[CREDENTIAL_ID]?.[0],
      resource: event.objectRef?.resource ?? "",
      namespace: event.objectRef?.namespace,
      subresource: event.objectRef?.subresource,
      name: event.objectRef?.name,
      code: event.responseStatus?.code,
      dryRun: /[?&]dryRun=All(&|$)/.test(event.requestURI ?? ""),
      receivedMs: parseMicroTime(event.requestReceivedTimestamp),
      stageMs: parseMicroTime(event.stageTimestamp),
    });
  }
  return requests;
}
