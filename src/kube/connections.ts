// One keep-alive connection pool per API server for everything a KubeConfig sends, typed clients included.
import type { KubeConfig } from "@kubernetes/client-node";
import { createHash } from "node:crypto";
import { Agent } from "undici";

interface Dispatcher {
  close(): Promise<void>;
  compose(interceptor: (dispatch: Dispatch) => Dispatch): Dispatcher;
}
type Dispatch = (options: object, handler: unknown) => boolean;

/**
 * Every request as HTTP/1.1. undici (client-node 2's HTTP client) offers HTTP/2 and the API server takes
 * it, and undici's HTTP/2 client can leave requests unanswered, with no error, after a connection reset
 * (reproduced with test/cluster/fault-proxy.ts: every worker stuck within seconds; over HTTP/1.1 each
 * reset is an error the caller retries). The API server's watches and requests work the same either
 * way; keep-alive still saves the handshakes. client-go's HTTP/2 needs PING health checks for the same
 * reason, and undici's only ping every 60 s with no deadline.
 */
const HTTP1_ONLY =
  (dispatch: Dispatch): Dispatch =>
  (options, handler) =>
    dispatch({ ...options, allowH2: false }, handler);
type CreateDispatcher = (cluster: unknown, agentOptions: unknown) => Dispatcher | undefined;
interface DispatcherFactory {
  createDispatcher?: unknown;
  createDispatcherOptions(cluster: unknown, agentOptions: unknown): unknown;
}

/**
 * How long an idle connection stays open. undici's default is 4 s, so a connection that rests between two
 * Lease renewals or resyncs is closed and the next request pays a handshake; the API server closes idle
 * HTTP/1.1 connections after 90 s (k8s.io/apiserver secure_serving.go), client-go's transport after 90 s.
 * Longer than the operator's once-a-minute checks (the webhook certificate's two GETs, which take a second
 * connection beside the Lease renewals': with 60 s it was closed just as the next check came, one
 * handshake a minute), and below the server's by a margin, so the client closes first and never sends
 * into a connection the server is closing.
 */
export const API_KEEP_ALIVE_MS = 80_000;

/** The Agent client-node would build for a direct TLS connection, with dpo's keep-alive; others as it builds them. */
function buildDispatcher(
  options: unknown,
  build: () => Dispatcher | undefined,
  keepAliveMs: number,
): Dispatcher | undefined {
  const direct = options as { type?: string; connect?: Record<string, unknown> } | undefined;
  if (direct?.type !== "agent" || direct.connect === undefined) return build();
  const agent = new Agent({
    connect: direct.connect,
    keepAliveTimeout: keepAliveMs,
    keepAliveMaxTimeout: keepAliveMs,
  });
  return agent as unknown as Dispatcher; // the structural subset used here
}

/**
 * client-node 2 builds a new undici Agent, and so a new TCP and TLS connection, for every request: its
 * keep-alive never gets to keep anything, and every Lease renewal pays a handshake. This makes the
 * KubeConfig reuse one Agent while the TLS material it is built from stays the same, and replace it
 * (closing the old one) when that material changes, e.g. a rotated client certificate. The method is
 * private to client-node, so its presence is checked: a release that renames it fails at start-up.
 */
export function shareConnections(kc: KubeConfig, keepAliveMs = API_KEEP_ALIVE_MS): KubeConfig {
  const factory = kc as unknown as DispatcherFactory;
  if (typeof factory.createDispatcher !== "function") {
    throw new Error("@kubernetes/client-node's KubeConfig has no createDispatcher: check connection reuse");
  }
  const create = (factory.createDispatcher as CreateDispatcher).bind(kc);
  let shared: { key: string; dispatcher: Dispatcher | undefined } | undefined;
  factory.createDispatcher = (cluster: unknown, agentOptions: unknown): Dispatcher | undefined => {
    const options = factory.createDispatcherOptions(cluster, agentOptions);
    const key = createHash("sha256").update(JSON.stringify(options)).digest("hex");
    if (shared?.key === key) return shared.dispatcher;
    void shared?.dispatcher?.close().catch(() => undefined);
    const dispatcher = buildDispatcher(options, () => create(cluster, agentOptions), keepAliveMs);
    shared = { key, dispatcher: dispatcher?.compose(HTTP1_ONLY) };
    return shared.dispatcher;
  };
  return kc;
}
