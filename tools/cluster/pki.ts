// Generates the local control plane's CA, serving and client certificates and service-account keys with openssl.
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** Names the API server's certificate must carry: loopback, and the in-cluster service (10.0.0.1). */
export const API_SERVER_SUBJECT_ALT_NAMES = [
  "IP:127.0.0.1",
  "IP:10.0.0.1",
  // The host's end of the real node's veth pair (tools/real-node/config.ts), where the node and its pods
  // reach the server.
  "IP:10.201.0.1",
  "DNS:localhost",
  "DNS:kubernetes",
  "DNS:kubernetes.default",
  "DNS:kubernetes.default.svc",
  "DNS:kubernetes.default.svc.cluster.local",
] as const;

export interface Pki {
  caCert: string;
  caKey: string;
  apiServerCert: string;
  apiServerKey: string;
  adminCert: string;
  adminKey: string;
  serviceAccountKey: string;
  serviceAccountPublicKey: string;
  /** Request-header (front proxy) authentication, as kubeadm sets it up: aggregated APIs and the
   * delegated authentication of the controller manager and scheduler expect it. */
  frontProxyCaCert: string;
  frontProxyCaKey: string;
  frontProxyClientCert: string;
  frontProxyClientKey: string;
  /** The API server's client certificate towards kubelets (logs, exec, port-forward). */
  kubeletClientCert: string;
  kubeletClientKey: string;
}

export const FRONT_PROXY_CLIENT_NAME = "front-proxy-client";

export async function assertOpensslAvailable(): Promise<void> {
  try {
    await run("openssl", ["version"]);
  } catch (error) {
    throw new Error(`openssl is needed to create the cluster's certificates and was not found on PATH`, {
      cause: error,
    });
  }
}

/** Creates every key and certificate under `dir`; P-256 keys keep this well under a second. */
export async function generatePki(dir: string): Promise<Pki> {
  await mkdir(dir, { recursive: true });
  const path = (name: string): string => join(dir, name);
  const pki: Pki = {
    caCert: path("ca.crt"),
    caKey: path("ca.key"),
    apiServerCert: path("apiserver.crt"),
    apiServerKey: path("apiserver.key"),
    adminCert: path("admin.crt"),
    adminKey: path("admin.key"),
    serviceAccountKey: path("sa.key"),
    serviceAccountPublicKey: path("sa.pub"),
    frontProxyCaCert: path("front-proxy-ca.crt"),
    frontProxyCaKey: path("front-proxy-ca.key"),
    frontProxyClientCert: path("front-proxy-client.crt"),
    frontProxyClientKey: path("front-proxy-client.key"),
    kubeletClientCert: path("apiserver-kubelet-client.crt"),
    kubeletClientKey: path("apiserver-kubelet-client.key"),
  };

  await Promise.all([
    newKey(pki.caKey),
    newKey(pki.apiServerKey),
    newKey(pki.adminKey),
    newKey(pki.frontProxyCaKey),
    newKey(pki.frontProxyClientKey),
    newKey(pki.kubeletClientKey),
    newKey(pki.serviceAccountKey).then(() =>
      run("openssl", ["pkey", "-in", pki.serviceAccountKey, "-pubout", "-out", pki.serviceAccountPublicKey]),
    ),
  ]);

  await Promise.all([
    selfSignedCa(pki.caKey, pki.caCert, "/CN=dpo-local-ca"),
    selfSignedCa(pki.frontProxyCaKey, pki.frontProxyCaCert, "/CN=dpo-local-front-proxy-ca"),
  ]);

  await Promise.all([
    signLeaf(dir, pki.caCert, pki.caKey, {
      name: "apiserver",
      key: pki.apiServerKey,
      cert: pki.apiServerCert,
      subject: "/CN=kube-apiserver",
      extensions: [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        "extendedKeyUsage=serverAuth",
        `subjectAltName=${API_SERVER_SUBJECT_ALT_NAMES.join(",")}`,
      ],
    }),
    // system:masters is bound to cluster-admin by the API server's bootstrap policy.
    signLeaf(dir, pki.caCert, pki.caKey, {
      name: "admin",
      key: pki.adminKey,
      cert: pki.adminCert,
      subject: "/O=system:masters/CN=dpo-admin",
      extensions: [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        "extendedKeyUsage=clientAuth",
      ],
    }),
    // A kubelet authorizes the API server's requests by SubjectAccessReview; system:masters passes them.
    signLeaf(dir, pki.caCert, pki.caKey, {
      name: "apiserver-kubelet-client",
      key: pki.kubeletClientKey,
      cert: pki.kubeletClientCert,
      subject: "/O=system:masters/CN=kube-apiserver-kubelet-client",
      extensions: CLIENT_EXTENSIONS,
    }),
    signLeaf(dir, pki.frontProxyCaCert, pki.frontProxyCaKey, {
      name: "front-proxy-client",
      key: pki.frontProxyClientKey,
      cert: pki.frontProxyClientCert,
      subject: `/CN=${FRONT_PROXY_CLIENT_NAME}`,
      extensions: [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        "extendedKeyUsage=clientAuth",
      ],
    }),
  ]);
  return pki;
}

const CLIENT_EXTENSIONS = [
  "basicConstraints=critical,CA:FALSE",
  "keyUsage=critical,digitalSignature,keyEncipherment",
  "extendedKeyUsage=clientAuth",
];

/**
 * A client key and certificate signed by the cluster CA, for a component that joins later (the real node's
 * kubelet, `/O=system:nodes/CN=system:node:<name>`, and kube-proxy). Returns the two paths.
 */
export async function issueClientCertificate(
  pki: Pick<Pki, "caCert" | "caKey">,
  dir: string,
  name: string,
  subject: string,
): Promise<{ cert: string; key: string }> {
  await mkdir(dir, { recursive: true });
  const key = join(dir, `${name}.key`);
  const cert = join(dir, `${name}.crt`);
  await newKey(key);
  await signLeaf(dir, pki.caCert, pki.caKey, { name, key, cert, subject, extensions: CLIENT_EXTENSIONS });
  return { cert, key };
}

async function newKey(out: string): Promise<void> {
  await run("openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", out]);
}

async function selfSignedCa(key: string, cert: string, subject: string): Promise<void> {
  await run("openssl", [
    "req",
    "-x509",
    "-new",
    "-key",
    key,
    "-out",
    cert,
    "-days",
    "3650",
    "-subj",
    subject,
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
  ]);
}

interface LeafRequest {
  name: string;
  key: string;
  cert: string;
  subject: string;
  extensions: string[];
}

async function signLeaf(dir: string, caCert: string, caKey: string, leaf: LeafRequest): Promise<void> {
  const csr = join(dir, `${leaf.name}.csr`);
  const extensionsFile = join(dir, `${leaf.name}.ext`);
  await writeFile(extensionsFile, `${leaf.extensions.join("\n")}\n`);
  await run("openssl", ["req", "-new", "-key", leaf.key, "-subj", leaf.subject, "-out", csr]);
  await run("openssl", [
    "x509",
    "-req",
    "-in",
    csr,
    "-CA",
    caCert,
    "-CAkey",
    caKey,
    "-set_serial",
    `0x${randomBytes(16).toString("hex")}`,
    "-days",
    "3650",
    "-extfile",
    extensionsFile,
    "-out",
    leaf.cert,
  ]);
}
