// A local TLS API server for the plugin's API client tests: a fresh CA with server and client certificates, the
// requests it saw, and JSON and Status answers.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";

export interface Pki {
  dir: string;
  ca: Buffer;
  otherCa: Buffer;
  serverCert: Buffer;
  serverKey: Buffer;
  clientCert: Buffer;
  clientKey: Buffer;
}

export function openssl(dir: string, args: string[]): void {
  execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
}

/** A CA, a server certificate for 127.0.0.1 and a client certificate, made fresh for this run. */
export function makePki(): Pki {
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

export interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
  clientCN: string | undefined;
}

export type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

export function json(
  res: ServerResponse,
  code: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(code, { "Content-Type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

export function status(code: number, reason: string, message: string, extra: object = {}): object {
  return { kind: "Status", apiVersion: "v1", status: "Failure", message, reason, code, ...extra };
}

/** Serves HTTPS on 127.0.0.1 with `pki`'s server certificate, asking for a client certificate: every request is
 * recorded in `seen`, then answered by `handle`. */
export async function serveTls(pki: Pki, seen: Seen[], handle: Handler): Promise<Server> {
  const server = createServer(
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
        handle(req, res, body);
      });
    },
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return server;
}

export async function stopTls(server: Server, pki: Pki): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  rmSync(pki.dir, { recursive: true, force: true });
}
