// End to end: the API server serves DevicePluginConfig as v1alpha1 and v1beta1 through the operator's
// conversion webhook. Two replicas (leader election on, the operator's own RBAC) serve it behind a relay
// that spreads connections as a Service would; their certificates live a minute at most here, so the
// serving certificate and the CA both rotate during the file while requests keep converting.
import { X509Certificate } from "node:crypto";
import { connect } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KubeApiError, kubeRequest } from "../../src/kube/index.js";
import { startTcpRelay, type TcpRelay } from "../../tools/cluster/tcp-relay.js";
import { SERVICE_CLIENT_CONFIG, setClientConfig } from "../cluster/conversion-webhook.js";
import { kubeConfigFromInjected, kubectl, uniqueName, waitFor } from "../cluster/helpers.js";
import { kubectlTable } from "../cluster/kubectl-table.js";
import { installDpo, NAMESPACE, startOperator, type OperatorProcess } from "./support.js";

const kc = kubeConfigFromInjected();
const SECRET = "dpo-webhook-cert";
/** Short enough that the CA (60 s) and the serving certificate (20 s) both roll while this file runs. */
const CERT_VALIDITY_S = 20;
const CA_VALIDITY_S = 60;

let relay: TcpRelay;
let replicas: OperatorProcess[] = [];
const created: string[] = [];

/** What the Secret held over time, and the serving certificates each replica presented. */
const seenCAs = new Set<string>();
const seenServing = new Set<string>();
const presented = new Map<number, Set<string>>();
let sampler: NodeJS.Timeout | undefined;

function alphaManifest(name: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    apiVersion: "dpo.dev/v1alpha1",
    kind: "DevicePluginConfig",
    metadata: { name },
    spec: {
      resourceName: `conv.example/${name}`,
      backend: "Mock",
      mock: { devices: 2, idPrefix: "c" },
      sharedDevNum: 3,
      preferredAllocationPolicy: "balanced",
      nodeSelector: { "conv.example/none": "true" },
      ...extra,
    },
  });
}

interface ConfigJson {
  apiVersion: string;
  metadata: { annotations?: Record<string, string>; labels?: Record<string, string>; generation?: number };
  spec: Record<string, unknown>;
}

async function getAs(version: "v1alpha1" | "v1beta1", name: string): Promise<ConfigJson> {
  const out = await kubectl(["get", `devicepluginconfigs.${version}.dpo.dev`, name, "-o", "json"]);
  return JSON.parse(out.stdout) as ConfigJson;
}

/** The leaf certificate a replica presents to a new connection (its serial number), or undefined. */
function presentedSerial(port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port, rejectUnauthorized: false }, () => {
      const cert = socket.getPeerCertificate();
      socket.destroy();
      resolve(cert.serialNumber);
    });
    socket.setTimeout(2_000, () => (socket.destroy(), resolve(undefined)));
    socket.on("error", () => resolve(undefined));
  });
}

async function sample(): Promise<void> {
  try {
    const secret = await kubeRequest<{ data?: Record<string, string> }>(kc, {
      method: "GET",
      path: `/api/v1/namespaces/${NAMESPACE}/secrets/${SECRET}`,
    });
    const data = secret.data ?? {};
    if (data["ca.crt"]) seenCAs.add(data["ca.crt"]);
    if (data["tls.crt"])
      seenServing.add(new X509Certificate(Buffer.from(data["tls.crt"], "base64")).serialNumber);
  } catch {
    // A missed sample only makes the rotation assertions harder to pass.
  }
  for (const replica of replicas) {
    const serial = await presentedSerial(replica.webhookPort!);
    if (serial) presented.get(replica.webhookPort!)?.add(serial);
  }
}

beforeAll(async () => {
  relay = await startTcpRelay();
  // Start from an empty Secret, so the lifetimes below are the ones in use.
  await kubectl(["delete", "secret", SECRET, "-n", NAMESPACE, "--ignore-not-found"], { allowFailure: true });
  await installDpo({ conversionUrl: `https://127.0.0.1:${relay.port}/convert` });
  const lease = uniqueName("conversion");
  const args = [
    "--leader-elect=true",
    `--leader-election-id=${lease}`,
    "--webhook-addr=127.0.0.1:0",
    "--webhook-hosts=127.0.0.1",
    `--webhook-cert-validity=${CERT_VALIDITY_S}`,
    `--webhook-ca-validity=${CA_VALIDITY_S}`,
  ];
  replicas = await Promise.all([startOperator(args), startOperator(args)]);
  for (const r of replicas) {
    expect(r.webhookPort, "webhook port in the operator's start log").toBeGreaterThan(0);
    presented.set(r.webhookPort!, new Set());
  }
  relay.setBackends(replicas.map((r) => ({ host: "127.0.0.1", port: r.webhookPort! })));
  sampler = setInterval(() => void sample(), 500);
  // Both replicas serve a certificate, and the CRD trusts its CA: a v1alpha1 list converts.
  await waitFor(
    "both replicas to serve a certificate and a v1alpha1 list to convert",
    async (observe) => {
      const serials = await Promise.all(replicas.map((r) => presentedSerial(r.webhookPort!)));
      const list = await kubectl(["get", "devicepluginconfigs.v1alpha1.dpo.dev", "-o", "name"], {
        allowFailure: true,
      });
      observe({ serials, list: list.stderr.trim() || "ok" });
      return serials.every(Boolean) && list.exitCode === 0;
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
});

afterAll(async () => {
  if (sampler) clearInterval(sampler);
  if (created.length > 0) {
    await kubectl(
      ["delete", "devicepluginconfigs.v1beta1.dpo.dev", ...created, "--ignore-not-found", "--wait=false"],
      {
        allowFailure: true,
      },
    );
  }
  await Promise.all(replicas.map((r) => r.stop()));
  relay?.close();
  // Back to the in-cluster Service, so no later test meets a webhook URL nobody serves.
  await setClientConfig(SERVICE_CLIENT_CONFIG);
});

describe("DevicePluginConfig in two API versions", () => {
  it("creates in v1alpha1, reads in v1beta1, updates in v1beta1, reads in v1alpha1, updates there, reads back", async () => {
    const name = uniqueName("conv-a");
    created.push(name);
    await kubectl(["apply", "-f", "-"], { input: alphaManifest(name) });

    const beta = await getAs("v1beta1", name);
    expect(beta.apiVersion).toBe("dpo.dev/v1beta1");
    expect(beta.spec).toMatchObject({
      resourceName: `conv.example/${name}`,
      backend: { type: "Mock", mock: { devices: 2, idPrefix: "c" } },
      sharing: { strategy: "TimeSlicing", replicas: 3 },
      topology: { allocationPolicy: "Spread" },
      nodeSelector: { "conv.example/none": "true" },
    });
    expect(beta.metadata.annotations?.["dpo.dev/v1beta1-fields"]).toBeUndefined();

    // v1beta1-only fields, set through v1beta1.
    await kubectl([
      "patch",
      "devicepluginconfigs.v1beta1.dpo.dev",
      name,
      "--type=merge",
      "-p",
      JSON.stringify({ spec: { sharing: { failRequestsGreaterThanOne: true }, cdi: { enabled: true } } }),
    ]);
    const alpha = await getAs("v1alpha1", name);
    expect(alpha.apiVersion).toBe("dpo.dev/v1alpha1");
    expect(alpha.spec).toMatchObject({
      backend: "Mock",
      sharedDevNum: 3,
      preferredAllocationPolicy: "balanced",
    });
    const kept = JSON.parse(alpha.metadata.annotations?.["dpo.dev/v1beta1-fields"] ?? "{}") as {
      spec: Record<string, unknown>;
    };
    expect(kept.spec).toMatchObject({
      cdi: { enabled: true },
      sharing: { failRequestsGreaterThanOne: true },
    });

    // An update through v1alpha1 that v1alpha1 can say; the v1beta1-only fields survive it.
    await kubectl([
      "patch",
      "devicepluginconfigs.v1alpha1.dpo.dev",
      name,
      "--type=merge",
      "-p",
      JSON.stringify({ spec: { sharedDevNum: 5, preferredAllocationPolicy: "packed" } }),
    ]);
    const back = await getAs("v1beta1", name);
    expect(back.spec).toMatchObject({
      sharing: { strategy: "TimeSlicing", replicas: 5, failRequestsGreaterThanOne: true },
      topology: { allocationPolicy: "Packed" },
      cdi: { enabled: true },
    });
    expect(back.metadata.annotations?.["dpo.dev/v1beta1-fields"]).toBeUndefined();
    expect(back.metadata.generation).toBe(3);
  });

  it("creates in v1beta1 and reads the same object in v1alpha1", async () => {
    const name = uniqueName("conv-b");
    created.push(name);
    await kubectl(["apply", "-f", "-"], {
      input: JSON.stringify({
        apiVersion: "dpo.dev/v1beta1",
        kind: "DevicePluginConfig",
        metadata: { name, labels: { team: "x" } },
        spec: {
          resourceName: `conv.example/${name}`,
          backend: { type: "Mock", mock: { devices: 1 } },
          topology: { allocationPolicy: "NUMAAligned" },
          nodeSelector: { "conv.example/none": "true" },
        },
      }),
    });
    const alpha = await getAs("v1alpha1", name);
    expect(alpha.metadata.labels).toEqual({ team: "x" });
    expect(alpha.spec).toMatchObject({
      backend: "Mock",
      mock: { devices: 1 },
      preferredAllocationPolicy: "numa",
      sharedDevNum: 1,
    });
  });

  it("shows v1alpha1 columns from v1alpha1 fields in kubectl get, and the v1beta1 ones by default", async () => {
    const name = uniqueName("conv-c");
    created.push(name);
    await kubectl(["apply", "-f", "-"], { input: alphaManifest(name) });
    // The status columns may still be empty here: the table is read by the header's offsets.
    const alpha = await kubectl(["get", "devicepluginconfigs.v1alpha1.dpo.dev", name, "-o", "wide"]);
    const [alphaColumns] = kubectlTable(alpha.stdout);
    expect(alphaColumns, alpha.stdout).toMatchObject({
      NAME: name,
      RESOURCE: `conv.example/${name}`,
      BACKEND: "Mock",
      SHARED: "3",
      POLICY: "balanced",
    });
    const beta = await kubectl(["get", "dpc", name, "-o", "wide"]);
    const [betaColumns] = kubectlTable(beta.stdout);
    expect(betaColumns, beta.stdout).toMatchObject({
      NAME: name,
      BACKEND: "Mock",
      SHARING: "TimeSlicing",
      POLICY: "Spread",
    });
  });

  it("refuses a v1alpha1 object whose conversion annotation is not JSON, with the webhook's message", async () => {
    const name = uniqueName("conv-bad");
    const manifest = JSON.parse(alphaManifest(name)) as { metadata: Record<string, unknown> };
    manifest.metadata.annotations = { "dpo.dev/v1beta1-fields": "{not json" };
    const result = await kubectl(["create", "-f", "-"], {
      input: JSON.stringify(manifest),
      allowFailure: true,
    });
    expect(result.exitCode).not.toBe(0);
    expect(result.stderr).toContain(`DevicePluginConfig ${name}`);
    expect(result.stderr).toContain("metadata.annotations[dpo.dev/v1beta1-fields]: is not JSON");
    const after = await kubectl(["get", "dpc", name, "--ignore-not-found", "-o", "name"]);
    expect(after.stdout.trim()).toBe("");
  });

  it("is served by both replicas, leader or not", async () => {
    const counts = await waitFor(
      "both replicas to answer ConversionReviews",
      async (observe) => {
        // Parallel lists make the API server open more than one connection, which the relay spreads.
        await Promise.all(
          Array.from({ length: 6 }, () =>
            kubectl(["get", "devicepluginconfigs.v1alpha1.dpo.dev", "-o", "name"]),
          ),
        );
        const answered = await Promise.all(
          replicas.map((r) => r.metric("dpo_webhook_conversion_reviews_total")),
        );
        observe({ answered, connections: relay.connections() });
        return answered.every((n) => n > 0) ? answered : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    expect(counts).toHaveLength(2);
    const failures = await Promise.all(
      replicas.map((r) =>
        r.metric('dpo_webhook_conversion_reviews_total{to="dpo.dev/v1beta1",result="Failure"}'),
      ),
    );
    // Only the deliberately broken create above may have failed, on whichever replica got it.
    expect(failures.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(1);
  });

  it("keeps converting with no failed request while the serving certificate and the CA rotate", async () => {
    const name = uniqueName("conv-rot");
    created.push(name);
    await kubectl(["apply", "-f", "-"], { input: alphaManifest(name) });
    const failures: string[] = [];
    /** Requests that must convert while the CA rolls, and again once the first CA has expired. */
    const WANTED_PER_PHASE = 10;
    let rotated = Number.POSITIVE_INFINITY;
    const throttled: string[] = [];
    let requests = 0;
    /** When each request that converted came back. */
    const converted: number[] = [];
    let stop = false;
    /**
     * As client-go (kubectl, Argo CD, Flux) does: a 429 with Retry-After is waited out and retried, up to
     * 10 times. The API server answers 429 "storage is (re)initializing" for a moment after any change of
     * a CRD's spec, the caBundle included; that is not a failed conversion, and it is counted below.
     */
    const send = async (request: Parameters<typeof kubeRequest>[1]): Promise<void> => {
      for (let attempt = 0; ; attempt++) {
        try {
          await kubeRequest(kc, request);
          return;
        } catch (err) {
          if (!(err instanceof KubeApiError) || err.code !== 429 || attempt >= 10) throw err;
          throttled.push(`${new Date().toISOString()} ${err.message}`);
          await new Promise((resolve) => setTimeout(resolve, (err.retryAfterSeconds ?? 1) * 1000));
        }
      }
    };
    const load = (async () => {
      for (let i = 0; !stop; i++) {
        requests++;
        try {
          if (i % 3 === 0) {
            await send({ method: "GET", path: "/apis/dpo.dev/v1alpha1/devicepluginconfigs" });
          } else if (i % 3 === 1) {
            await send({ method: "GET", path: `/apis/dpo.dev/v1alpha1/devicepluginconfigs/${name}` });
          } else {
            await send({
              method: "PATCH",
              path: `/apis/dpo.dev/v1alpha1/devicepluginconfigs/${name}`,
              contentType: "application/merge-patch+json",
              body: { spec: { sharedDevNum: 2 + (i % 5) } },
            });
          }
          converted.push(Date.now());
        } catch (err) {
          failures.push(`${new Date().toISOString()} request ${i}: ${(err as Error).message}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    try {
      // The CA rolls (a second CA signs) and the first CA then expires; meanwhile serving certificates renew.
      await waitFor(
        "a second CA to sign the serving certificates of both replicas, and the first to expire",
        (observe) => {
          const perReplica = [...presented.values()].map((s) => s.size);
          observe({
            cas: seenCAs.size,
            serving: seenServing.size,
            perReplica,
            requests,
            failures: failures.length,
          });
          return seenCAs.size >= 2 && seenServing.size >= 3 && perReplica.every((n) => n >= 2);
        },
        { timeoutMs: 150_000, intervalMs: 1_000 },
      );
      rotated = Date.now();
      // Past the first CA's end (and its serving certificates'), requests still convert: the load runs on
      // until enough of them have, however slowly a loaded machine answers.
      const firstCa = new X509Certificate(Buffer.from([...seenCAs][0]!, "base64"));
      const expired = Date.parse(firstCa.validTo);
      await waitFor(
        `${WANTED_PER_PHASE} requests to convert past the first CA's end`,
        (observe) => {
          const after = converted.filter((t) => t > expired + 1_000).length;
          observe({
            now: new Date().toISOString(),
            firstCaEnds: firstCa.validTo,
            after,
            failures: failures.length,
          });
          return after >= WANTED_PER_PHASE;
        },
        { timeoutMs: 90_000, intervalMs: 500 },
      );
    } finally {
      stop = true;
      await load;
    }
    expect(failures).toEqual([]);
    // The load ran while the CA rolled and the serving certificates renewed, not only after.
    expect(converted.filter((t) => t <= rotated).length, `of ${requests} requests`).toBeGreaterThanOrEqual(
      WANTED_PER_PHASE,
    );
    // Every issue and renewal is on the record, as an Event on the Secret.
    const events = await kubectl([
      "get",
      "events",
      "-n",
      NAMESPACE,
      "--field-selector",
      `involvedObject.name=${SECRET},reason=CertificatesUpdated`,
      "-o",
      "jsonpath={.items[*].message}",
    ]);
    expect(events.stdout).toContain("promoted the next CA");
    // Each caBundle change (the next CA added, the expired one dropped) re-initializes the CRD's storage
    // for about a second; nothing else may throttle.
    expect(throttled.length, throttled.join("\n")).toBeLessThanOrEqual(12);
  }, 300_000);
});
