// The plugin's small API client against a local TLS server: kubeconfig and in-cluster credentials, auth, typed errors.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
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

interface Pki {
  dir: string;
  ca: Buffer;
  otherCa: Buffer;
  serverCert: Buffer;
  serverKey: Buffer;
  clientCert: Buffer;
  clientKey: Buffer;
}

function openssl(dir: string, args: string[]): void {
  execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
}

/** A CA, a server certificate for 127.0.0.1 and a client certificate, made fresh for this run. */
function makePki(): Pki {
  const dir = mkdtempSync(join(tmpdir(), "dpo-api-client-"));
  const key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  for (const ca of ["ca", "other-ca"]) {
    openssl(dir, [
      "req",
      "-x509",
      ...key,
      "-keyout",
      `${ca}.key`,
      "-out",
      `${ca}.crt`,
      "-days",
      "1",
      "-subj",
      `/CN=${ca}`,
    ]);
  }
  writeFileSync(
    join(dir, "server.ext"),
    "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
  );
  writeFileSync(join(dir, "client.ext"), "extendedKeyUsage=clientAuth\n");
  for (const [name, cn] of [
    ["server", "localhost"],
    ["client", "system:serviceaccount:dpo:plugin"],
  ] as const) {
    openssl(dir, ["req", ...key, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${cn}`]);
    openssl(dir, [
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      "ca.crt",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      `${name}.crt`,
      "-days",
      "1",
      "-extfile",
      `${name}.ext`,
    ]);
  }
  const read = (file: string): Buffer => readFileSync(join(dir, file));
  return {
    dir,
    ca: read("ca.crt"),
    otherCa: read("other-ca.crt"),
    serverCert: read("server.crt"),
    serverKey: read("server.key"),
    clientCert: read("client.crt"),
    clientKey: read("client.key"),
  };
}

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
  clientCN: string | undefined;
}

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

let pki: Pki;
let server: Server;
let serverUrl: string;
let handler: Handler;
const seen: Seen[] = [];

function json(res: ServerResponse, code: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(code, { "Content-Type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

function status(code: number, reason: string, message: string, extra: object = {}): object {
  return { kind: "Status", apiVersion: "v1", status: "Failure", message, reason, code, ...extra };
}

beforeAll(async () => {
  pki = makePki();
  server = createServer(
    { key: pki.serverKey, cert: pki.serverCert, ca: pki.ca, requestCert: true, rejectUnauthorized: false },
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const socket = req.socket as TLSSocket;
        const peer = socket.authorized ? socket.getPeerCertificate() : undefined;
        const body = Buffer.concat(chunks).toString("utf8");
        seen.push({
          method: req.method ?? "",
          url: req.url ?? "",
          headers: req.headers,
          body,
          clientCN: typeof peer?.subject?.CN === "string" ? peer.subject.CN : undefined,
        });
        handler(req, res, body);
      });
    },
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  serverUrl = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(() => {
  seen.length = 0;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  rmSync(pki.dir, { recursive: true, force: true });
});

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

describe("ApiClient.watch", () => {
  const trusted = (): ApiCredentials => ({ server: serverUrl, ca: pki.ca, token: "watch-token" });
  const slice = (name: string, resourceVersion: string) => ({
    kind: "ResourceSlice",
    metadata: { name, resourceVersion },
  });
  const line = (type: string, object: unknown): string => `${JSON.stringify({ type, object })}\n`;

  it("delivers each event as it arrives, however the stream is cut, and resolves when the server ends it", async () => {
    handler = (_req, res) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      const text =
        line("ADDED", slice("a", "1")) + line("BOOKMARK", slice("", "2")) + line("DELETED", slice("a", "3"));
      // Cut inside the first event and right after a newline: the client must join and split by lines.
      res.write(text.slice(0, 17));
      setTimeout(() => res.write(text.slice(17, text.indexOf("\n") + 1)), 10);
      setTimeout(() => res.end(text.slice(text.indexOf("\n") + 1)), 20);
    };
    const client = new ApiClient(trusted());
    const events: { type: string; name: string; rv: string }[] = [];
    await client.watch<{ metadata: { name: string; resourceVersion: string } }>(
      { path: "/apis/resource.k8s.io/v1/resourceslices?watch=true", silenceTimeoutMs: 5_000 },
      (e) =>
        events.push({ type: e.type, name: e.object.metadata.name, rv: e.object.metadata.resourceVersion }),
    );
    client.close();
    expect(events).toEqual([
      { type: "ADDED", name: "a", rv: "1" },
      { type: "BOOKMARK", name: "", rv: "2" },
      { type: "DELETED", name: "a", rv: "3" },
    ]);
    expect(seen[0]).toMatchObject({
      method: "GET",
      url: "/apis/resource.k8s.io/v1/resourceslices?watch=true",
    });
    expect(seen[0]?.headers["authorization"]).toBe("Bearer watch-token");
  });

  it("runs watches side by side, each on a connection of its own, beside ordinary requests", async () => {
    handler = (req, res) => {
      if (req.url === "/x") {
        json(res, 200, { ok: true });
        return;
      }
      res.writeHead(200, { "Content-Type": "application/json" });
      res.write(line("ADDED", slice(req.url ?? "", "1")));
    };
    const client = new ApiClient(trusted());
    const abort = new AbortController();
    const heard = new Set<string>();
    const watches = ["/w1", "/w2", "/w3"].map((path) =>
      client
        .watch<{ metadata: { name: string } }>(
          { path, silenceTimeoutMs: 30_000, signal: abort.signal },
          (e) => heard.add(e.object.metadata.name),
        )
        .catch((e: unknown) => e),
    );
    await waitFor("an event on every watch", () => heard.size === 3, { timeoutMs: 5_000, intervalMs: 5 });
    expect(await client.request({ method: "GET", path: "/x" })).toEqual({ ok: true });
    abort.abort();
    for (const ended of await Promise.all(watches)) expect(ended).toMatchObject({ reason: "Aborted" });
    client.close();
    server.closeAllConnections();
  });

  it("ends with the Status of an ERROR event, so a 410 Gone is told apart", async () => {
    handler = (_req, res) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.write(line("ADDED", slice("a", "1")));
      res.write(line("ERROR", status(410, "Expired", "too old resource version: 1 (99)")));
    };
    const client = new ApiClient(trusted());
    const types: string[] = [];
    const error = await client
      .watch({ path: "/w", silenceTimeoutMs: 5_000 }, (e) => types.push(e.type))
      .catch((e: unknown) => e);
    client.close();
    server.closeAllConnections();
    expect(types).toEqual(["ADDED"]);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({
      code: 410,
      reason: "Expired",
      message: "too old resource version: 1 (99)",
    });
  });

  it("rejects a refused watch with the API server's Status", async () => {
    handler = (_req, res) => json(res, 410, status(410, "Gone", "resourceVersion 5 is too old"));
    const client = new ApiClient(trusted());
    const error = await client
      .watch({ path: "/w", silenceTimeoutMs: 5_000 }, () => undefined)
      .catch((e: unknown) => e);
    client.close();
    expect(error).toMatchObject({ code: 410, reason: "Gone", message: "resourceVersion 5 is too old" });
  });

  it("gives a stream up after the silence it allows, and stops at once when aborted", async () => {
    handler = (_req, res) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.write(line("ADDED", slice("a", "1")));
    };
    const client = new ApiClient(trusted());
    const started = performance.now();
    const silent = await client
      .watch({ path: "/w", silenceTimeoutMs: 200 }, () => undefined)
      .catch((e: unknown) => e);
    expect(silent).toMatchObject({ code: 0, reason: "Timeout" });
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);

    const abort = new AbortController();
    const events: string[] = [];
    const aborted = client
      .watch({ path: "/w", silenceTimeoutMs: 30_000, signal: abort.signal }, (e) => {
        events.push(e.type);
        abort.abort();
      })
      .catch((e: unknown) => e);
    expect(await aborted).toMatchObject({ code: 0, reason: "Aborted" });
    expect(events).toEqual(["ADDED"]);
    client.close();
    server.closeAllConnections();
  });
});
