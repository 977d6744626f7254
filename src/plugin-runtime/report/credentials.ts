// Where the plugin's API credentials come from: a kubeconfig file, or the pod's own ServiceAccount.
import { readFile } from "node:fs/promises";
import { dirname, isAbsolute, join } from "node:path";
import { record } from "./json.js";

/** Where a pod finds its ServiceAccount token and the cluster CA. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** How to reach and authenticate to one API server. */
export interface ApiCredentials {
  /** `https://host:port` (or `http://` for a local proxy or tests). */
  server: string;
  /** PEM bundle trusted for the server; the system roots when absent. */
  ca?: Buffer;
  insecureSkipTLSVerify?: boolean;
  /** Server name to verify instead of the URL's host. */
  tlsServerName?: string;
  clientCertificate?: Buffer;
  clientKey?: Buffer;
  token?: string;
  /** Read for every request older than TOKEN_REFRESH_MS, so a rotated token is picked up. */
  tokenFile?: string;
}

/** A kubeconfig problem: names the file and what is missing or unsupported. */
export class KubeconfigError extends Error {
  override readonly name = "KubeconfigError";
}

function optionalString(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

function findNamed(list: unknown, name: string, member: string): Record<string, unknown> | undefined {
  if (!Array.isArray(list)) return undefined;
  const entry: unknown = list.find((e) => record(e)["name"] === name);
  return entry === undefined ? undefined : record(record(entry)[member]);
}

/**
 * Credentials of the kubeconfig's current context: server, CA, TLS verification and either a client
 * certificate or a bearer token. Relative file paths are resolved against the kubeconfig's directory,
 * as kubectl does. Exec plugins and auth providers are refused: a node agent must not run commands.
 */
export async function loadKubeconfig(path: string): Promise<ApiCredentials> {
  let doc: Record<string, unknown>;
  try {
    // Loaded here, not with the module: a plugin in a pod uses its service account and never needs it.
    const { parseYaml } = await import("./kubeconfig-yaml.js");
    doc = record(parseYaml(await readFile(path, "utf8")));
  } catch (err) {
    throw new KubeconfigError(`kubeconfig ${path}: ${(err as Error).message}`, { cause: err });
  }
  const contextName = optionalString(doc["current-context"]);
  if (contextName === undefined) throw new KubeconfigError(`kubeconfig ${path}: no current-context`);
  const context = findNamed(doc["contexts"], contextName, "context");
  if (context === undefined) {
    throw new KubeconfigError(`kubeconfig ${path}: context '${contextName}' not found`);
  }
  const clusterName = optionalString(context["cluster"]) ?? "";
  const cluster = findNamed(doc["clusters"], clusterName, "cluster");
  const server = optionalString(cluster?.["server"]);
  if (cluster === undefined || server === undefined) {
    throw new KubeconfigError(`kubeconfig ${path}: cluster '${clusterName}' not found or has no server`);
  }
  const userName = optionalString(context["user"]);
  const user = userName === undefined ? {} : (findNamed(doc["users"], userName, "user") ?? {});
  for (const unsupported of ["exec", "auth-provider"]) {
    if (user[unsupported] !== undefined) {
      throw new KubeconfigError(
        `kubeconfig ${path}: user '${userName ?? ""}' uses ${unsupported}, which dpo plugin does not support; use a token, a token file or a client certificate`,
      );
    }
  }

  const base = dirname(path);
  // `<key>-data` (base64) wins over the file `<key>`, as in kubectl.
  const fileOrData = async (entry: Record<string, unknown>, fileKey: string): Promise<Buffer | undefined> => {
    const data = optionalString(entry[`${fileKey}-data`]);
    if (data !== undefined) return Buffer.from(data, "base64");
    const file = optionalString(entry[fileKey]);
    if (file === undefined) return undefined;
    try {
      return await readFile(isAbsolute(file) ? file : join(base, file));
    } catch (err) {
      throw new KubeconfigError(`kubeconfig ${path}: ${fileKey} ${file}: ${(err as Error).message}`, {
        cause: err,
      });
    }
  };
  const tokenFile = optionalString(user["tokenFile"]);
  const credentials: ApiCredentials = {
    server,
    ca: await fileOrData(cluster, "certificate-authority"),
    insecureSkipTLSVerify: cluster["insecure-skip-tls-verify"] === true,
    tlsServerName: optionalString(cluster["tls-server-name"]),
    clientCertificate: await fileOrData(user, "client-certificate"),
    clientKey: await fileOrData(user, "client-key"),
    token: optionalString(user["token"]),
    tokenFile:
      tokenFile === undefined ? undefined : isAbsolute(tokenFile) ? tokenFile : join(base, tokenFile),
  };
  if ((credentials.clientCertificate === undefined) !== (credentials.clientKey === undefined)) {
    throw new KubeconfigError(
      `kubeconfig ${path}: user '${userName ?? ""}' needs both a client certificate and a client key`,
    );
  }
  return credentials;
}

/**
 * The pod's own credentials, as client-go's rest.InClusterConfig finds them; undefined outside a pod
 * (KUBERNETES_SERVICE_HOST unset).
 */
export async function inClusterCredentials(
  env: Readonly<Record<string, string | undefined>> = process.env,
  serviceAccountDir = SERVICE_ACCOUNT_DIR,
): Promise<ApiCredentials | undefined> {
  const host = env["KUBERNETES_SERVICE_HOST"];
  const port = env["KUBERNETES_SERVICE_PORT"];
  if (host === undefined || host === "" || port === undefined || port === "") return undefined;
  const hostPart = host.includes(":") ? `[${host}]` : host;
  const caPath = join(serviceAccountDir, "ca.crt");
  let ca: Buffer;
  try {
    ca = await readFile(caPath);
  } catch (err) {
    throw new KubeconfigError(`in-cluster: cannot read ${caPath}: ${(err as Error).message}`, { cause: err });
  }
  return { server: `https://${hostPart}:${port}`, ca, tokenFile: join(serviceAccountDir, "token") };
}
