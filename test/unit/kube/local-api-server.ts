// A local HTTP server standing in for the API server in the kube client's unit tests: listening on a free
// loopback port, with a kubeconfig that points at it.
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";

/** Starts `server` on 127.0.0.1 (a free port) and returns a kubeconfig whose current context is it. */
export async function kubeConfigServedBy(server: Server): Promise<KubeConfig> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: "u" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  return kc;
}
