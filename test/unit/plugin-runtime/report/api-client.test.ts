// The plugin's small API client against a local TLS server: kubeconfig and in-cluster credentials, auth, typed errors.
import { writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import {
  ApiClient,
  ApiError,
  inClusterCredentials,
  KubeconfigError,
  loadKubeconfig,
  type ApiCredentials,
} from "../../../../src/plugin-runtime/report/api-client.js";
import { waitFor } from "../../../../tools/cluster/wait.js";
import {
  type Pki,
  makePki,
  type Seen,
  type Handler,
  json,
  serveTls,
  status,
  stopTls,
} from "./api-client-support.js";

let pki: Pki;
let server: Server;
let serverUrl: string;
let handler: Handler;
const seen: Seen[] = [];

beforeAll(async () => {
  pki = makePki();
  server = await serveTls(pki, seen, (req, res, body) => handler(req, res, body));
  serverUrl = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(() => {
  seen.length = 0;
});

afterAll(() => stopTls(server, pki));

function writeKubeconfig(
  name: string,
  user: Record<string, unknown>,
  cluster: Record<string, unknown>,
): string {
  const path = join(pki.dir, name);
  writeFileSync(
    path,
    stringify({
      apiVersion: "v1",
      kind: "Config",
      "current-context": "ctx",
      contexts: [
        { name: "other", context: { cluster: "nowhere", user: "nobody" } },
        { name: "ctx", context: { cluster: "c", user: "u" } },
      ],
      clusters: [
        { name: "nowhere", cluster: { server: "https://192.0.2.1:6443" } },
        { name: "c", cluster: { server: serverUrl, ...cluster } },
      ],
      users: [
        { name: "nobody", user: { token: "wrong" } },
        { name: "u", user },
      ],
    }),
  );
  return path;
}

describe("loadKubeconfig", () => {
  it("reads inline data and files relative to the kubeconfig to the same credentials", async () => {
    const inline = await loadKubeconfig(
      writeKubeconfig(
        "inline.yaml",
        {
          "client-certificate-data": pki.clientCert.toString("base64"),
          "client-key-data": pki.clientKey.toString("base64"),
        },
        { "certificate-authority-data": pki.ca.toString("base64") },
      ),
    );
    const files = await loadKubeconfig(
      writeKubeconfig(
        "files.yaml",
        { "client-certificate": "client.crt", "client-key": join(pki.dir, "client.key") },
        { "certificate-authority": "ca.crt" },
      ),
    );
    for (const credentials of [inline, files]) {
      expect(credentials.server).toBe(serverUrl);
      expect(credentials.ca?.equals(pki.ca)).toBe(true);
      expect(credentials.clientCertificate?.equals(pki.clientCert)).toBe(true);
      expect(credentials.clientKey?.equals(pki.clientKey)).toBe(true);
      expect(credentials.insecureSkipTLSVerify).toBe(false);
    }
  });

  it("reads a token, a token file and insecure-skip-tls-verify", async () => {
    const withToken = await loadKubeconfig(
      writeKubeconfig("token.yaml", { token: "abc" }, { "insecure-skip-tls-verify": true }),
    );
    expect(withToken).toMatchObject({ token: "abc", insecureSkipTLSVerify: true });
    const withFile = await loadKubeconfig(writeKubeconfig("tokenfile.yaml", { tokenFile: "sa-token" }, {}));
    expect(withFile.tokenFile).toBe(join(pki.dir, "sa-token"));
  });

  it.each([
    { what: "exec plugins", user: { exec: { command: "aws" } }, cluster: {}, message: /uses exec/ },
    {
      what: "a certificate without a key",
      user: { "client-certificate": "client.crt" },
      cluster: {},
      message: /both/,
    },
    {
      what: "a missing CA file",
      user: {},
      cluster: { "certificate-authority": "nope.crt" },
      message: /nope\.crt/,
    },
  ])("refuses $what, naming the file", async ({ user, cluster, message }) => {
    const path = writeKubeconfig("bad.yaml", user, cluster);
    const error = await loadKubeconfig(path).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KubeconfigError);
    expect((error as Error).message).toContain(path);
    expect((error as Error).message).toMatch(message);
  });

  it("refuses a kubeconfig without a current context", async () => {
    const path = join(pki.dir, "empty.yaml");
    writeFileSync(path, "apiVersion: v1\nkind: Config\n");
    await expect(loadKubeconfig(path)).rejects.toThrow(/no current-context/);
  });
});

describe("inClusterCredentials", () => {
  it("is undefined outside a pod", async () => {
    expect(await inClusterCredentials({}, pki.dir)).toBeUndefined();
  });

  it.each([
    { host: "10.96.0.1", want: "https://10.96.0.1:443" },
    { host: "fd00::1", want: "https://[fd00::1]:443" },
  ])("uses the service address $host, the CA and the token file", async ({ host, want }) => {
    writeFileSync(join(pki.dir, "ca.crt"), pki.ca);
    const credentials = await inClusterCredentials(
      { KUBERNETES_SERVICE_HOST: host, KUBERNETES_SERVICE_PORT: "443" },
      pki.dir,
    );
    expect(credentials?.server).toBe(want);
    expect(credentials?.ca?.equals(pki.ca)).toBe(true);
    expect(credentials?.tokenFile).toBe(join(pki.dir, "token"));
  });
});

interface ErrorCase {
  what: string;
  code: number;
  body: object | string;
  headers: Record<string, string>;
  want: Partial<Pick<ApiError, "code" | "reason" | "transient" | "retryAfterSeconds">>;
  message: string;
}

describe("ApiClient", () => {
  const trusted = (): ApiCredentials => ({ server: serverUrl, ca: pki.ca });

  it("sends JSON with the content type asked for, authenticates with a client certificate and parses the answer", async () => {
    handler = (_req, res) => json(res, 201, { kind: "DeviceNodeState", metadata: { name: "x" } });
    const client = new ApiClient({
      ...trusted(),
      clientCertificate: pki.clientCert,
      clientKey: pki.clientKey,
    });
    const answer = await client.request({
      method: "PATCH",
      path: "/apis/dpo.dev/v1beta1/namespaces/ns/devicenodestates/x?fieldManager=dpo-plugin&force=true",
      body: { spec: { nodeName: "n" } },
      contentType: "application/apply-patch+yaml",
    });
    client.close();
    expect(answer).toEqual({ kind: "DeviceNodeState", metadata: { name: "x" } });
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({
      method: "PATCH",
      url: "/apis/dpo.dev/v1beta1/namespaces/ns/devicenodestates/x?fieldManager=dpo-plugin&force=true",
      body: JSON.stringify({ spec: { nodeName: "n" } }),
      clientCN: "system:serviceaccount:dpo:plugin",
    });
    expect(seen[0]?.headers["content-type"]).toBe("application/apply-patch+yaml");
    expect(seen[0]?.headers["authorization"]).toBeUndefined();
  });

  it("re-reads a token file after the refresh interval and at once after a 401", async () => {
    const tokenFile = join(pki.dir, "rotating-token");
    writeFileSync(tokenFile, "token-1\n");
    let refuse = false;
    handler = (_req, res) =>
      refuse ? json(res, 401, status(401, "Unauthorized", "Unauthorized")) : json(res, 200, {});
    const client = new ApiClient({ ...trusted(), tokenFile }, { tokenRefreshMs: 60_000 });
    await client.request({ method: "GET", path: "/api" });
    writeFileSync(tokenFile, "token-2\n");
    await client.request({ method: "GET", path: "/api" });
    refuse = true;
    const error = await client.request({ method: "GET", path: "/api" }).catch((e: unknown) => e);
    refuse = false;
    await client.request({ method: "GET", path: "/api" });
    client.close();
    expect(seen.map((s) => s.headers["authorization"])).toEqual([
      "Bearer token-1",
      "Bearer token-1",
      "Bearer token-1",
      "Bearer token-2",
    ]);
    expect(error).toMatchObject({ code: 401, reason: "Unauthorized" });

    const quick = new ApiClient({ ...trusted(), tokenFile }, { tokenRefreshMs: 0 });
    await quick.request({ method: "GET", path: "/api" });
    writeFileSync(tokenFile, "token-3\n");
    await quick.request({ method: "GET", path: "/api" });
    quick.close();
    expect(seen.slice(-2).map((s) => s.headers["authorization"])).toEqual([
      "Bearer token-2",
      "Bearer token-3",
    ]);
  });

  it.each<ErrorCase>([
    {
      what: "403 Forbidden",
      code: 403,
      body: status(403, "Forbidden", 'devicenodestates.dpo.dev "x" is forbidden: User "u" cannot patch'),
      headers: {},
      want: { code: 403, reason: "Forbidden", transient: false, retryAfterSeconds: undefined },
      message: 'devicenodestates.dpo.dev "x" is forbidden: User "u" cannot patch',
    },
    {
      what: "404 without a Status body",
      code: 404,
      body: "404 page not found",
      headers: {},
      want: { code: 404, reason: "HTTP404", transient: false },
      message: "404 page not found",
    },
    {
      what: "429 with Retry-After",
      code: 429,
      body: status(429, "TooManyRequests", "slow down"),
      headers: { "Retry-After": "3" },
      want: { code: 429, reason: "TooManyRequests", transient: true, retryAfterSeconds: 3 },
      message: "slow down",
    },
    {
      what: "503",
      code: 503,
      body: status(503, "ServiceUnavailable", "etcd is away", { details: { retryAfterSeconds: 1 } }),
      headers: {},
      want: { code: 503, reason: "ServiceUnavailable", transient: true, retryAfterSeconds: 1 },
      message: "etcd is away",
    },
  ])(
    "turns $what into an ApiError with the server's message",
    async ({ code, body, headers, want, message }) => {
      handler = (_req, res) => {
        if (typeof body === "string") {
          res.writeHead(code, { "Content-Type": "text/plain" });
          res.end(body);
        } else {
          json(res, code, body, headers);
        }
      };
      const client = new ApiClient(trusted());
      const error = await client.request({ method: "GET", path: "/x" }).catch((e: unknown) => e);
      client.close();
      expect(error).toBeInstanceOf(ApiError);
      expect(error).toMatchObject(want);
      expect((error as ApiError).message).toBe(message);
    },
  );

  it("refuses a server its CA did not sign, unless told to skip verification", async () => {
    handler = (_req, res) => json(res, 200, { ok: true });
    const wrongCa = new ApiClient({ server: serverUrl, ca: pki.otherCa });
    const error = await wrongCa.request({ method: "GET", path: "/x" }).catch((e: unknown) => e);
    wrongCa.close();
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ code: 0, transient: true });
    expect(seen).toHaveLength(0);

    const insecure = new ApiClient({ server: serverUrl, ca: pki.otherCa, insecureSkipTLSVerify: true });
    expect(await insecure.request({ method: "GET", path: "/x" })).toEqual({ ok: true });
    insecure.close();
  });

  it("gives up on a server that does not answer within the timeout", async () => {
    handler = () => undefined;
    const client = new ApiClient(trusted(), { timeoutMs: 200 });
    // The request must end by itself; 5 s is a deadline for that, not a measure of the 200 ms timeout.
    const answered = client.request({ method: "GET", path: "/slow" }).catch((e: unknown) => e);
    const error = await waitFor("the request to give up", () => answered.then((e) => ({ e })), {
      timeoutMs: 5_000,
    });
    client.close();
    expect(error.e).toMatchObject({ code: 0, reason: "Timeout", transient: true });
    server.closeAllConnections();
  });

  it("stops at once when aborted", async () => {
    handler = () => undefined;
    const client = new ApiClient(trusted(), { timeoutMs: 30_000 });
    const abort = new AbortController();
    const pending = client
      .request({ method: "GET", path: "/slow", signal: abort.signal })
      .catch((e: unknown) => e);
    setTimeout(() => abort.abort(), 50);
    const error = await pending;
    client.close();
    expect(error).toMatchObject({ code: 0, reason: "Aborted" });
    server.closeAllConnections();
  });

  it("reports a refused connection as a transient error", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const client = new ApiClient({ server: `https://127.0.0.1:${port}`, ca: pki.ca });
    const error = await client.request({ method: "GET", path: "/x" }).catch((e: unknown) => e);
    client.close();
    expect(error).toMatchObject({ code: 0, reason: "ECONNREFUSED", transient: true });
  });
});
